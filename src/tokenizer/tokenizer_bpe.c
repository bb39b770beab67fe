/* tokenizer_bpe.c — byte-level BPE as llama.cpp's llm_tokenizer_bpe runs it.
 *
 * 1. Pre-tokenize: the text (as code points, invalid UTF-8 replaced by U+FFFD) is cut
 *    into words by the regexes that tokenizer.ggml.pre names, applied one after the
 *    other, each within the pieces the previous one left (a regex splits a piece into
 *    its matches and the text between them).
 * 2. Every byte of a word's UTF-8 becomes its GPT-2 character ("Ġ" for a space).
 * 3. Adjacent symbols are merged, the pair with the lowest merge rank first (ties:
 *    leftmost), until no pair is a merge. A symbol that is no token falls back to the
 *    tokens of its single bytes, where the vocabulary has them.
 *
 * Reproducing llama.cpp's words exactly needs its regex engine's view of the text:
 *  - the GPT-2 and Llama-3 regexes run as llama.cpp's hand-written matchers
 *    (unicode_regex_split_custom_gpt2/llama3), quirks included;
 *  - a regex with Unicode classes (\p{L}, \p{N}, ...) runs, as in llama.cpp, over a
 *    "collapsed" text with one byte per code point: ASCII as itself, other whitespace
 *    as \v, other letters as 0xD2, numbers 0xD1, punctuation 0xD3, marks 0xD4, symbols
 *    0xD5, anything else 0xD0, and \p{X} in the regex becomes the class of that byte
 *    plus its ASCII members;
 *  - any other regex runs over the code points with non-ASCII whitespace as \v (as
 *    llama.cpp feeds std::wregex), here PCRE2 in UTF mode without UCP, so that \s and
 *    \d are ASCII like ECMAScript's.
 * PCRE2 stands in for std::regex: both are backtracking engines with leftmost-first
 * alternation, and $ is made to match only at the very end (PCRE2_DOLLAR_ENDONLY). */
#include "tokenizer_bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "error.h"
#include "symbols.h"
#include "unicode.h"

/* ---------------------------------------------------------------- regexes by name */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                         \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                          \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"
/* " ?[^(\s|.,!?…。，、।۔،)]+" */
#define RE_PORO                                                                        \
    " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94" \
    "\xd8\x8c)]+"

/* pre-tokenizer regex lists, as llama.cpp's llm_tokenizer_bpe constructor has them */
static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+",
                                         "[0-9][0-9][0-9]", NULL};
static const char *const re_llama3[] = {RE_LLAMA3, NULL};
static const char *const re_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf"
    "\xc7\x84-\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd"
    "\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-"
    "\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1"
    "\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf"
    "\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a\xe1\xb8\x80-"
    "\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d"
    "\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd"
    "\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84"
    "\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-"
    "\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87"
    "\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6"
    "\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-"
    "\xe2\x84\xbf\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-"
    "\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3"
    "\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-"
    "\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86"
    "\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90"
    "\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb"
    "\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0"
    "\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
    "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f"
    "\xe3\x80\x80-\xe3\x80\x82]+",
    "\\s+$",
    RE_CJK,
    "\\p{N}+",
    NULL};
static const char *const re_deepseek_coder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK,
                                                "\\p{N}", NULL};
static const char *const re_deepseek3[] = {
    "\\p{N}{1,3}",
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
    "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]",
                                        NULL};
static const char *const re_starcoder[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const re_gpt2[] = {RE_GPT2, NULL};
static const char *const re_qwen2[] = {RE_QWEN2, NULL};
static const char *const re_poro[] = {RE_PORO, NULL};
static const char *const re_viking[] = {RE_PORO, "\\p{N}", NULL};
static const char *const re_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}"
    "\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_chameleon[] = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2, NULL};
static const char *const re_gpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|"
    "'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+"
    "((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_seed_coder[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};

enum {
    PRE_IGNORE_MERGES = 1 << 0, /* ignore_merges = true */
    PRE_KEEP_SPACES = 1 << 1,   /* clean_spaces = false */
    PRE_ADD_BOS = 1 << 2,       /* add_bos defaults to true */
    PRE_NO_BOS = 1 << 3,        /* no default BOS id */
};

