/* families.c — chat templates without a Jinja engine, the way llama.cpp's
 * llm_chat_detect_template and llm_chat_apply_template do them (src/llama-chat.cpp): a
 * family is recognised by its name or by marker strings in the template text, and each
 * family's prompt format is written out by hand. The outputs match llama.cpp's byte for
 * byte, quirks included (which family trims which message, where a system message goes
 * when the model has none, which roles a format ignores); the quirks are noted where
 * they happen. Roles are free strings, as in llama.cpp: a format that names the role
 * writes whatever it is given, the others treat an unknown role as its "else" case. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "error.h"

typedef enum {
    CHAT_CHATML,
    CHAT_LLAMA2,
    CHAT_LLAMA2_SYS,
    CHAT_LLAMA2_SYS_BOS,
    CHAT_LLAMA2_SYS_STRIP,
    CHAT_MISTRAL_V1,
    CHAT_MISTRAL_V3,
    CHAT_MISTRAL_V3_TEKKEN,
    CHAT_MISTRAL_V7,
    CHAT_MISTRAL_V7_TEKKEN,
    CHAT_PHI3,
    CHAT_PHI4,
    CHAT_FALCON3,
    CHAT_ZEPHYR,
    CHAT_MONARCH,
    CHAT_GEMMA,
    CHAT_ORION,
    CHAT_OPENCHAT,
    CHAT_VICUNA,
    CHAT_VICUNA_ORCA,
    CHAT_DEEPSEEK,
    CHAT_DEEPSEEK2,
    CHAT_DEEPSEEK3,
    CHAT_COMMAND_R,
    CHAT_LLAMA3,
    CHAT_CHATGLM3,
    CHAT_CHATGLM4,
    CHAT_GLMEDGE,
    CHAT_MINICPM,
    CHAT_EXAONE3,
    CHAT_EXAONE4,
    CHAT_RWKV_WORLD,
    CHAT_GRANITE,
    CHAT_GIGACHAT,
    CHAT_MEGREZ,
    CHAT_YANDEX,
    CHAT_BAILING,
    CHAT_LLAMA4,
    CHAT_SMOLVLM,
    CHAT_DOTS1,
    CHAT_HUNYUAN_MOE,
    CHAT_GPT_OSS,
    CHAT_HUNYUAN_DENSE,
    CHAT_KIMI_K2,
    CHAT_SEED_OSS,
    CHAT_N_FAMILIES,
    CHAT_UNKNOWN = CHAT_N_FAMILIES,
} chat_family;


/* ---------------------------------------------------------------- output */


/* llama.cpp's trim(): the C locale's isspace at both ends. */
static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static void put_trimmed(ty_buf *b, const char *s) {
    size_t len = strlen(s);
    while (len > 0 && is_space(*s)) s++, len--;
    while (len > 0 && is_space(s[len - 1])) len--;
    ty_buf_append(b, s, len);
}

static bool role_is(const toy_chat_message *m, const char *role) {
    return strcmp(m->role, role) == 0;
}

/* ASCII capitals, as std::toupper does in the C locale. */
static char upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

/* ---------------------------------------------------------------- formats */

/* llm_chat_apply_template, one family at a time: each writes the conversation to b. f
 * tells the variants of a shared format apart. */
static void format_chatml(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++)
        TOY_BUF_PUT(b, "<|im_start|>", msgs[i].role, "\n", msgs[i].content, "<|im_end|>\n");
    if (add_ass) TOY_BUF_PUT(b, "<|im_start|>assistant\n");
}

static void format_mistral_v7(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* v7 puts a space after each opening tag, v7-tekken does not; neither has a
     * generation prompt (the prompt ends with [/INST]) */
    const char *sp = f == CHAT_MISTRAL_V7 ? " " : "";
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, "[SYSTEM_PROMPT]", sp, m->content, "[/SYSTEM_PROMPT]");
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "[INST]", sp, m->content, "[/INST]");
        else
            TOY_BUF_PUT(b, sp, m->content, "</s>");
    }
}

