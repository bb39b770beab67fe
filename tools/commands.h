/* commands.h — the subcommands of the toy command. Each returns the process exit code
 * and prints its own errors to stderr (one line each). */
#ifndef TOY_COMMANDS_H
#define TOY_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "toy.h"

int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_init(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_grad(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_lora(int argc, char **argv);
int cmd_cka(int argc, char **argv);
int cmd_convert(int argc, char **argv);

/* Every command is two steps: parse_NAME_options fills a NAME_options from argv, and
 * run_NAME does the work with it and returns the exit code (1 for a failure). A parse
 * function returns GO_ON, or the exit code to stop with: 0 after --help, 2 after a
 * usage error (its message printed). */
#define GO_ON (-1)

/* "toy CMD: unknown or incomplete option 'ARG' (see toy CMD --help)"; returns 2. */
int unknown_option(const char *cmd, const char *arg);

/* Shared by the commands: parse a whole non-negative integer option value. */
bool parse_int_arg(const char *cmd, const char *flag, const char *value, int min, int max,
                   int *out);
/* A finite float option value. */
bool parse_float_arg(const char *cmd, const char *flag, const char *value, float *out);

/* -m/--model FILE, -t/--threads N and --no-mmap, of the commands that load a model:
 * parse like parse_shape_option (-m without a value is not one of them). */
typedef struct {
    const char *path;
    int n_threads; /* set to default_threads() before parsing */
    bool no_mmap;
} model_options;
int parse_model_option(const char *cmd, int argc, char **argv, int *i, model_options *o);

/* The options that shape a new model (toy init, toy train): --arch, --preset, the
 * dimensions, --untied, --name, --vocab-from. Returns 1 if argv[*i] was one (*i advanced
 * past its value), 0 if not, -1 on a bad value (message printed). */
int parse_shape_option(const char *cmd, int argc, char **argv, int *i, toy_init_params *p);
extern const char *const shape_options_help;

/* The bundled model (toy-kjv.gguf) if it can be found, else NULL. */
#define TOY_DEFAULT_MODEL "toy-kjv.gguf"
const char *default_model_path(void);

/* The default of -t: the CPUs this process may run on, within its cgroup's CPU quota
 * (at most 256). More threads than free cores only slow toy down. */
int default_threads(void);

/* "1,2,3" to token ids (malloc'd), or NULL after a message naming the bad item. */
int32_t *parse_token_list(const char *cmd, const char *s, int32_t *n_out);

/* --lora FILE [--lora-scale S] (repeatable): parse like parse_shape_option; apply loads
 * the adapters (once) and sets them on the context, printing any error. */
#define LORA_MAX 8
typedef struct {
    const char *path[LORA_MAX];
    float scale[LORA_MAX];
    toy_lora *lora[LORA_MAX];
    int n;
} lora_options;
int lora_parse_option(const char *cmd, int argc, char **argv, int *i, lora_options *o);
bool lora_options_apply(const char *cmd, lora_options *o, const toy_model *m, toy_context *ctx);
void lora_options_free(lora_options *o);
extern const char *const lora_options_help;

/* --trace [PATTERN] --trace-head H --trace-format text|json --trace-file F (trace_options.c):
 * parse like lora_parse_option; begin (after the model loads) opens the file; apply sets
 * the context's callback when --trace was given; end closes the file. */
typedef struct {
    const char *pattern; /* comma-separated globs; NULL: no tracing */
    int32_t head;        /* -1: every head */
    bool json;
    const char *path;    /* NULL: stderr */
    const char *cmd;
    FILE *out;
    int32_t n_head, n_head_kv;
} trace_options;
#define TRACE_OPTIONS_INIT {NULL, -1, false, NULL, NULL, NULL, 0, 0}
#define TRACE_PATTERN_MAX 512 /* bytes of a --trace pattern, its NUL included */
int trace_parse_option(const char *cmd, int argc, char **argv, int *i, trace_options *o);
bool trace_options_check(const char *cmd, const trace_options *o); /* the options agree; begin checks too */
bool trace_options_begin(const char *cmd, trace_options *o, const toy_model *m);
void trace_options_apply(trace_options *o, toy_context_params *cp);
bool trace_options_end(trace_options *o);
void trace_tap(void *user, const char *name, const float *x, int64_t n_tok, int64_t n);
extern const char *const trace_options_help;

/* --chat-template NAME, --chat-template-file F, --chat-template-kwargs JSON
 * (chat_template_options.c): parse like lora_parse_option; open gives the template to use
 * (the model's own by default; a model without one, or with one that cannot be read, gets
 * a built-in family, said on stderr), NULL after an error. */
typedef struct {
    const char *name, *file, *kwargs;
} chat_template_options;
int chat_template_parse_option(const char *cmd, int argc, char **argv, int *i, chat_template_options *o);
bool chat_template_options_check(const char *cmd, const chat_template_options *o);
toy_chat_template *chat_template_open(const char *cmd, const toy_model *m, const chat_template_options *o);
/* Whether a rendered prompt is tokenized with add_special: not when it begins with the
 * template's BOS text (the template wrote it; the tokenizer would add a second). */
bool chat_prompt_add_bos(const toy_chat_template *t, const char *prompt);
extern const char *const chat_template_options_help;

/* A whole text file (any kind that reads to its end: a pipe too), malloc'd and
 * NUL-terminated, with *len its bytes; NULL after "toy CMD: PATH: why" on stderr. */
char *read_text_file(const char *cmd, const char *path, size_t *len);

/* Loads a model, mapped or (--no-mmap) read into memory; an error is printed as
 * "toy CMD: message". */
bool load_model(const char *cmd, const char *path, bool no_mmap, toy_model **out);

/* Shared by the commands: parse a KV cache type (f32, f16, bf16, q8_0). */
bool parse_cache_type(const char *cmd, const char *flag, const char *value, int *out);
/* --attn fused|plain (toy_attn) */
bool parse_attn(const char *cmd, const char *value, toy_attn *out);

/* JSON output: a string value with escapes; invalid UTF-8 becomes U+FFFD. */
void print_json_string(FILE *f, const char *s, size_t len);
/* Text with control bytes and bytes that are no valid UTF-8 shown as \xNN. */
void print_piece(FILE *f, const char *s, size_t len);
/* A double as JSON (non-finite numbers become null). */
void print_json_number(FILE *f, double x);

#endif