typedef struct {
    const char *name; /* tokenizer.ggml.pre */
    const char *const *regexes;
    unsigned flags;
} pre_def;

/* llama.cpp's tokenizer_pre names and what each implies */
static const pre_def pre_defs[] = {
    {"default", re_default, 0},
    {"llama3", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-v3", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-bpe", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon3", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon-h1", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"pixtral", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"midm-2.0", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"lfm2", re_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"deepseek-llm", re_deepseek_llm, PRE_KEEP_SPACES},
    {"deepseek-coder", re_deepseek_coder, PRE_KEEP_SPACES},
    {"deepseek-v3", re_deepseek3, PRE_KEEP_SPACES},
    {"hunyuan-dense", re_deepseek3, PRE_KEEP_SPACES},
    {"falcon", re_falcon, 0},
    {"mpt", re_gpt2, 0},
    {"starcoder", re_starcoder, 0},
    {"gpt-2", re_gpt2, 0},
    {"phi-2", re_gpt2, 0},
    {"jina-es", re_gpt2, 0},
    {"jina-de", re_gpt2, 0},
    {"gigachat", re_gpt2, 0},
    {"jina-v2-es", re_gpt2, 0},
    {"jina-v2-de", re_gpt2, 0},
    {"jina-v1-en", re_gpt2, 0},
    {"jina-v2-code", re_gpt2, 0},
    {"roberta-bpe", re_gpt2, 0},
    {"a.x-4.0", re_gpt2, 0},
    {"mellum", re_gpt2, 0},
    {"modern-bert", re_gpt2, 0},
    {"exaone4", re_gpt2, 0},
    {"refact", re_starcoder, 0},
    {"command-r", re_starcoder, PRE_KEEP_SPACES},
    {"qwen2", re_qwen2, PRE_KEEP_SPACES},
    {"deepseek-r1-qwen", re_qwen2, PRE_KEEP_SPACES},
    {"kormo", re_qwen2, PRE_KEEP_SPACES},
    {"f2llmv2", re_qwen2, PRE_KEEP_SPACES},
    {"solar-open", re_qwen2, PRE_KEEP_SPACES},
    {"stablelm2", re_qwen2, 0},
    {"megrez", re_qwen2, 0},
    {"hunyuan", re_qwen2, PRE_KEEP_SPACES},
    {"grok-2", re_qwen2, PRE_KEEP_SPACES},
    {"olmo", re_gpt2, 0},
    {"dbrx", re_llama3, 0},
    {"smaug-bpe", re_llama3, 0},
    {"poro-chat", re_poro, PRE_KEEP_SPACES},
    {"glm4", re_llama3, PRE_NO_BOS},
    {"chatglm-bpe", re_llama3, PRE_NO_BOS},
    {"viking", re_viking, PRE_KEEP_SPACES},
    {"jais", re_gpt2, 0},
    {"tekken", re_tekken, PRE_KEEP_SPACES | PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"smollm", re_starcoder, PRE_KEEP_SPACES},
    {"codeshell", re_starcoder, 0},
    {"bloom", re_poro, 0},
    {"gpt3-finnish", re_poro, 0},
    {"exaone", re_starcoder, 0},
    {"chameleon", re_chameleon, PRE_ADD_BOS | PRE_KEEP_SPACES},
    {"minerva-7b", re_starcoder, 0},
    {"mellum2", re_starcoder, 0},
    {"gpt-4o", re_gpt4o, PRE_KEEP_SPACES},
    {"llama4", re_gpt4o, PRE_KEEP_SPACES},
    {"kanana2", re_gpt4o, PRE_KEEP_SPACES},
    {"talkie", re_gpt4o, PRE_KEEP_SPACES},
    {"minimax-m2", re_gpt4o, PRE_KEEP_SPACES},
    {"trillion", re_gpt2, PRE_KEEP_SPACES},
    {"granite-docling", re_gpt2, PRE_KEEP_SPACES},
    {"bailingmoe", re_bailingmoe, PRE_KEEP_SPACES},
    {"bailingmoe2", re_bailingmoe, PRE_KEEP_SPACES},
    {"llada-moe", re_bailingmoe, PRE_KEEP_SPACES},
    {"seed-coder", re_seed_coder, PRE_KEEP_SPACES},
};