static void format_mistral_v1_v3(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* Mistral's cookbook formats: v1 has a space before [INST] and [/INST], tekken
     * none after them, and only v3 trims the assistant's message. A system message
     * opens the first [INST] and runs into the user message after it; any role but
     * system and user is the assistant. No generation prompt. */
    const char *lead = f == CHAT_MISTRAL_V1 ? " " : "";
    const char *trail = f == CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
    bool inside_turn = false;
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (!inside_turn) TOY_BUF_PUT(b, lead, "[INST]", trail);
        inside_turn = true;
        if (role_is(m, "system")) {
            TOY_BUF_PUT(b, m->content, "\n\n");
        } else if (role_is(m, "user")) {
            TOY_BUF_PUT(b, m->content, lead, "[/INST]");
        } else {
            TOY_BUF_PUT(b, trail);
            if (f == CHAT_MISTRAL_V3)
                put_trimmed(b, m->content);
            else
                TOY_BUF_PUT(b, m->content);
            TOY_BUF_PUT(b, "</s>");
            inside_turn = false;
        }
    }
}

static void format_llama2(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* Plain llama2 has no <<SYS>> block: a system message is written into the first
     * turn, followed by a newline. The first [INST] has no <s> (the tokenizer adds
     * BOS); -bos puts <s> before each later one; -strip trims every message. Any role
     * but system and user is the assistant. No generation prompt. */
    const bool sys_block = f != CHAT_LLAMA2;
    const bool bos_inside = f == CHAT_LLAMA2_SYS_BOS;
    const bool strip = f == CHAT_LLAMA2_SYS_STRIP;
    bool inside_turn = true;
    TOY_BUF_PUT(b, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        const bool system = role_is(m, "system"), user = role_is(m, "user");
        if (!inside_turn) TOY_BUF_PUT(b, bos_inside ? "<s>[INST] " : "[INST] ");
        inside_turn = true;
        if (system && sys_block) TOY_BUF_PUT(b, "<<SYS>>\n");
        if (strip)
            put_trimmed(b, m->content);
        else
            TOY_BUF_PUT(b, m->content);
        if (system) {
            TOY_BUF_PUT(b, sys_block ? "\n<</SYS>>\n\n" : "\n");
        } else if (user) {
            TOY_BUF_PUT(b, " [/INST]");
        } else {
            TOY_BUF_PUT(b, "</s>");
            inside_turn = false;
        }
    }
}

static void format_phi3(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++)
        TOY_BUF_PUT(b, "<|", msgs[i].role, "|>\n", msgs[i].content, "<|end|>\n");
    if (add_ass) TOY_BUF_PUT(b, "<|assistant|>\n");
}

static void format_phi4(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++)
        TOY_BUF_PUT(b, "<|im_start|>", msgs[i].role, "<|im_sep|>", msgs[i].content,
            "<|im_end|>");
    if (add_ass) TOY_BUF_PUT(b, "<|im_start|>assistant<|im_sep|>");
}

static void format_falcon3_zephyr(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    const char *end = f == CHAT_ZEPHYR ? "<|endoftext|>\n" : "\n";
    for (size_t i = 0; i < n; i++)
        TOY_BUF_PUT(b, "<|", msgs[i].role, "|>\n", msgs[i].content, end);
    if (add_ass) TOY_BUF_PUT(b, "<|assistant|>\n");
}

static void format_monarch(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* BOS inside the history, except before the first message */
    for (size_t i = 0; i < n; i++)
        TOY_BUF_PUT(b, i > 0 ? "<s>" : "", msgs[i].role, "\n", msgs[i].content, "</s>\n");
    if (add_ass) TOY_BUF_PUT(b, "<s>assistant\n");
}