/* ---------------------------------------------------------------- compiled splitters */

typedef enum {
    SPLIT_GPT2,      /* llama.cpp's unicode_regex_split_custom_gpt2 */
    SPLIT_LLAMA3,    /* unicode_regex_split_custom_llama3 */
    SPLIT_COLLAPSED, /* PCRE2 over the collapsed text */
    SPLIT_WIDE,      /* PCRE2 (UTF) over the code points */
} split_kind;

enum { MAX_SPLITTERS = 8 };

struct ty_pretokenizer {
    int n;
    split_kind kind[MAX_SPLITTERS];
    pcre2_code *code[MAX_SPLITTERS];
    unsigned flags; /* PRE_* of its name */
};

/* llama.cpp's k_ucat_enum / k_ucat_cpt / k_ucat_map */
typedef struct {
    const char *name;
    char byte;
    const char *ascii;
} ucat;

static const ucat ucats[] = {
    {"\\p{N}", '\xD1', "0-9"},
    {"\\p{L}", '\xD2', "A-Za-z"},
    {"\\p{P}", '\xD3', "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", '\xD4', ""},
    {"\\p{S}", '\xD5', "\\$\\+<->^`\\|"},
    {"\\p{Lu}", '\xD2', "A-Za-z"},
    {"\\p{Ll}", '\xD2', "A-Za-z"},
    {"\\p{Lt}", '\xD2', "A-Za-z"},
    {"\\p{Lm}", '\xD2', "A-Za-z"},
    {"\\p{Lo}", '\xD2', "A-Za-z"},
};

static bool uses_categories(const char *re) {
    for (size_t i = 0; i < sizeof ucats / sizeof ucats[0]; i++)
        if (strstr(re, ucats[i].name)) return true;
    return false;
}

/* The regex over collapsed text, built as llama.cpp builds it: every known \p{X}
 * becomes its byte and ASCII members, in brackets unless already inside some. */
static toy_status collapse_regex(const char *re, ty_buf *out) {
    size_t n = strlen(re);
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)re[i] >= 0x80)
            return ty_error(TOY_ERR_UNSUPPORTED,
                            "pre-tokenizer regex has Unicode classes and non-ASCII text");
        if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
            ty_buf_append(out, "[", 1);
            inside = true;
            continue;
        }
        if (inside && re[i] == ']' && re[i - 1] != '\\') {
            ty_buf_append(out, "]", 1);
            inside = false;
            continue;
        }
        if (re[i] == '\\' && i + 3 < n && re[i + 1] == 'p' && re[i + 2] == '{') {
            const char *close = strchr(re + i + 3, '}');
            const ucat *cat = NULL;
            if (close && (size_t)(close - re) <= i + 10)
                for (size_t k = 0; k < sizeof ucats / sizeof ucats[0]; k++)
                    if (strlen(ucats[k].name) == (size_t)(close - re) - i + 1 &&
                        !memcmp(ucats[k].name, re + i, strlen(ucats[k].name)))
                        cat = &ucats[k];
            if (cat) {
                if (!inside) ty_buf_append(out, "[", 1);
                ty_buf_append(out, &cat->byte, 1);
                ty_buf_append(out, cat->ascii, strlen(cat->ascii));
                if (!inside) ty_buf_append(out, "]", 1);
                i = (size_t)(close - re);
                continue;
            }
        }
        ty_buf_append(out, re + i, 1);
    }
    return out->oom ? ty_error(TOY_ERR_NOMEM, "pre-tokenizer: out of memory") : TOY_OK;
}

static toy_status compile_regex(const char *pattern, size_t len, uint32_t options,
                                pcre2_code **out) {
    int err;
    PCRE2_SIZE erroff;
    *out = pcre2_compile((PCRE2_SPTR)pattern, len, options | PCRE2_DOLLAR_ENDONLY, &err, &erroff,
                         NULL);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return ty_error(TOY_ERR_UNSUPPORTED, "pre-tokenizer regex: %s at offset %zu",
                        (const char *)msg, (size_t)erroff);
    }
    pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
    return TOY_OK;
}