static void format_gemma(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* Gemma has no system turn: system messages (trimmed, run together) open the next
     * turn that is not the model's. The assistant is "model"; content is trimmed. */
    ty_buf system = {0};
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system")) {
            put_trimmed(&system, m->content);
            continue;
        }
        const char *role = role_is(m, "assistant") ? "model" : m->role;
        TOY_BUF_PUT(b, "<start_of_turn>", role, "\n");
        if (system.n > 0 && strcmp(role, "model") != 0) {
            ty_buf_append(b, system.v, system.n);
            TOY_BUF_PUT(b, "\n\n");
            system.n = 0;
        }
        put_trimmed(b, m->content);
        TOY_BUF_PUT(b, "<end_of_turn>\n");
    }
    if (add_ass) TOY_BUF_PUT(b, "<start_of_turn>model\n");
    b->oom |= system.oom;
    free(system.v);
}

static void format_orion(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* no system turn either: it opens the next user message. No generation prompt:
     * every user turn already ends with "Assistant: </s>". */
    ty_buf system = {0};
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system")) {
            TOY_BUF_PUT(&system, m->content);
        } else if (role_is(m, "user")) {
            TOY_BUF_PUT(b, "Human: ");
            if (system.n > 0) {
                ty_buf_append(b, system.v, system.n);
                TOY_BUF_PUT(b, "\n\n");
                system.n = 0;
            }
            TOY_BUF_PUT(b, m->content, "\n\nAssistant: </s>");
        } else {
            TOY_BUF_PUT(b, m->content, "</s>");
        }
    }
    b->oom |= system.oom;
    free(system.v);
}

static void format_openchat(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* "GPT4 Correct " and the role with its first letter capitalised */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system")) {
            TOY_BUF_PUT(b, m->content, "<|end_of_turn|>");
            continue;
        }
        const char first[2] = {upper(m->role[0]), 0};
        TOY_BUF_PUT(b, "GPT4 Correct ", first, m->role[0] ? m->role + 1 : "", ": ", m->content,
            "<|end_of_turn|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "GPT4 Correct Assistant:");
}

static void format_vicuna(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* other roles are left out */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system")) {
            if (f == CHAT_VICUNA_ORCA)
                TOY_BUF_PUT(b, "SYSTEM: ", m->content, "\n");
            else
                TOY_BUF_PUT(b, m->content, "\n\n");
        } else if (role_is(m, "user")) {
            TOY_BUF_PUT(b, "USER: ", m->content, "\n");
        } else if (role_is(m, "assistant")) {
            TOY_BUF_PUT(b, "ASSISTANT: ", m->content, "</s>\n");
        }
    }
    if (add_ass) TOY_BUF_PUT(b, "ASSISTANT:");
}

static void format_deepseek(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, m->content);
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "### Instruction:\n", m->content, "\n");
        else if (role_is(m, "assistant"))
            TOY_BUF_PUT(b, "### Response:\n", m->content, "\n<|EOT|>\n");
    }
    if (add_ass) TOY_BUF_PUT(b, "### Response:\n");
}

static void format_command_r(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        const char *tag = role_is(m, "system")      ? "<|SYSTEM_TOKEN|>"
                          : role_is(m, "user")      ? "<|USER_TOKEN|>"
                          : role_is(m, "assistant") ? "<|CHATBOT_TOKEN|>"
                                                    : NULL;
        if (!tag) continue;
        TOY_BUF_PUT(b, "<|START_OF_TURN_TOKEN|>", tag);
        put_trimmed(b, m->content);
        TOY_BUF_PUT(b, "<|END_OF_TURN_TOKEN|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
}

static void format_llama3(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        TOY_BUF_PUT(b, "<|start_header_id|>", msgs[i].role, "<|end_header_id|>\n\n");
        put_trimmed(b, msgs[i].content);
        TOY_BUF_PUT(b, "<|eot_id|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void format_glm(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* the same turns; ChatGLM3 has a space after the newline, ChatGLM4 one after the
     * generation prompt */
    if (f == CHAT_CHATGLM3) TOY_BUF_PUT(b, "[gMASK]sop");
    if (f == CHAT_CHATGLM4) TOY_BUF_PUT(b, "[gMASK]<sop>");
    for (size_t i = 0; i < n; i++)
        TOY_BUF_PUT(b, "<|", msgs[i].role, f == CHAT_CHATGLM3 ? "|>\n " : "|>\n",
            msgs[i].content);
    if (add_ass) TOY_BUF_PUT(b, f == CHAT_CHATGLM4 ? "<|assistant|>\n" : "<|assistant|>");
}

static void format_minicpm(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* no generation prompt: every user turn ends with <AI> */
    for (size_t i = 0; i < n; i++) {
        const bool user = role_is(&msgs[i], "user");
        if (user) TOY_BUF_PUT(b, "<用户>");
        put_trimmed(b, msgs[i].content);
        if (user) TOY_BUF_PUT(b, "<AI>");
    }
}

static void format_deepseek2(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, m->content, "\n\n");
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "User: ", m->content, "\n\n");
        else if (role_is(m, "assistant"))
            TOY_BUF_PUT(b, "Assistant: ", m->content, "<｜end▁of▁sentence｜>");
    }
    if (add_ass) TOY_BUF_PUT(b, "Assistant:");
}