toy_status ty_pretokenizer_new(const char *name, size_t len, toy_vocab *v,
                               ty_pretokenizer **out) {
    /* llama.cpp falls back to the default pre-tokenizer (with a warning) when the
     * key is absent */
    const pre_def *def = &pre_defs[0];
    if (len) {
        def = NULL;
        for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++)
            if (strlen(pre_defs[i].name) == len && !memcmp(pre_defs[i].name, name, len))
                def = &pre_defs[i];
        if (!def)
            return ty_error(TOY_ERR_UNSUPPORTED,
                            "tokenizer.ggml.pre: unknown pre-tokenizer '%.*s'", (int)len, name);
    }
    if (v && (def->flags & PRE_IGNORE_MERGES)) v->ignore_merges = true;
    if (v && (def->flags & PRE_KEEP_SPACES)) v->clean_spaces = false;
    if (v && (def->flags & PRE_ADD_BOS)) v->add_bos = true;
    if (v && (def->flags & PRE_NO_BOS)) v->bos = -1;

    ty_pretokenizer *p = calloc(1, sizeof *p);
    if (!p) return ty_error(TOY_ERR_NOMEM, "pre-tokenizer: out of memory");
    p->flags = def->flags;
    toy_status st = TOY_OK;
    for (const char *const *re = def->regexes; *re && !st; re++) {
        int i = p->n++;
        if (!strcmp(*re, RE_GPT2)) {
            p->kind[i] = SPLIT_GPT2;
        } else if (!strcmp(*re, RE_LLAMA3)) {
            p->kind[i] = SPLIT_LLAMA3;
        } else if (uses_categories(*re)) {
            p->kind[i] = SPLIT_COLLAPSED;
            ty_buf c = {0};
            st = collapse_regex(*re, &c);
            if (!st) st = compile_regex(c.v, c.n, 0, &p->code[i]);
            free(c.v);
        } else {
            p->kind[i] = SPLIT_WIDE;
            st = compile_regex(*re, strlen(*re), PCRE2_UTF, &p->code[i]);
        }
    }
    if (st) {
        ty_pretokenizer_free(p);
        return ty_error_wrap(st, "tokenizer.ggml.pre '%s'", def->name);
    }
    *out = p;
    return TOY_OK;
}

void ty_pretokenizer_free(ty_pretokenizer *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

bool ty_pretokenizer_ignores_merges(const ty_pretokenizer *p) {
    return p->flags & PRE_IGNORE_MERGES;
}

const char *ty_pretokenizer_name(size_t i) {
    return i < sizeof pre_defs / sizeof pre_defs[0] ? pre_defs[i].name : NULL;
}

/* ---------------------------------------------------------------- splitting */

/* Word lengths in code points, in order. */
typedef struct {
    size_t *v;
    size_t n, cap;
    bool oom;
} lengths;

static void lengths_push(lengths *l, size_t len) {
    if (!len) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        size_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = len;
}

/* The text as pre-tokenizing sees it. */
typedef struct {
    const uint32_t *cpts;
    const uint16_t *flags;
    size_t n;
    char *collapsed;     /* one byte per code point, built on first use */
    char *wide;          /* UTF-8 for the non-category regexes, built on first use */
    size_t *wide_offset; /* byte offset of each code point in wide, n + 1 entries */
} pretok_text;

#define OUT_OF_RANGE 0xFFFFFFFFu

/* The state of one hand-written matcher over the piece [ini, end). */
typedef struct {
    const pretok_text *t;
    size_t ini, end, prev_end;
    lengths *out;
} custom_split;

static uint32_t cpt_at(const custom_split *c, size_t pos) {
    return pos >= c->ini && pos < c->end ? c->t->cpts[pos] : OUT_OF_RANGE;
}

/* 0 outside the piece, so a test of "any flag" is a test of "inside" */
static uint16_t flags_at(const custom_split *c, size_t pos) {
    return pos >= c->ini && pos < c->end ? c->t->flags[pos] : 0;
}

static size_t add_token(custom_split *c, size_t end) {
    size_t len = end - c->prev_end;
    lengths_push(c->out, len);
    c->prev_end = end;
    return len;
}

/* the second and third characters of 're, 've, 'll */
static bool is_contraction3(uint32_t a, uint32_t b) {
    return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l');
}

/* The length of 's|'t|'re|'ve|'m|'ll|'d at pos, 0 where none is there; fold_case for
 * llama3's (?i:...), lowercased with llama.cpp's table. */
static size_t contraction_at(custom_split *c, size_t pos, bool fold_case) {
    if (cpt_at(c, pos) != '\'' || pos + 1 >= c->end) return 0;
    uint32_t next = cpt_at(c, pos + 1);
    if (fold_case) next = ty_unicode_tolower(next);
    if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
    if (pos + 2 >= c->end) return 0;
    uint32_t third = cpt_at(c, pos + 2);
    if (fold_case) third = ty_unicode_tolower(third);
    return is_contraction3(next, third) ? 3 : 0;
}

/* \s+(?!\S)|\s+ for the n_ws white-space characters at pos, or one character where there
 * are none (no match): takes the piece and returns where the next one starts. */
static size_t split_white_space(custom_split *c, size_t pos, size_t n_ws) {
    if (n_ws > 1 && cpt_at(c, pos + n_ws) != OUT_OF_RANGE) pos += n_ws - 1; /* \s+(?!\S) */
    else if (n_ws > 0) pos += n_ws;
    else pos++; /* no match: one character */
    add_token(c, pos);
    return pos;
}

enum {
    F_WS = TY_UCD_WHITESPACE,
    F_L = TY_UCD_LETTER,
    F_N = TY_UCD_NUMBER,
};

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(custom_split *c) {
    for (size_t pos = c->ini; pos < c->end;) {
        uint32_t cpt = cpt_at(c, pos);
        uint16_t flags = flags_at(c, pos);

        size_t n_contraction = contraction_at(c, pos, false);
        if (n_contraction) {
            pos += add_token(c, pos + n_contraction);
            continue;
        }

        uint16_t flags2 = cpt == ' ' ? flags_at(c, pos + 1) : flags;
        if (flags2 & F_L) {
            pos += cpt == ' ';
            while (flags2 & F_L) flags2 = flags_at(c, ++pos);
            add_token(c, pos);
            continue;
        }
        if (flags2 & F_N) {
            pos += cpt == ' ';
            while (flags2 & F_N) flags2 = flags_at(c, ++pos);
            add_token(c, pos);
            continue;
        }
        if (!(flags2 & (F_WS | F_L | F_N)) && flags2) {
            pos += cpt == ' ';
            while (!(flags2 & (F_WS | F_L | F_N)) && flags2) flags2 = flags_at(c, ++pos);
            add_token(c, pos);
            continue;
        }

        size_t n_ws = 0;
        while (flags_at(c, pos + n_ws) & F_WS) n_ws++;
        pos = split_white_space(c, pos, n_ws);
    }
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static void split_llama3(custom_split *c) {
    for (size_t pos = c->ini; pos < c->end;) {
        uint32_t cpt = cpt_at(c, pos);
        uint16_t flags = flags_at(c, pos);

        size_t n_contraction = contraction_at(c, pos, true);
        if (n_contraction) {
            pos += add_token(c, pos + n_contraction);
            continue;
        }

        if (!(cpt == '\r' || cpt == '\n' || (flags & F_N))) {
            if ((flags & F_L) || (flags_at(c, pos + 1) & F_L)) {
                pos++;
                while (flags_at(c, pos) & F_L) pos++;
                add_token(c, pos);
                continue;
            }
        }

        if (flags & F_N) { /* \p{N}{1,3} */
            size_t ini = pos;
            while (flags_at(c, pos) & F_N) {
                if (++pos - ini >= 3) {
                    add_token(c, pos);
                    ini = pos;
                }
            }
            add_token(c, pos);
            continue;
        }

        /* llama.cpp tests the current character's flags here, not the next one's, so
         * a space at the end of the piece is taken by this branch (alone) */
        uint16_t flags2 = cpt == ' ' ? flags_at(c, pos + 1) : flags;
        if (!(flags2 & (F_WS | F_L | F_N)) && flags) {
            pos += cpt == ' ';
            while (!(flags2 & (F_WS | F_L | F_N)) && flags2) flags2 = flags_at(c, ++pos);
            uint32_t cpt2 = cpt_at(c, pos);
            while (cpt2 == '\r' || cpt2 == '\n') cpt2 = cpt_at(c, ++pos);
            add_token(c, pos);
            continue;
        }

        size_t n_ws = 0, last_end_r_or_n = 0;
        while (flags_at(c, pos + n_ws) & F_WS) {
            uint32_t cpt2 = cpt_at(c, pos + n_ws);
            if (cpt2 == '\r' || cpt2 == '\n') last_end_r_or_n = pos + n_ws + 1;
            n_ws++;
        }
        if (last_end_r_or_n > 0) { /* \s*[\r\n]+ */
            pos = last_end_r_or_n;
            add_token(c, pos);
            continue;
        }
        pos = split_white_space(c, pos, n_ws);
    }
}

static toy_status build_collapsed(pretok_text *t) {
    if (t->collapsed) return TOY_OK;
    t->collapsed = malloc(t->n ? t->n : 1);
    if (!t->collapsed) return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    for (size_t i = 0; i < t->n; i++) {
        uint32_t c = t->cpts[i];
        uint16_t f = t->flags[i];
        char b;
        if (c < 128) b = (char)c;
        else if (f & F_WS) b = '\x0B';
        else if (f & TY_UCD_NUMBER) b = '\xD1';
        else if (f & TY_UCD_LETTER) b = '\xD2';
        else if (f & TY_UCD_PUNCTUATION) b = '\xD3';
        else if (f & TY_UCD_ACCENT_MARK) b = '\xD4';
        else if (f & TY_UCD_SYMBOL) b = '\xD5';
        else b = '\xD0';
        t->collapsed[i] = b;
    }
    return TOY_OK;
}

static toy_status build_wide(pretok_text *t) {
    if (t->wide) return TOY_OK;
    t->wide = malloc(4 * t->n + 1);
    t->wide_offset = malloc((t->n + 1) * sizeof *t->wide_offset);
    if (!t->wide || !t->wide_offset) return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    size_t o = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t c = t->cpts[i];
        if (c > 0x7F && (t->flags[i] & F_WS)) c = 0x0B;
        /* keep PCRE2's input valid UTF-8; no regex here names these code points */
        if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) c = TOY_UNICODE_REPLACEMENT;
        t->wide_offset[i] = o;
        o += ty_utf8_encode(c, t->wide + o);
    }
    t->wide_offset[t->n] = o;
    return TOY_OK;
}