static void format_deepseek3(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, m->content, "\n\n");
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "<｜User｜>", m->content);
        else if (role_is(m, "assistant"))
            TOY_BUF_PUT(b, "<｜Assistant｜>", m->content, "<｜end▁of▁sentence｜>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<｜Assistant｜>");
}

static void format_exaone(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* the user's turn ends with a newline, not [|endofturn|]; EXAONE 4 adds tools */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        const char *open = role_is(m, "system")      ? "[|system|]"
                           : role_is(m, "user")      ? "[|user|]"
                           : role_is(m, "assistant") ? "[|assistant|]"
                           : f == CHAT_EXAONE4 && role_is(m, "tool") ? "[|tool|]"
                                                                     : NULL;
        if (!open) continue;
        TOY_BUF_PUT(b, open);
        put_trimmed(b, m->content);
        TOY_BUF_PUT(b, role_is(m, "user") ? "\n" : "[|endofturn|]\n");
    }
    if (add_ass) TOY_BUF_PUT(b, "[|assistant|]");
}

static void format_rwkv_world(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* "\n\n" ends a turn; the generation prompt follows a final user message
     * whatever add_ass says */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        const char *open = role_is(m, "system")      ? "System: "
                           : role_is(m, "user")      ? "User: "
                           : role_is(m, "assistant") ? "Assistant: "
                                                     : NULL;
        if (!open) continue;
        TOY_BUF_PUT(b, open);
        put_trimmed(b, m->content);
        TOY_BUF_PUT(b, "\n\n");
        if (i == n - 1 && role_is(m, "user")) TOY_BUF_PUT(b, "Assistant:");
    }
}

static void format_granite(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* The generation prompt has no newline after <|end_of_role|>, as Granite's own
     * template and llama.cpp's tests/test-chat-template.cpp have it (an older
     * llama-chat.cpp wrote one). */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        TOY_BUF_PUT(b, "<|start_of_role|>", m->role, "<|end_of_role|>");
        if (role_is(m, "assistant_tool_call")) TOY_BUF_PUT(b, "<|tool_call|>");
        TOY_BUF_PUT(b, m->content, "<|end_of_text|>\n");
    }
    if (add_ass) TOY_BUF_PUT(b, "<|start_of_role|>assistant<|end_of_role|>");
}

static void format_gigachat(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* a leading system message goes right after <s>; other roles are left out */
    const bool has_system = n > 0 && role_is(&msgs[0], "system");
    TOY_BUF_PUT(b, "<s>");
    if (has_system) TOY_BUF_PUT(b, msgs[0].content, "<|message_sep|>");
    for (size_t i = has_system ? 1 : 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "user"))
            TOY_BUF_PUT(b, "user<|role_sep|>", m->content, "<|message_sep|>",
                "available functions<|role_sep|>[]<|message_sep|>");
        else if (role_is(m, "assistant"))
            TOY_BUF_PUT(b, "assistant<|role_sep|>", m->content, "<|message_sep|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "assistant<|role_sep|>");
}

static void format_megrez(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++)
        TOY_BUF_PUT(b, "<|role_start|>", msgs[i].role, "<|role_end|>", msgs[i].content,
            "<|turn_end|>");
    if (add_ass) TOY_BUF_PUT(b, "<|role_start|>assistant<|role_end|>");
}

static void format_yandex(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* "\n\n" ends a turn; system messages are left out */
    for (size_t i = 0; i < n; i++) {
        if (role_is(&msgs[i], "user"))
            TOY_BUF_PUT(b, " Пользователь: ", msgs[i].content, "\n\n");
        else if (role_is(&msgs[i], "assistant"))
            TOY_BUF_PUT(b, " Ассистент: ", msgs[i].content, "\n\n");
    }
    if (add_ass) TOY_BUF_PUT(b, " Ассистент:[SEP]");
}

static void format_bailing(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* the user is HUMAN; any other role is written in capitals */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        TOY_BUF_PUT(b, "<role>");
        if (role_is(m, "user")) {
            TOY_BUF_PUT(b, "HUMAN");
        } else {
            for (const char *r = m->role; *r; r++) {
                const char c = upper(*r);
                ty_buf_append(b, &c, 1);
            }
        }
        TOY_BUF_PUT(b, "</role>", m->content);
    }
    if (add_ass) TOY_BUF_PUT(b, "<role>ASSISTANT</role>");
}

static void format_llama4(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        TOY_BUF_PUT(b, "<|header_start|>", msgs[i].role, "<|header_end|>\n\n");
        put_trimmed(b, msgs[i].content);
        TOY_BUF_PUT(b, "<|eot|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<|header_start|>assistant<|header_end|>\n\n");
}

static void format_smolvlm(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* <|im_start|> is SmolVLM's BOS; any role but system and user is the assistant */
    TOY_BUF_PUT(b, "<|im_start|>");
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, m->content, "\n\n");
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "User: ", m->content, "<end_of_utterance>\n");
        else
            TOY_BUF_PUT(b, "Assistant: ", m->content, "<end_of_utterance>\n");
    }
    if (add_ass) TOY_BUF_PUT(b, "Assistant:");
}

static void format_dots1(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, "<|system|>", m->content, "<|endofsystem|>");
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "<|userprompt|>", m->content, "<|endofuserprompt|>");
        else
            TOY_BUF_PUT(b, "<|response|>", m->content, "<|endofresponse|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<|response|>");
}

static void format_hunyuan_moe(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* no generation prompt: a user turn ends with <|extra_0|> */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, "<|startoftext|>", m->content, "<|extra_4|>");
        else if (role_is(m, "assistant"))
            TOY_BUF_PUT(b, m->content, "<|eos|>");
        else
            TOY_BUF_PUT(b, "<|startoftext|>", m->content, "<|extra_0|>");
    }
}

static void format_gpt_oss(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* OpenAI's Harmony format: the assistant's turn ends with <|return|> */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        TOY_BUF_PUT(b, "<|start|>", m->role, "<|message|>", m->content,
            role_is(m, "assistant") ? "<|return|>" : "<|end|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<|start|>assistant");
}

static void format_hunyuan_dense(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* only a first system message is kept; a user turn opens the assistant's, so
     * there is no generation prompt */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (i == 0 && role_is(m, "system"))
            TOY_BUF_PUT(b, m->content, "<｜hy_place▁holder▁no▁3｜>");
        if (role_is(m, "assistant"))
            TOY_BUF_PUT(b, "<｜hy_Assistant｜>", m->content, "<｜hy_place▁holder▁no▁2｜>");
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "<｜hy_User｜>", m->content, "<｜hy_Assistant｜>");
    }
}

static void format_kimi_k2(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    /* a role other than these four gets no header, only its content */
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        if (role_is(m, "system"))
            TOY_BUF_PUT(b, "<|im_system|>system<|im_middle|>");
        else if (role_is(m, "user"))
            TOY_BUF_PUT(b, "<|im_user|>user<|im_middle|>");
        else if (role_is(m, "assistant"))
            TOY_BUF_PUT(b, "<|im_assistant|>assistant<|im_middle|>");
        else if (role_is(m, "tool"))
            TOY_BUF_PUT(b, "<|im_system|>tool<|im_middle|>");
        TOY_BUF_PUT(b, m->content, "<|im_end|>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<|im_assistant|>assistant<|im_middle|>");
}