/* code point index of a byte offset of the wide text (at a character boundary) */
static size_t wide_cpt(const pretok_text *t, size_t byte) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->wide_offset[mid] < byte)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Splits the piece [ini, end) into the regex's matches and the text between them,
 * as llama.cpp's unicode_regex_split_stl does with std::regex_iterator. */
/* What one regex match needs besides the pattern. The JIT's default 32 KiB stack is
 * too small for a long run of letters under the gpt-4o/tekken patterns (each letter
 * is one repetition of a group); a larger one is made when that happens. */
typedef struct {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *stack;
} matcher;

enum { JIT_STACK_MAX = 256 << 20 };

static int match(matcher *m, const pcre2_code *code, const char *subject, size_t len,
                 size_t from, uint32_t options) {
    int rc = pcre2_match(code, (PCRE2_SPTR)subject, len, from, options, m->md, m->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !m->stack) {
        m->mctx = pcre2_match_context_create(NULL);
        m->stack = pcre2_jit_stack_create(32 << 10, JIT_STACK_MAX, NULL);
        if (!m->mctx || !m->stack) return PCRE2_ERROR_NOMEMORY;
        pcre2_jit_stack_assign(m->mctx, NULL, m->stack);
        rc = pcre2_match(code, (PCRE2_SPTR)subject, len, from, options, m->md, m->mctx);
    }
    return rc;
}

static toy_status split_regex(pretok_text *t, split_kind kind, const pcre2_code *code,
                              matcher *m, size_t ini, size_t end, lengths *out) {
    const char *subject;
    size_t len, base;
    uint32_t options = 0;
    if (kind == SPLIT_COLLAPSED) {
        subject = t->collapsed + ini;
        len = end - ini;
        base = 0;
    } else {
        subject = t->wide + t->wide_offset[ini];
        len = t->wide_offset[end] - t->wide_offset[ini];
        base = t->wide_offset[ini];
        options = PCRE2_NO_UTF_CHECK;
    }
    /* cpt(b): code point index of byte b of the subject */
#define CPT(b) (kind == SPLIT_COLLAPSED ? ini + (b) : wide_cpt(t, base + (b)))

    size_t last = 0, from = 0;
    while (from <= len) {
        int rc = match(m, code, subject, len, from, options);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ty_error(TOY_ERR_INVALID, "tokenize: pre-tokenizer regex failed: %s",
                            (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m0 > last) lengths_push(out, CPT(m0) - CPT(last));
        if (m1 == m0) {
            /* an empty match (a lookahead) only splits; the search goes on one
             * character further, as regex_iterator's does */
            last = m0;
            if (m0 >= len) break;
            from = m0 + (kind == SPLIT_COLLAPSED ? 1 : ty_utf8_len((unsigned char)subject[m0]));
            continue;
        }
        lengths_push(out, CPT(m1) - CPT(m0));
        last = from = m1;
    }
    if (last < len) lengths_push(out, CPT(len) - CPT(last));
#undef CPT
    return TOY_OK;
}

/* Runs the pre-tokenizer's splitters in turn over the text, each within the pieces
 * of the one before. */
static toy_status pretokenize(const ty_pretokenizer *p, pretok_text *t, lengths *words) {
    lengths cur = {0}, next = {0};
    lengths_push(&cur, t->n);
    toy_status st = TOY_OK;
    matcher m = {pcre2_match_data_create(1, NULL), NULL, NULL};
    if (!m.md) st = ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");

    for (int k = 0; k < p->n && !st; k++) {
        next.n = 0;
        if (p->kind[k] == SPLIT_COLLAPSED) st = build_collapsed(t);
        if (p->kind[k] == SPLIT_WIDE) st = build_wide(t);
        size_t start = 0;
        for (size_t i = 0; i < cur.n && !st; i++) {
            size_t end = start + cur.v[i];
            if (p->kind[k] == SPLIT_GPT2 || p->kind[k] == SPLIT_LLAMA3) {
                custom_split c = {t, start, end, start, &next};
                if (p->kind[k] == SPLIT_GPT2)
                    split_gpt2(&c);
                else
                    split_llama3(&c);
            } else {
                st = split_regex(t, p->kind[k], p->code[k], &m, start, end, &next);
            }
            start = end;
        }
        if (!st && next.oom) st = ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
        lengths tmp = cur;
        cur = next;
        next = tmp;
    }

    pcre2_match_data_free(m.md);
    pcre2_match_context_free(m.mctx);
    pcre2_jit_stack_free(m.stack);
    free(next.v);
    if (st) {
        free(cur.v);
        return st;
    }
    *words = cur;
    return TOY_OK;
}

/* ---------------------------------------------------------------- merging */

typedef struct {
    const toy_vocab *vocab;
    const char *word;
    ty_symbol *sym;
    size_t sym_cap;
    ty_bigram_queue queue;
    ty_buf key; /* "left right", the form merges are stored in */
    bool oom;
} bpe_session;

static void add_bigram(bpe_session *s, int left, int right) {
    if (left < 0 || right < 0) return;
    const ty_symbol *l = &s->sym[left], *r = &s->sym[right];
    s->key.n = 0;
    ty_buf_append(&s->key, s->word + l->off, l->n);
    ty_buf_append(&s->key, " ", 1);
    ty_buf_append(&s->key, s->word + r->off, r->n);
    if (s->key.oom) {
        s->oom = true;
        return;
    }
    int32_t rank = ty_strmap_find(&s->vocab->merges, s->key.v, s->key.n);
    if (rank < 0) return;
    if (!ty_bigram_push(&s->queue, (ty_bigram){left, right, rank, l->n + r->n})) s->oom = true;
}

/* One pre-token, already in GPT-2 characters. */
static void merge_word(bpe_session *s, const char *w, size_t n, ty_ids *out) {
    const toy_vocab *v = s->vocab;
    if (!n) return;
    if (v->ignore_merges) {
        int32_t id = ty_vocab_find(v, w, n);
        if (id >= 0) {
            ty_ids_push(out, id);
            return;
        }
    }
    if (n > s->sym_cap) {
        ty_symbol *sym = realloc(s->sym, n * sizeof *sym);
        if (!sym) {
            s->oom = true;
            return;
        }
        s->sym = sym;
        s->sym_cap = n;
    }
    s->word = w;
    s->queue.n = 0;
    int n_sym = ty_symbols_init(s->sym, w, n);
    for (int i = 1; i < n_sym; i++) add_bigram(s, i - 1, i);

    for (int left; !s->oom && (left = ty_bigram_merge_next(&s->queue, s->sym)) >= 0;) {
        add_bigram(s, s->sym[left].prev, left);
        add_bigram(s, left, s->sym[left].next);
    }

    /* llama.cpp looks up each byte of a symbol that is no token as a one-byte token,
     * and drops the byte when there is none */
    ty_symbols_emit(v, w, s->sym, n_sym, -1, out);
}

toy_status ty_pretokenize(const ty_pretokenizer *p, const char *text, size_t len,
                          ty_pretoken_fn fn, void *user) {
    /* the buffers below take up to 8 bytes per byte of text (build_wide: 4 + offsets) */
    if (len > SIZE_MAX / 16)
        return ty_error(TOY_ERR_INVALID, "tokenize: a text of %zu bytes is too long", len);
    uint32_t *cpts = malloc((len ? len : 1) * sizeof *cpts);
    uint16_t *flags = malloc((len ? len : 1) * sizeof *flags);
    pretok_text t = {.cpts = cpts, .flags = flags};
    lengths words = {0};
    ty_buf word = {0};
    toy_status st = TOY_OK;

    if (!cpts || !flags) {
        st = ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    } else {
        for (size_t pos = 0; pos < len; t.n++) {
            cpts[t.n] = ty_utf8_decode(text, len, &pos);
            flags[t.n] = ty_unicode_flags(cpts[t.n]);
        }
        st = pretokenize(p, &t, &words);
    }
    size_t start = 0;
    for (size_t w = 0; !st && w < words.n; w++) {
        word.n = 0;
        for (size_t i = start; i < start + words.v[w]; i++) {
            char utf8[4];
            ty_buf_append(&word, utf8, ty_utf8_encode(t.cpts[i], utf8));
        }
        start += words.v[w];
        st = word.oom ? ty_error(TOY_ERR_NOMEM, "tokenize: out of memory")
                      : fn(user, word.v, word.n);
    }

    free(cpts);
    free(flags);
    free(t.collapsed);
    free(t.wide);
    free(t.wide_offset);
    free(words.v);
    free(word.v);
    return st;
}

typedef struct {
    bpe_session s;
    ty_buf enc; /* the word in GPT-2 characters */
    char byte_chars[256][4];
    unsigned char byte_char_len[256];
    ty_ids *out;
} bpe_words;

/* One pre-token: its bytes as GPT-2 characters, through the merges. */
static toy_status merge_pretoken(void *user, const char *word, size_t len) {
    bpe_words *b = user;
    b->enc.n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)word[i];
        ty_buf_append(&b->enc, b->byte_chars[c], b->byte_char_len[c]);
    }
    if (!b->enc.oom) merge_word(&b->s, b->enc.v, b->enc.n, b->out);
    if (b->enc.oom || b->s.oom) return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    return TOY_OK;
}

toy_status ty_bpe_tokenize(const toy_vocab *v, const char *text, size_t len, ty_ids *out) {
    bpe_words b = {.s = {.vocab = v}, .out = out};
    for (int c = 0; c < 256; c++)
        b.byte_char_len[c] = (unsigned char)ty_utf8_encode(ty_unicode_byte_to_cpt((uint8_t)c),
                                                           b.byte_chars[c]);
    toy_status st = ty_pretokenize(v->pre, text, len, merge_pretoken, &b);
    free(b.s.sym);
    free(b.s.queue.v);
    free(b.s.key.v);
    free(b.enc.v);
    return st;
}