static void format_seed_oss(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b) {
    for (size_t i = 0; i < n; i++) {
        const toy_chat_message *m = &msgs[i];
        TOY_BUF_PUT(b, "<seed:bos>", m->role, "\n");
        if (role_is(m, "assistant"))
            put_trimmed(b, m->content);
        else
            TOY_BUF_PUT(b, m->content);
        TOY_BUF_PUT(b, "<seed:eos>");
    }
    if (add_ass) TOY_BUF_PUT(b, "<seed:bos>assistant\n");
}

/* Each family: llama.cpp's name (LLM_CHAT_TEMPLATES), which toy_chat_template_detect
 * returns, and the function that writes its format. */
typedef void format_fn(chat_family f, const toy_chat_message *msgs, size_t n, bool add_ass, ty_buf *b);
static const struct {
    const char *name;
    format_fn *format;
} families[CHAT_N_FAMILIES] = {
    [CHAT_CHATML] = {"chatml", format_chatml},
    [CHAT_LLAMA2] = {"llama2", format_llama2},
    [CHAT_LLAMA2_SYS] = {"llama2-sys", format_llama2},
    [CHAT_LLAMA2_SYS_BOS] = {"llama2-sys-bos", format_llama2},
    [CHAT_LLAMA2_SYS_STRIP] = {"llama2-sys-strip", format_llama2},
    [CHAT_MISTRAL_V1] = {"mistral-v1", format_mistral_v1_v3},
    [CHAT_MISTRAL_V3] = {"mistral-v3", format_mistral_v1_v3},
    [CHAT_MISTRAL_V3_TEKKEN] = {"mistral-v3-tekken", format_mistral_v1_v3},
    [CHAT_MISTRAL_V7] = {"mistral-v7", format_mistral_v7},
    [CHAT_MISTRAL_V7_TEKKEN] = {"mistral-v7-tekken", format_mistral_v7},
    [CHAT_PHI3] = {"phi3", format_phi3},
    [CHAT_PHI4] = {"phi4", format_phi4},
    [CHAT_FALCON3] = {"falcon3", format_falcon3_zephyr},
    [CHAT_ZEPHYR] = {"zephyr", format_falcon3_zephyr},
    [CHAT_MONARCH] = {"monarch", format_monarch},
    [CHAT_GEMMA] = {"gemma", format_gemma},
    [CHAT_ORION] = {"orion", format_orion},
    [CHAT_OPENCHAT] = {"openchat", format_openchat},
    [CHAT_VICUNA] = {"vicuna", format_vicuna},
    [CHAT_VICUNA_ORCA] = {"vicuna-orca", format_vicuna},
    [CHAT_DEEPSEEK] = {"deepseek", format_deepseek},
    [CHAT_DEEPSEEK2] = {"deepseek2", format_deepseek2},
    [CHAT_DEEPSEEK3] = {"deepseek3", format_deepseek3},
    [CHAT_COMMAND_R] = {"command-r", format_command_r},
    [CHAT_LLAMA3] = {"llama3", format_llama3},
    [CHAT_CHATGLM3] = {"chatglm3", format_glm},
    [CHAT_CHATGLM4] = {"chatglm4", format_glm},
    [CHAT_GLMEDGE] = {"glmedge", format_glm},
    [CHAT_MINICPM] = {"minicpm", format_minicpm},
    [CHAT_EXAONE3] = {"exaone3", format_exaone},
    [CHAT_EXAONE4] = {"exaone4", format_exaone},
    [CHAT_RWKV_WORLD] = {"rwkv-world", format_rwkv_world},
    [CHAT_GRANITE] = {"granite", format_granite},
    [CHAT_GIGACHAT] = {"gigachat", format_gigachat},
    [CHAT_MEGREZ] = {"megrez", format_megrez},
    [CHAT_YANDEX] = {"yandex", format_yandex},
    [CHAT_BAILING] = {"bailing", format_bailing},
    [CHAT_LLAMA4] = {"llama4", format_llama4},
    [CHAT_SMOLVLM] = {"smolvlm", format_smolvlm},
    [CHAT_DOTS1] = {"dots1", format_dots1}, /* llama.cpp detects it but gives it no name */
    [CHAT_HUNYUAN_MOE] = {"hunyuan-moe", format_hunyuan_moe},
    [CHAT_GPT_OSS] = {"gpt-oss", format_gpt_oss},
    [CHAT_HUNYUAN_DENSE] = {"hunyuan-dense", format_hunyuan_dense},
    [CHAT_KIMI_K2] = {"kimi-k2", format_kimi_k2},
    [CHAT_SEED_OSS] = {"seed_oss", format_seed_oss},
};

/* ---------------------------------------------------------------- detection */

static bool has(const char *tmpl, const char *marker) {
    return strstr(tmpl, marker) != NULL;
}

/* llm_chat_detect_template's checks, in its order: the order matters, since many
 * templates carry more than one family's markers (Phi-4 has ChatML's <|im_start|>). */
static chat_family detect_family(const char *t) {
    for (int f = 0; f < CHAT_N_FAMILIES; f++)
        if (strcmp(t, families[f].name) == 0) return (chat_family)f;

    if (has(t, "<|im_start|>")) {
        if (has(t, "<|im_sep|>")) return CHAT_PHI4;
        /* SmolVLM uses <|im_start|> as its BOS, but is not ChatML */
        if (has(t, "<end_of_utterance>")) return CHAT_SMOLVLM;
        return CHAT_CHATML;
    }
    if (strncmp(t, "mistral", 7) == 0 || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) return CHAT_MISTRAL_V7;
        /* Mistral's official v1 template, or v3 / v3-tekken (the ones with tools) */
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
            if (has(t, " [INST]")) return CHAT_MISTRAL_V1;
            if (has(t, "\"[INST]\"")) return CHAT_MISTRAL_V3_TEKKEN;
            return CHAT_MISTRAL_V3;
        }
        /* Llama 2 and the variants that take a system message, put a BOS inside the
         * history, or strip the messages */
        if (has(t, "content.strip()")) return CHAT_LLAMA2_SYS_STRIP;
        if (has(t, "bos_token + '[INST]")) return CHAT_LLAMA2_SYS_BOS;
        if (has(t, "<<SYS>>")) return CHAT_LLAMA2_SYS;
        return CHAT_LLAMA2;
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return CHAT_PHI3;
    if (has(t, "[gMASK]<sop>")) return CHAT_CHATGLM4;
    if (has(t, "<|assistant|>") && has(t, "<|user|>"))
        return has(t, "</s>") ? CHAT_FALCON3 : CHAT_GLMEDGE;
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>"))
        return CHAT_GLMEDGE;
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return CHAT_ZEPHYR;
    if (has(t, "bos_token + message['role']")) return CHAT_MONARCH;
    if (has(t, "<start_of_turn>")) return CHAT_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return CHAT_ORION;
    if (has(t, "GPT4 Correct ")) return CHAT_OPENCHAT;
    if (has(t, "USER: ") && has(t, "ASSISTANT: "))
        return has(t, "SYSTEM: ") ? CHAT_VICUNA_ORCA : CHAT_VICUNA;
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return CHAT_DEEPSEEK;
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>"))
        return CHAT_COMMAND_R;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return CHAT_LLAMA3;
    if (has(t, "[gMASK]sop")) return CHAT_CHATGLM3;
    if (has(t, "<用户>")) return CHAT_MINICPM;
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return CHAT_DEEPSEEK2;
    if (has(t, "<｜Assistant｜>") && has(t, "<｜User｜>") && has(t, "<｜end▁of▁sentence｜>"))
        return CHAT_DEEPSEEK3;
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return has(t, "[|tool|]") ? CHAT_EXAONE4 : CHAT_EXAONE3;
    if (has(t, "rwkv-world") ||
        has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return CHAT_RWKV_WORLD;
    if (has(t, "<|start_of_role|>")) return CHAT_GRANITE;
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + "
               "additional_special_tokens[1]"))
        return CHAT_GIGACHAT;
    if (has(t, "<|role_start|>")) return CHAT_MEGREZ;
    if (has(t, " Ассистент:")) return CHAT_YANDEX;
    if (has(t, "<role>ASSISTANT</role>") && has(t, "'HUMAN'")) return CHAT_BAILING;
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return CHAT_LLAMA4;
    if (has(t, "<|endofuserprompt|>")) return CHAT_DOTS1;
    if (has(t, "<|extra_0|>") && has(t, "<|extra_4|>")) return CHAT_HUNYUAN_MOE;
    if (has(t, "<|start|>") && has(t, "<|channel|>")) return CHAT_GPT_OSS;
    if (has(t, "<｜hy_Assistant｜>") && has(t, "<｜hy_place▁holder▁no▁3｜>"))
        return CHAT_HUNYUAN_DENSE;
    if (has(t, "<|im_assistant|>assistant<|im_middle|>")) return CHAT_KIMI_K2;
    if (has(t, "<seed:bos>")) return CHAT_SEED_OSS;
    return CHAT_UNKNOWN;
}

const char *toy_chat_template_detect(const char *template_or_name) {
    if (!template_or_name) return NULL;
    const chat_family f = detect_family(template_or_name);
    return f == CHAT_UNKNOWN ? NULL : families[f].name;
}

toy_status toy_chat_template_of(const toy_gguf *gguf, const char **family) {
    *family = "chatml";
    const char *tmpl;
    size_t len;
    if (toy_gguf_get_str(gguf, "tokenizer.chat_template", &tmpl, &len)) return TOY_ERR_NOT_FOUND;
    char *z = strndup(tmpl, len);
    if (!z) return ty_error(TOY_ERR_NOMEM, "no memory");
    const char *f = toy_chat_template_detect(z);
    free(z);
    if (!f)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: tokenizer.chat_template is not a template toy recognises",
                        toy_gguf_path(gguf));
    *family = f;
    return TOY_OK;
}

toy_status toy_chat_apply(const char *family, const toy_chat_message *messages,
                          size_t n_messages, bool add_assistant, char **out) {
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_chat_apply: out is NULL");
    *out = NULL;
    if (!family) return ty_error(TOY_ERR_INVALID, "toy_chat_apply: no template family");
    if (n_messages > 0 && !messages)
        return ty_error(TOY_ERR_INVALID,
                        "toy_chat_apply: %zu messages but the list is NULL", n_messages);
    for (size_t i = 0; i < n_messages; i++) {
        if (!messages[i].role)
            return ty_error(TOY_ERR_INVALID, "chat message %zu has no role", i);
        if (!messages[i].content)
            return ty_error(TOY_ERR_INVALID, "chat message %zu (%s) has no content", i,
                            messages[i].role);
    }
    const chat_family f = detect_family(family);
    if (f == CHAT_UNKNOWN) {
        /* name the request (a template text is cut short) and what would have worked */
        char known[640];
        size_t used = 0;
        for (int k = 0; k < CHAT_N_FAMILIES && used < sizeof known; k++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                                     k ? ", " : "", families[k].name);
        const size_t shown = strlen(family) > 60 ? 60 : strlen(family);
        return ty_error(TOY_ERR_UNSUPPORTED,
                        "unknown chat template family \"%.*s%s\" (known: %s)", (int)shown,
                        family, shown < strlen(family) ? "..." : "", known);
    }
    ty_buf b = {0};
    ty_buf_append(&b, "", 0); /* an empty conversation still gives an empty string */
    families[f].format(f, messages, n_messages, add_assistant, &b);
    if (b.oom) {
        free(b.v);
        return ty_error(TOY_ERR_NOMEM, "chat template %s: out of memory", families[f].name);
    }
    *out = b.v;
    return TOY_OK;
}
