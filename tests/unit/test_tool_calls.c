/* test_tool_calls.c — the model families' syntaxes for tool calls and reasoning
 * (src/chat/tool_calls.c): the syntax each real template detects as, sample answers of
 * every format parsed whole (one call, two, text around them, undeclared functions,
 * broken syntax, thinking first, the prompt's open thinking block, reasoning kept in the
 * content) and at every prefix as they stream (each partial parse a prefix of the next
 * and of the final one), and the grammars that force calls: each accepts its format's
 * call, refuses another function's name, and what it accepts parses back to the call. */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tool_calls.h"
#include "toy.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const fns[] = {"get_weather", "get_time", "python"};

/* ---------------------------------------------------------------- detection */

static void test_detection_snippets(void) {
    /* markers of the templates not in ../shared/templates (from the models' own) */
    static const struct {
        const char *text;
        ty_tool_format tools;
        ty_reasoning_format reasoning;
    } cases[] = {
        {"{{ messages }}", TY_TOOLS_GENERIC, TY_REASONING_NONE},
        {"<|start|>assistant<|channel|>final<|message|>", TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS},
        {"<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>", TY_TOOLS_QWEN3_CODER,
         TY_REASONING_NONE},
        {"<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}", TY_TOOLS_KIMI_K2, TY_REASONING_NONE},
        {"<|tool_calls_section_begin|>...<think>{{rc}}</think>", TY_TOOLS_KIMI_K2, TY_REASONING_THINK},
        {"{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + "
         "tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}{{'<think>'}}",
         TY_TOOLS_DEEPSEEK_V31, TY_REASONING_THINK},
        {"<|START_THINKING|>...<|END_THINKING|><|START_ACTION|>... 1. Action: write ```json", TY_TOOLS_COMMAND_R7B,
         TY_REASONING_COMMAND_R7B},
        {"Respond in this format:\\n>>>${recipient}\\n${content} {{ '>>>all\\n' }} <|start_header_id|>ipython",
         TY_TOOLS_FUNCTIONARY_V32, TY_REASONING_NONE},
        {"<|start_of_role|>assistant<|end_of_role|><|tool_call|>", TY_TOOLS_GRANITE, TY_REASONING_NONE},
        {"[SYSTEM_PROMPT][TOOL_CALLS]{{ name }}[ARGS]", TY_TOOLS_MISTRAL_SMALL, TY_REASONING_NONE},
        {"{%- if tools %}<AVAILABLE_TOOLS>...<TOOLCALL>[' -}}...<think>\\n", TY_TOOLS_NEMOTRON_V2, TY_REASONING_THINK},
        {"<tool_calls>[{\"name\": <function-name-1>, \"arguments\": <args-dict-1>}]</tool_calls>", TY_TOOLS_APRIEL,
         TY_REASONING_NONE},
        {"<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>...<think></think>", TY_TOOLS_GLM,
         TY_REASONING_THINK},
        {"{%- set toolcall_begin_token = '<minimax:tool_call>' -%}<think>", TY_TOOLS_MINIMAX_M2, TY_REASONING_THINK},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        const ty_chat_syntax syn = ty_chat_syntax_of(cases[i].text);
        CHECK_MSG(syn.tools == cases[i].tools && syn.reasoning == cases[i].reasoning, "%s: %s/%s, want %s/%s",
                  cases[i].text, ty_tool_format_name(syn.tools), ty_reasoning_format_name(syn.reasoning),
                  ty_tool_format_name(cases[i].tools), ty_reasoning_format_name(cases[i].reasoning));
    }
    const ty_chat_syntax none = ty_chat_syntax_of(NULL);
    CHECK(none.tools == TY_TOOLS_GENERIC && none.reasoning == TY_REASONING_NONE);
    CHECK(!strcmp(ty_tool_format_name(TY_TOOLS_DEEPSEEK_V31), "deepseek-v3.1"));
    CHECK(!strcmp(ty_reasoning_format_name(TY_REASONING_SEED), "seed"));
}

/* The real templates of ../shared/templates, when it is there. */
static void test_detection_templates(void) {
    static const struct {
        const char *file;
        ty_tool_format tools;
        ty_reasoning_format reasoning;
    } cases[] = {
        {"ByteDance-Seed-OSS.jinja", TY_TOOLS_SEED_OSS, TY_REASONING_SEED},
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", TY_TOOLS_COMMAND_R, TY_REASONING_NONE},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", TY_TOOLS_MISTRAL_SMALL, TY_REASONING_NONE},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", TY_TOOLS_HERMES, TY_REASONING_NONE},
        {"Qwen-QwQ-32B.jinja", TY_TOOLS_HERMES, TY_REASONING_THINK},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", TY_TOOLS_HERMES, TY_REASONING_NONE},
        {"Qwen-Qwen3-0.6B.jinja", TY_TOOLS_HERMES, TY_REASONING_THINK},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK},
        {"fireworks-ai-llama-3-firefunction-v2.jinja", TY_TOOLS_FIREFUNCTION, TY_REASONING_NONE},
        {"google-gemma-2-2b-it.jinja", TY_TOOLS_GENERIC, TY_REASONING_NONE},
        {"llama-cpp-deepseek-r1.jinja", TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK},
        {"llama-cpp-rwkv-world.jinja", TY_TOOLS_GENERIC, TY_REASONING_THINK},
        {"meetkai-functionary-medium-v3.1.jinja", TY_TOOLS_FUNCTIONARY_V31, TY_REASONING_NONE},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", TY_TOOLS_LLAMA3, TY_REASONING_NONE},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", TY_TOOLS_LLAMA3, TY_REASONING_NONE},
        {"microsoft-Phi-3.5-mini-instruct.jinja", TY_TOOLS_GENERIC, TY_REASONING_NONE},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", TY_TOOLS_MISTRAL_NEMO, TY_REASONING_NONE},
    };
    char path[4096];
    snprintf(path, sizeof path, "%s/../shared/templates/README.md", TOY_SOURCE_DIR);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        printf("no ../shared/templates: the real templates' detection is not checked\n");
        return;
    }
    fclose(probe);
    for (size_t i = 0; i < N_OF(cases); i++) {
        snprintf(path, sizeof path, "%s/../shared/templates/%s", TOY_SOURCE_DIR, cases[i].file);
        size_t len;
        char *text = test_read_file(path, &len);
        CHECK_MSG(text != NULL, "cannot read %s", path);
        if (!text) continue;
        const ty_chat_syntax syn = ty_chat_syntax_of(text);
        CHECK_MSG(syn.tools == cases[i].tools && syn.reasoning == cases[i].reasoning, "%s: %s/%s, want %s/%s",
                  cases[i].file, ty_tool_format_name(syn.tools), ty_reasoning_format_name(syn.reasoning),
                  ty_tool_format_name(cases[i].tools), ty_reasoning_format_name(cases[i].reasoning));
        free(text);
    }
}

static void test_prompt_opens_reasoning(void) {
    static const struct {
        ty_reasoning_format r;
        const char *prompt;
        ty_prompt_thinking at;
    } cases[] = {
        {TY_REASONING_THINK, "<｜User｜>hi<｜Assistant｜><think>\n", TY_THINK_OPEN},        /* R1 distills, QwQ */
        {TY_REASONING_THINK, "<｜User｜>hi<｜Assistant｜><think>", TY_THINK_OPEN},          /* V3.1 thinking */
        {TY_REASONING_THINK, "<｜User｜>hi<｜Assistant｜></think>", TY_THINK_CLOSED},        /* V3.1 not thinking */
        {TY_REASONING_THINK, "<|im_start|>assistant\n<think>\n\n</think>\n\n", TY_THINK_CLOSED}, /* Qwen 3, thinking off */
        {TY_REASONING_THINK, "<|im_start|>assistant\n", TY_THINK_MAY_OPEN},
        {TY_REASONING_SEED, "<seed:bos>assistant\n<seed:think>", TY_THINK_OPEN},
        {TY_REASONING_COMMAND_R7B, "<|CHATBOT_TOKEN|><|START_THINKING|>", TY_THINK_OPEN},
        {TY_REASONING_GPT_OSS, "<|start|>assistant", TY_THINK_MAY_OPEN},
        {TY_REASONING_NONE, "<think>\n", TY_THINK_MAY_OPEN},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        const ty_chat_syntax syn = {TY_TOOLS_GENERIC, cases[i].r};
        const size_t len = strlen(cases[i].prompt);
        CHECK_MSG(ty_chat_prompt_thinking(syn, cases[i].prompt, len) == cases[i].at, "%s", cases[i].prompt);
        CHECK_MSG(ty_chat_prompt_opens_reasoning(syn, cases[i].prompt, len) == (cases[i].at == TY_THINK_OPEN), "%s",
                  cases[i].prompt);
    }
}

/* ---------------------------------------------------------------- parsing */

enum {
    STARTS_IN = 1, /* the prompt opened the thinking block */
    RAW = 2,       /* reasoning false: thinking stays in the content */
    SINGLE = 4,    /* parallel false */
    NO_TOOLS = 8,  /* no functions declared */
};

/* A sample answer and what it parses into; a call is "name|arguments" or "name|arguments|id". */
typedef struct {
    ty_tool_format tools;
    ty_reasoning_format reasoning;
    int flags;
    const char *text;
    const char *reasoning_want; /* NULL: none */
    const char *content_want;   /* NULL: none */
    const char *calls_want[3];
} sample;

#define WEATHER "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
#define TIME "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}"
#define W_CALL "get_weather|{\"city\":\"Paris\"}"
#define T_CALL "get_time|{\"tz\":\"UTC\"}"
#define R1_CALL(name, args)                                                                                        \
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" name "\n```json\n" args "\n```<｜tool▁call▁end｜>"
#define V31_CALL(name, args) "<｜tool▁call▁begin｜>" name "<｜tool▁sep｜>" args "<｜tool▁call▁end｜>"
#define KIMI_CALL(id, args) "<|tool_call_begin|>" id "<|tool_call_argument_begin|>" args "<|tool_call_end|>"

static const sample samples[] = {
    /* ------------------------------------------------ hermes (Qwen 2.5, Qwen 3) */
    {TY_TOOLS_HERMES, TY_REASONING_NONE, 0, "<tool_call>\n" WEATHER "\n</tool_call>", NULL, NULL, {W_CALL}},
    {TY_TOOLS_HERMES, TY_REASONING_NONE, 0,
     "Let me check.\n<tool_call>\n" WEATHER "\n</tool_call>\n<tool_call>\n" TIME "\n</tool_call>\nDone.", NULL,
     "Let me check.\nDone.", {W_CALL, T_CALL}},
    {TY_TOOLS_HERMES, TY_REASONING_NONE, SINGLE,
     "<tool_call>\n" WEATHER "\n</tool_call>\n<tool_call>\n" TIME "\n</tool_call>", NULL, NULL, {W_CALL}},
    {TY_TOOLS_HERMES, TY_REASONING_NONE, 0,
     "<tool_call>\n{\"name\": \"send_mail\", \"arguments\": {}}\n</tool_call>", NULL,
     "<tool_call>\n{\"name\": \"send_mail\", \"arguments\": {}}\n</tool_call>", {NULL}},
    {TY_TOOLS_HERMES, TY_REASONING_NONE, 0,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>", NULL,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>", {NULL}},
    {TY_TOOLS_HERMES, TY_REASONING_NONE, 0,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"Paris\"}\n</tool_call>", NULL,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"Paris\"}\n</tool_call>", {NULL}},
    /* a broken call after a good one stays content; the good one is kept */
    {TY_TOOLS_HERMES, TY_REASONING_NONE, 0,
     "<tool_call>\n" WEATHER "\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\"", NULL,
     "<tool_call>\n{\"name\": \"get_time\"", {W_CALL}},
    {TY_TOOLS_HERMES, TY_REASONING_NONE, NO_TOOLS, "<tool_call>\n" WEATHER "\n</tool_call>", NULL,
     "<tool_call>\n" WEATHER "\n</tool_call>", {NULL}},
    {TY_TOOLS_HERMES, TY_REASONING_THINK, 0,
     "<think>\nI should look it up.\n</think>\n\n<tool_call>\n" WEATHER "\n</tool_call>", "I should look it up.", NULL,
     {W_CALL}},
    {TY_TOOLS_HERMES, TY_REASONING_THINK, STARTS_IN,
     "The user wants the weather.\n</think>\n\n<tool_call>\n" WEATHER "\n</tool_call>", "The user wants the weather.",
     NULL, {W_CALL}},
    /* a call inside the thinking is thinking */
    {TY_TOOLS_HERMES, TY_REASONING_THINK, STARTS_IN, "Maybe <tool_call>\n" WEATHER "\n</tool_call>",
     "Maybe <tool_call>\n" WEATHER "\n</tool_call>", NULL, {NULL}},
    {TY_TOOLS_HERMES, TY_REASONING_THINK, RAW, "<think>\nhmm\n</think>\n\nIt is sunny.", NULL,
     "<think>\nhmm\n</think>\n\nIt is sunny.", {NULL}},
    {TY_TOOLS_HERMES, TY_REASONING_THINK, RAW | STARTS_IN,
     "hmm\n</think>\n\n<tool_call>\n" WEATHER "\n</tool_call>", NULL, "hmm\n</think>", {W_CALL}},
    {TY_TOOLS_HERMES, TY_REASONING_THINK, 0, "  It is sunny in Paris.  \n", NULL, "It is sunny in Paris.", {NULL}},
    {TY_TOOLS_HERMES, TY_REASONING_THINK, 0, "<think>\n\n</think>\n\n   ", NULL, NULL, {NULL}},
    /* ------------------------------------------------ Qwen3-Coder */
    {TY_TOOLS_QWEN3_CODER, TY_REASONING_NONE, 0,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
     "</function>\n</tool_call>",
     NULL, NULL, {"get_weather|{\"city\":\"Paris\",\"days\":3}"}},
    {TY_TOOLS_QWEN3_CODER, TY_REASONING_NONE, 0,
     "I'll check both.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
     "</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n"
     "</tool_call>",
     NULL, "I'll check both.", {"get_weather|{\"city\":\"New York\"}", T_CALL}},
    /* JSON values stay JSON (a quoted one is a string); others are strings, lines and all */
    {TY_TOOLS_QWEN3_CODER, TY_REASONING_NONE, 0,
     "<tool_call>\n<function=get_weather>\n<parameter=filter>\n{\"max\": 2, \"units\": [\"C\"]}\n</parameter>\n"
     "<parameter=id>\n\"42\"\n</parameter>\n<parameter=note>\nline one\n  line two\n</parameter>\n</function>\n"
     "</tool_call>",
     NULL, NULL, {"get_weather|{\"filter\":{\"max\":2,\"units\":[\"C\"]},\"id\":\"42\",\"note\":\"line one\\n  line two\"}"}},
    {TY_TOOLS_QWEN3_CODER, TY_REASONING_NONE, 0,
     "<tool_call>\n<function=send_mail>\n<parameter=to>\nbob\n</parameter>\n</function>\n</tool_call>", NULL,
     "<tool_call>\n<function=send_mail>\n<parameter=to>\nbob\n</parameter>\n</function>\n</tool_call>", {NULL}},
    {TY_TOOLS_QWEN3_CODER, TY_REASONING_NONE, 0,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</tool_call>", NULL,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</tool_call>", {NULL}},
    {TY_TOOLS_QWEN3_CODER, TY_REASONING_NONE, 0,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n</parameter>\n"
     "</function>\n</tool_call>",
     NULL,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n</parameter>\n"
     "</function>\n</tool_call>",
     {NULL}},
    /* ------------------------------------------------ Llama 3.x */
    {TY_TOOLS_LLAMA3, TY_REASONING_NONE, 0, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL,
     NULL, {W_CALL}},
    {TY_TOOLS_LLAMA3, TY_REASONING_NONE, 0,
     "<|python_tag|>{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL,
     NULL, {W_CALL}},
    {TY_TOOLS_LLAMA3, TY_REASONING_NONE, 0,
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; " TIME "\nThat is all.", NULL,
     "That is all.", {W_CALL, T_CALL}},
    {TY_TOOLS_LLAMA3, TY_REASONING_NONE, 0, "The weather is {\"name\": \"get_weather\"}.", NULL,
     "The weather is {\"name\": \"get_weather\"}.", {NULL}},
    {TY_TOOLS_LLAMA3, TY_REASONING_NONE, 0, "<|python_tag|>import math\nprint(math.pi)\n", NULL, NULL,
     {"python|{\"code\":\"import math\\nprint(math.pi)\"}"}},
    {TY_TOOLS_LLAMA3, TY_REASONING_NONE, 0, "{\"name\": \"send_mail\", \"parameters\": {}}", NULL,
     "{\"name\": \"send_mail\", \"parameters\": {}}", {NULL}},
    {TY_TOOLS_LLAMA3, TY_REASONING_NONE, 0, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par", NULL,
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par", {NULL}},
    /* ------------------------------------------------ Mistral Nemo */
    {TY_TOOLS_MISTRAL_NEMO, TY_REASONING_NONE, 0,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123XYZ\"}]", NULL,
     NULL, {W_CALL "|abc123XYZ"}},
    {TY_TOOLS_MISTRAL_NEMO, TY_REASONING_NONE, 0, "Sure.[TOOL_CALLS] [" WEATHER ", " TIME "]", NULL, "Sure.",
     {W_CALL, T_CALL}},
    {TY_TOOLS_MISTRAL_NEMO, TY_REASONING_NONE, 0,
     "[TOOL_CALLS][" WEATHER ", {\"name\": \"send_mail\", \"arguments\": {}}]", NULL,
     "[TOOL_CALLS][" WEATHER ", {\"name\": \"send_mail\", \"arguments\": {}}]", {NULL}},
    {TY_TOOLS_MISTRAL_NEMO, TY_REASONING_NONE, 0, "[TOOL_CALLS][" WEATHER, NULL, "[TOOL_CALLS][" WEATHER, {NULL}},
    /* ------------------------------------------------ Mistral Small 3.2 */
    {TY_TOOLS_MISTRAL_SMALL, TY_REASONING_NONE, 0, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", NULL, NULL,
     {W_CALL}},
    {TY_TOOLS_MISTRAL_SMALL, TY_REASONING_NONE, 0,
     "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]"
     "{\"tz\": \"UTC\"}",
     NULL, "Checking.", {W_CALL, T_CALL "|a1b2c3d4e"}},
    {TY_TOOLS_MISTRAL_SMALL, TY_REASONING_NONE, 0, "[TOOL_CALLS]send_mail[ARGS]{}", NULL,
     "[TOOL_CALLS]send_mail[ARGS]{}", {NULL}},
    {TY_TOOLS_MISTRAL_SMALL, TY_REASONING_NONE, 0, "[TOOL_CALLS]get_weather[ARGS][1]", NULL,
     "[TOOL_CALLS]get_weather[ARGS][1]", {NULL}},
    /* ------------------------------------------------ DeepSeek R1 */
    {TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK, STARTS_IN,
     "Okay, the weather.\n</think>\n\n<｜tool▁calls▁begin｜>" R1_CALL("get_weather", "{\"city\": \"Paris\"}")
         "<｜tool▁calls▁end｜>",
     "Okay, the weather.", NULL, {W_CALL}},
    {TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK, 0,
     "<think>\nTwo calls.\n</think>\n\nLet me look.\n<｜tool▁calls▁begin｜>" R1_CALL("get_weather",
                                                                                 "{\"city\": \"Paris\"}") "\n" R1_CALL(
         "get_time", "{\"tz\": \"UTC\"}") "<｜tool▁calls▁end｜>",
     "Two calls.", "Let me look.", {W_CALL, T_CALL}},
    /* the section's end left out at the end; a variant opening marker */
    {TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK, 0,
     "<｜tool_calls_begin｜>" R1_CALL("get_weather", "{\"city\": \"Paris\"}"), NULL, NULL, {W_CALL}},
    {TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK, 0,
     "<｜tool▁calls▁begin｜>" R1_CALL("send_mail", "{}") "<｜tool▁calls▁end｜>", NULL,
     "<｜tool▁calls▁begin｜>" R1_CALL("send_mail", "{}") "<｜tool▁calls▁end｜>", {NULL}},
    {TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK, STARTS_IN, "Still thinking about it", "Still thinking about it", NULL,
     {NULL}},
    /* ------------------------------------------------ DeepSeek V3.1 */
    {TY_TOOLS_DEEPSEEK_V31, TY_REASONING_THINK, 0,
     "<｜tool▁calls▁begin｜>" V31_CALL("get_weather", "{\"city\": \"Paris\"}") V31_CALL(
         "get_time", "{\"tz\": \"UTC\"}") "<｜tool▁calls▁end｜>",
     NULL, NULL, {W_CALL, T_CALL}},
    {TY_TOOLS_DEEPSEEK_V31, TY_REASONING_THINK, STARTS_IN,
     "Need the weather.</think>Checking.<｜tool▁calls▁begin｜>" V31_CALL("get_weather", "{\"city\": \"Paris\"}")
         "<｜tool▁calls▁end｜>",
     "Need the weather.", "Checking.", {W_CALL}},
    {TY_TOOLS_DEEPSEEK_V31, TY_REASONING_THINK, 0,
     "<｜tool▁calls▁begin｜>" V31_CALL("get_weather", "{\"city\": Paris}") "<｜tool▁calls▁end｜>", NULL,
     "<｜tool▁calls▁begin｜>" V31_CALL("get_weather", "{\"city\": Paris}") "<｜tool▁calls▁end｜>", {NULL}},
    /* ------------------------------------------------ Command R+ */
    {TY_TOOLS_COMMAND_R, TY_REASONING_NONE, 0,
     "Action:\n```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n        \"parameters\": {\n            "
     "\"city\": \"Paris\"\n        }\n    }\n]```",
     NULL, NULL, {W_CALL}},
    {TY_TOOLS_COMMAND_R, TY_REASONING_NONE, 0,
     "I will look up both.\nAction: ```json\n[{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}, "
     "{\"tool_name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}]\n```",
     NULL, "I will look up both.", {W_CALL, T_CALL}},
    /* its instructions' directly-answer tool is not one of the request's */
    {TY_TOOLS_COMMAND_R, TY_REASONING_NONE, 0,
     "Action: ```json\n[{\"tool_name\": \"directly-answer\", \"parameters\": {}}]\n```", NULL,
     "Action: ```json\n[{\"tool_name\": \"directly-answer\", \"parameters\": {}}]\n```", {NULL}},
    /* ------------------------------------------------ Command R7B */
    {TY_TOOLS_COMMAND_R7B, TY_REASONING_COMMAND_R7B, 0,
     "<|START_THINKING|>I will call get_weather.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
     "\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n]<|END_ACTION|>",
     "I will call get_weather.", NULL, {W_CALL "|0"}},
    {TY_TOOLS_COMMAND_R7B, TY_REASONING_COMMAND_R7B, 0,
     "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": "
     "\"Paris\"}}, {\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}]",
     NULL, NULL, {W_CALL "|0", T_CALL "|1"}},
    {TY_TOOLS_COMMAND_R7B, TY_REASONING_COMMAND_R7B, 0, "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>", NULL,
     "It is sunny.", {NULL}},
    {TY_TOOLS_COMMAND_R7B, TY_REASONING_COMMAND_R7B, NO_TOOLS,
     "<|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>Hello there.<|END_RESPONSE|>", "Easy.", "Hello there.",
     {NULL}},
    /* ------------------------------------------------ functionary v3.1 */
    {TY_TOOLS_FUNCTIONARY_V31, TY_REASONING_NONE, 0, "<function=get_weather>{\"city\": \"Paris\"}</function>", NULL,
     NULL, {W_CALL}},
    {TY_TOOLS_FUNCTIONARY_V31, TY_REASONING_NONE, 0,
     "Both: <function=get_weather>{\"city\": \"Paris\"}</function><function=get_time>{\"tz\": \"UTC\"}</function>",
     NULL, "Both:", {W_CALL, T_CALL}},
    {TY_TOOLS_FUNCTIONARY_V31, TY_REASONING_NONE, 0, "<|python_tag|>print(2 + 2)", NULL, NULL,
     {"python|{\"code\":\"print(2 + 2)\"}"}},
    {TY_TOOLS_FUNCTIONARY_V31, TY_REASONING_NONE, 0, "<function=send_mail>{}</function>", NULL,
     "<function=send_mail>{}</function>", {NULL}},
    /* ------------------------------------------------ functionary v3.2 (the prompt ends with ">>>") */
    {TY_TOOLS_FUNCTIONARY_V32, TY_REASONING_NONE, 0, "get_weather\n{\"city\": \"Paris\"}", NULL, NULL, {W_CALL}},
    {TY_TOOLS_FUNCTIONARY_V32, TY_REASONING_NONE, 0,
     "all\nLet me check.>>>get_weather\n{\"city\": \"Paris\"}>>>get_time\n{\"tz\": \"UTC\"}", NULL, "Let me check.",
     {W_CALL, T_CALL}},
    {TY_TOOLS_FUNCTIONARY_V32, TY_REASONING_NONE, NO_TOOLS, "all\nIt is sunny.", NULL, "It is sunny.", {NULL}},
    {TY_TOOLS_FUNCTIONARY_V32, TY_REASONING_NONE, 0, "python\nprint(3)>>>all\nDone.", NULL, "Done.",
     {"python|{\"code\":\"print(3)\"}"}},
    {TY_TOOLS_FUNCTIONARY_V32, TY_REASONING_NONE, 0, "send_mail\n{}", NULL, "send_mail\n{}", {NULL}},
    /* ------------------------------------------------ firefunction v2 */
    {TY_TOOLS_FIREFUNCTION, TY_REASONING_NONE, 0, " functools[" WEATHER "]", NULL, NULL, {W_CALL}},
    {TY_TOOLS_FIREFUNCTION, TY_REASONING_NONE, 0, "I'll check. functools[" WEATHER ", " TIME "]", NULL,
     "I'll check.", {W_CALL, T_CALL}},
    {TY_TOOLS_FIREFUNCTION, TY_REASONING_NONE, 0, "functools[{\"name\": \"get_weather\"}]", NULL,
     "functools[{\"name\": \"get_weather\"}]", {NULL}},
    /* ------------------------------------------------ Granite */
    {TY_TOOLS_GRANITE, TY_REASONING_THINK, 0, "<|tool_call|>[" WEATHER "]", NULL, NULL, {W_CALL}},
    {TY_TOOLS_GRANITE, TY_REASONING_THINK, 0, "<think>Plan it.</think><response>It is sunny.</response>", "Plan it.",
     "It is sunny.", {NULL}},
    {TY_TOOLS_GRANITE, TY_REASONING_THINK, 0, "<|tool_call|>[" WEATHER ", " TIME "]", NULL, NULL, {W_CALL, T_CALL}},
    /* ------------------------------------------------ Nemotron Nano v2, Apriel */
    {TY_TOOLS_NEMOTRON_V2, TY_REASONING_THINK, 0, "<think>Need it.</think><TOOLCALL>[" WEATHER "]</TOOLCALL>",
     "Need it.", NULL, {W_CALL}},
    {TY_TOOLS_NEMOTRON_V2, TY_REASONING_NONE, 0, "Checking. <TOOLCALL>[" WEATHER ", " TIME "]", NULL, "Checking.",
     {W_CALL, T_CALL}},
    {TY_TOOLS_APRIEL, TY_REASONING_NONE, 0, "<tool_calls>[" WEATHER "]</tool_calls>", NULL, NULL, {W_CALL}},
    {TY_TOOLS_APRIEL, TY_REASONING_NONE, 0, "<tool_calls>[{\"name\": \"send_mail\", \"arguments\": {}}]</tool_calls>",
     NULL, "<tool_calls>[{\"name\": \"send_mail\", \"arguments\": {}}]</tool_calls>", {NULL}},
    /* ------------------------------------------------ gpt-oss (harmony) */
    {TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS, 0,
     "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
     "Need the weather.", NULL, {W_CALL}},
    {TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS, 0,
     "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.",
     "Simple.", "It is sunny.", {NULL}},
    {TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS, 0,
     "<|channel|>analysis<|message|>Time.<|end|><|start|>assistant to=functions.get_time<|channel|>commentary "
     "json<|message|>{\"tz\": \"UTC\"}<|call|>",
     "Time.", NULL, {T_CALL}},
    {TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS, RAW,
     "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.", NULL,
     "<|channel|>analysis<|message|>Simple.<|end|>\nIt is sunny.", {NULL}},
    {TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS, 0,
     "<|channel|>commentary to=functions.send_mail <|constrain|>json<|message|>{\"to\": \"bob\"}", NULL,
     "{\"to\": \"bob\"}", {NULL}},
    /* ------------------------------------------------ Kimi K2 */
    {TY_TOOLS_KIMI_K2, TY_REASONING_THINK, 0,
     "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"Paris\"}")
         "<|tool_calls_section_end|>",
     NULL, NULL, {W_CALL "|functions.get_weather:0"}},
    {TY_TOOLS_KIMI_K2, TY_REASONING_THINK, 0,
     "<think>Both at once.</think>Looking.<|tool_calls_section_begin|>" KIMI_CALL(
         "functions.get_weather:0", "{\"city\": \"Paris\"}") KIMI_CALL("functions.get_time:1", "{\"tz\": \"UTC\"}")
         "<|tool_calls_section_end|>",
     "Both at once.", "Looking.", {W_CALL "|functions.get_weather:0", T_CALL "|functions.get_time:1"}},
    {TY_TOOLS_KIMI_K2, TY_REASONING_THINK, 0,
     "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\" \"Paris\"}")
         "<|tool_calls_section_end|>",
     NULL,
     "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\" \"Paris\"}")
         "<|tool_calls_section_end|>",
     {NULL}},
    /* ------------------------------------------------ Seed-OSS */
    {TY_TOOLS_SEED_OSS, TY_REASONING_SEED, 0,
     "<seed:think>Check the weather.</seed:think>\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris"
     "</parameter>\n</function>\n</seed:tool_call>",
     "Check the weather.", NULL, {W_CALL}},
    {TY_TOOLS_SEED_OSS, TY_REASONING_SEED, 0,
     "Two.\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=note>line one\n"
     "line two</parameter>\n</function>\n</seed:tool_call>\n<seed:tool_call>\n<function=get_time>\n<parameter=tz>UTC"
     "</parameter>\n</function>\n</seed:tool_call>",
     NULL, "Two.", {"get_weather|{\"city\":\"Paris\",\"note\":\"line one\\nline two\"}", T_CALL}},
    {TY_TOOLS_SEED_OSS, TY_REASONING_SEED, STARTS_IN, "Hmm.</seed:think>It is sunny.", "Hmm.", "It is sunny.", {NULL}},
    /* ------------------------------------------------ GLM 4.5, MiniMax M2 */
    {TY_TOOLS_GLM, TY_REASONING_THINK, 0,
     "<think>Check it.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
     "</tool_call>",
     "Check it.", NULL, {W_CALL}},
    {TY_TOOLS_GLM, TY_REASONING_NONE, 0,
     "Two.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
     "<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n"
     "</tool_call>",
     NULL, "Two.", {"get_weather|{\"city\":\"Paris\",\"days\":3}", T_CALL}},
    {TY_TOOLS_GLM, TY_REASONING_NONE, 0, "<tool_call>get_time</tool_call>", NULL, NULL, {"get_time|{}"}},
    {TY_TOOLS_GLM, TY_REASONING_NONE, 0, "<tool_call>send_mail\n</tool_call>", NULL,
     "<tool_call>send_mail\n</tool_call>", {NULL}},
    {TY_TOOLS_MINIMAX_M2, TY_REASONING_THINK, 0,
     "<think>Both.</think>\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris"
     "</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"tz\">UTC</parameter>\n</invoke>\n"
     "</minimax:tool_call>",
     "Both.", NULL, {W_CALL, T_CALL}},
    {TY_TOOLS_MINIMAX_M2, TY_REASONING_NONE, 0,
     "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n",
     NULL, NULL, {W_CALL}}, /* the block's closing tag left out at the very end */
    {TY_TOOLS_MINIMAX_M2, TY_REASONING_NONE, 0,
     "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n", NULL,
     "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>", {NULL}},
    /* ------------------------------------------------ generic */
    {TY_TOOLS_GENERIC, TY_REASONING_NONE, 0, "{\"tool_calls\": [" WEATHER ", " TIME "]}", NULL, NULL,
     {W_CALL, T_CALL}},
    {TY_TOOLS_GENERIC, TY_REASONING_NONE, 0, "{\"tool_call\": " TIME "}", NULL, NULL, {T_CALL}},
    {TY_TOOLS_GENERIC, TY_REASONING_NONE, 0, "It is sunny.", NULL, "It is sunny.", {NULL}},
    {TY_TOOLS_GENERIC, TY_REASONING_NONE, 0, "{\"response\": \"hi\"}", NULL, "{\"response\": \"hi\"}", {NULL}},
};

static bool parse(const sample *c, size_t len, bool partial, ty_chat_output *out) {
    const ty_chat_syntax syn = {c->tools, c->reasoning};
    return ty_chat_output_parse(syn, c->flags & STARTS_IN, !(c->flags & RAW), fns, c->flags & NO_TOOLS ? 0 : N_OF(fns),
                                !(c->flags & SINGLE), c->text, len, partial, out);
}

static bool same(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* a a prefix of b, NULL as "" */
static bool prefix_of(const char *a, const char *b) {
    a = a ? a : "";
    b = b ? b : "";
    return !strncmp(a, b, strlen(a));
}

static bool same_call(const ty_tool_call *x, const ty_tool_call *y) {
    return same(x->name, y->name) && same(x->arguments, y->arguments) && same(x->id, y->id);
}

static void check_final(size_t i, const sample *c, const ty_chat_output *o) {
    const char *tag = ty_tool_format_name(c->tools);
    CHECK_MSG(same(o->reasoning, c->reasoning_want), "sample %zu (%s): reasoning [%s], want [%s]", i, tag,
              o->reasoning ? o->reasoning : "(null)", c->reasoning_want ? c->reasoning_want : "(null)");
    CHECK_MSG(same(o->content, c->content_want), "sample %zu (%s): content [%s], want [%s]", i, tag,
              o->content ? o->content : "(null)", c->content_want ? c->content_want : "(null)");
    size_t want = 0;
    while (want < 3 && c->calls_want[want]) want++;
    CHECK_MSG(o->n_calls == want, "sample %zu (%s): %zu calls, want %zu", i, tag, o->n_calls, want);
    for (size_t k = 0; k < want && k < o->n_calls; k++) {
        char got[512];
        snprintf(got, sizeof got, "%s|%s%s%s", o->calls[k].name, o->calls[k].arguments, o->calls[k].id ? "|" : "",
                 o->calls[k].id ? o->calls[k].id : "");
        CHECK_MSG(!strcmp(got, c->calls_want[k]), "sample %zu (%s): call %zu [%s], want [%s]", i, tag, k, got,
                  c->calls_want[k]);
    }
}

/* Every prefix, parsed as a stream: a prefix of the next prefix's parse and of the final one. */
static void check_stream(size_t i, const sample *c, const ty_chat_output *final) {
    const size_t len = strlen(c->text);
    ty_chat_output prev = {0};
    for (size_t l = 0; l <= len; l++) {
        ty_chat_output o;
        if (!parse(c, l, true, &o)) {
            CHECK_MSG(0, "sample %zu: no memory", i);
            break;
        }
        bool ok = prefix_of(o.reasoning, final->reasoning) && prefix_of(o.content, final->content) &&
                  prefix_of(prev.reasoning, o.reasoning) && prefix_of(prev.content, o.content) &&
                  o.n_calls <= final->n_calls && prev.n_calls <= o.n_calls;
        for (size_t k = 0; ok && k < o.n_calls; k++) ok = same_call(&o.calls[k], &final->calls[k]);
        CHECK_MSG(ok, "sample %zu (%s) at %zu bytes of %zu: reasoning [%s] content [%s] %zu calls; final [%s] [%s] %zu",
                  i, ty_tool_format_name(c->tools), l, len, o.reasoning ? o.reasoning : "(null)",
                  o.content ? o.content : "(null)", o.n_calls, final->reasoning ? final->reasoning : "(null)",
                  final->content ? final->content : "(null)", final->n_calls);
        ty_chat_output_free(&prev);
        prev = o;
        if (!ok) break;
    }
    ty_chat_output_free(&prev);
}

static void test_samples(void) {
    bool seen[TY_TOOLS_N_FORMATS] = {0};
    for (size_t i = 0; i < N_OF(samples); i++) {
        const sample *c = &samples[i];
        seen[c->tools] = true;
        ty_chat_output o;
        CHECK(parse(c, strlen(c->text), false, &o));
        check_final(i, c, &o);
        check_stream(i, c, &o);
        ty_chat_output_free(&o);
    }
    for (int f = 0; f < TY_TOOLS_N_FORMATS; f++)
        CHECK_MSG(seen[f], "no sample of %s", ty_tool_format_name((ty_tool_format)f));
}

/* What a stream shows at a few points, exactly. */
static void test_stream_holds(void) {
    static const struct {
        ty_tool_format tools;
        ty_reasoning_format reasoning;
        const char *text;
        const char *reasoning_want, *content_want;
        size_t n_calls;
    } cases[] = {
        /* the start of a call, and the white space before it */
        {TY_TOOLS_HERMES, TY_REASONING_NONE, "Hello <tool_call>\n{\"name\": \"get_weather\"", NULL, "Hello", 0},
        /* what may be the start of a marker */
        {TY_TOOLS_HERMES, TY_REASONING_NONE, "Hello <tool_c", NULL, "Hello", 0},
        {TY_TOOLS_HERMES, TY_REASONING_NONE, "Hello <b>", NULL, "Hello <b>", 0},
        {TY_TOOLS_HERMES, TY_REASONING_NONE, "<tool_call>\n" WEATHER "\n</tool_call>\nNow ", NULL, "Now", 1},
        {TY_TOOLS_HERMES, TY_REASONING_THINK, "<think>\nabc\n</thi", "abc", NULL, 0},
        {TY_TOOLS_HERMES, TY_REASONING_THINK, "<thi", NULL, NULL, 0},
        /* an incomplete UTF-8 character */
        {TY_TOOLS_HERMES, TY_REASONING_NONE, "caf\xc3", NULL, "caf", 0},
        {TY_TOOLS_LLAMA3, TY_REASONING_NONE, "{\"name\": \"get_weather\"", NULL, NULL, 0},
        {TY_TOOLS_LLAMA3, TY_REASONING_NONE, "Sunny", NULL, "Sunny", 0},
        {TY_TOOLS_COMMAND_R7B, TY_REASONING_COMMAND_R7B, "<|START_RESPONSE|>Hi<|END_RES", NULL, "Hi", 0},
        /* a section's closing marker is waited for while streaming */
        {TY_TOOLS_KIMI_K2, TY_REASONING_NONE,
         "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"Paris\"}"), NULL, NULL, 0},
        {TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS, "<|channel|>analysis<|message|>Think <|en", "Think", NULL, 0},
        {TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS,
         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}", NULL, NULL, 1},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        ty_chat_output o;
        const ty_chat_syntax syn = {cases[i].tools, cases[i].reasoning};
        CHECK(ty_chat_output_parse(syn, false, true, fns, N_OF(fns), true, cases[i].text, strlen(cases[i].text), true,
                                   &o));
        CHECK_MSG(same(o.reasoning, cases[i].reasoning_want) && same(o.content, cases[i].content_want) &&
                      o.n_calls == cases[i].n_calls,
                  "case %zu: reasoning [%s] content [%s] %zu calls", i, o.reasoning ? o.reasoning : "(null)",
                  o.content ? o.content : "(null)", o.n_calls);
        ty_chat_output_free(&o);
    }
}

/* Answers stitched at random from every format's markers, JSON and whole calls: for
 * every format and way of reading, each prefix's parse is a prefix of the next one's and
 * of the final parse. */
static void test_random_answers(void);

/* ---------------------------------------------------------------- grammars */

/* Each format's forced call of get_weather(city="Paris"), and of it and get_time(tz="UTC"). */
static const struct {
    ty_tool_format tools;
    const char *one, *two;
} forced[] = {
    {TY_TOOLS_GENERIC, "{\"tool_calls\": [" WEATHER "]}", "{\"tool_calls\": [" WEATHER ", " TIME "]}"},
    {TY_TOOLS_HERMES, "<tool_call>\n" WEATHER "\n</tool_call>",
     "<tool_call>\n" WEATHER "\n</tool_call>\n<tool_call>\n" TIME "\n</tool_call>"},
    {TY_TOOLS_QWEN3_CODER,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
     "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>"},
    {TY_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n{\"name\": \"get_time\", \"parameters\": "
     "{\"tz\": \"UTC\"}}"},
    {TY_TOOLS_MISTRAL_NEMO,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123XYZ\"}]",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123XYZ\"}, "
     "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}, \"id\": \"A00000001\"}]"},
    {TY_TOOLS_MISTRAL_SMALL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
     "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}"},
    {TY_TOOLS_DEEPSEEK_R1, "<｜tool▁calls▁begin｜>" R1_CALL("get_weather", "{\"city\": \"Paris\"}") "<｜tool▁calls▁end｜>",
     "<｜tool▁calls▁begin｜>" R1_CALL("get_weather", "{\"city\": \"Paris\"}") "\n" R1_CALL(
         "get_time", "{\"tz\": \"UTC\"}") "<｜tool▁calls▁end｜>"},
    {TY_TOOLS_DEEPSEEK_V31, "<｜tool▁calls▁begin｜>" V31_CALL("get_weather", "{\"city\": \"Paris\"}") "<｜tool▁calls▁end｜>",
     "<｜tool▁calls▁begin｜>" V31_CALL("get_weather", "{\"city\": \"Paris\"}") V31_CALL(
         "get_time", "{\"tz\": \"UTC\"}") "<｜tool▁calls▁end｜>"},
    {TY_TOOLS_COMMAND_R, "Action:\n```json\n[\n{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n]```",
     "Action:\n```json\n[\n{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}},\n"
     "{\"tool_name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}\n]```"},
    {TY_TOOLS_COMMAND_R7B,
     "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": "
     "\"Paris\"}}\n]<|END_ACTION|>",
     "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": "
     "\"Paris\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}\n]"
     "<|END_ACTION|>"},
    {TY_TOOLS_FUNCTIONARY_V31, "<function=get_weather>{\"city\": \"Paris\"}</function>",
     "<function=get_weather>{\"city\": \"Paris\"}</function><function=get_time>{\"tz\": \"UTC\"}</function>"},
    {TY_TOOLS_FUNCTIONARY_V32, "get_weather\n{\"city\": \"Paris\"}",
     "get_weather\n{\"city\": \"Paris\"}>>>get_time\n{\"tz\": \"UTC\"}"},
    {TY_TOOLS_FIREFUNCTION, " functools[" WEATHER "]", " functools[" WEATHER ", " TIME "]"},
    {TY_TOOLS_GRANITE, "<|tool_call|>[" WEATHER "]", "<|tool_call|>[" WEATHER ", " TIME "]"},
    {TY_TOOLS_GPT_OSS, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
     NULL},
    {TY_TOOLS_KIMI_K2,
     "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"Paris\"}")
         "<|tool_calls_section_end|>",
     "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"Paris\"}") KIMI_CALL(
         "functions.get_time:1", "{\"tz\": \"UTC\"}") "<|tool_calls_section_end|>"},
    {TY_TOOLS_NEMOTRON_V2, "<TOOLCALL>[" WEATHER "]</TOOLCALL>", "<TOOLCALL>[" WEATHER ", " TIME "]</TOOLCALL>"},
    {TY_TOOLS_APRIEL, "<tool_calls>[" WEATHER "]</tool_calls>", "<tool_calls>[" WEATHER ", " TIME "]</tool_calls>"},
    {TY_TOOLS_GLM, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n"
     "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>"},
    {TY_TOOLS_MINIMAX_M2,
     "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n"
     "</minimax:tool_call>",
     "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n"
     "</minimax:tool_call>\n<minimax:tool_call>\n<invoke name=\"get_time\">\n<parameter name=\"tz\">UTC</parameter>\n"
     "</invoke>\n</minimax:tool_call>"},
    {TY_TOOLS_SEED_OSS,
     "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>",
     "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>\n"
     "<seed:tool_call>\n<function=get_time>\n<parameter=tz>UTC</parameter>\n</function>\n</seed:tool_call>"},
};

static const char *const weather_schema =
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}";
static const char *const time_schema =
    "{\"type\": \"object\", \"properties\": {\"tz\": {\"type\": \"string\"}}, \"required\": [\"tz\"]}";

static toy_grammar *grammar_of(ty_chat_syntax syn, ty_prompt_thinking at, const ty_tool_function *f, size_t n,
                               bool parallel) {
    char err[320];
    char *gbnf = ty_chat_grammar(syn, at, f, n, parallel, NULL, err, sizeof err);
    CHECK_MSG(gbnf != NULL, "%s: %s", ty_tool_format_name(syn.tools), err);
    if (!gbnf) return NULL;
    toy_grammar *g = NULL;
    const toy_status st = toy_grammar_new(NULL, gbnf, &g);
    CHECK_MSG(!st, "%s: %s\n%s", ty_tool_format_name(syn.tools), toy_last_error(), gbnf);
    free(gbnf);
    return g;
}

static bool accepts(const toy_grammar *g, const char *text) { return g && toy_grammar_accepts(g, text, strlen(text)); }

/* text with every get_weather renamed */
static char *renamed(const char *text) {
    char *s = strdup(text);
    for (char *p = strstr(s, "get_weather"); p; p = strstr(p + 1, "get_weather")) memcpy(p, "get_wether_", 11);
    return s;
}

static void test_grammars(void) {
    json_t *weather = json_loads(weather_schema, 0, NULL), *time = json_loads(time_schema, 0, NULL);
    const ty_tool_function both[] = {{"get_weather", weather, false}, {"get_time", time, false}};
    bool seen[TY_TOOLS_N_FORMATS] = {0};
    for (size_t i = 0; i < N_OF(forced); i++) {
        const ty_chat_syntax syn = {forced[i].tools, TY_REASONING_NONE};
        const char *tag = ty_tool_format_name(syn.tools);
        seen[syn.tools] = true;
        toy_grammar *one = grammar_of(syn, TY_THINK_MAY_OPEN, both, 1, false);
        toy_grammar *any = grammar_of(syn, TY_THINK_MAY_OPEN, both, 2, true);
        char *other = renamed(forced[i].one);
        CHECK_MSG(accepts(one, forced[i].one), "%s: the grammar refuses %s", tag, forced[i].one);
        CHECK_MSG(!accepts(one, other), "%s: the grammar accepts %s", tag, other);
        CHECK_MSG(accepts(any, forced[i].one), "%s: the parallel grammar refuses %s", tag, forced[i].one);
        CHECK_MSG(!accepts(any, other), "%s: the parallel grammar accepts %s", tag, other);
        if (forced[i].two) {
            CHECK_MSG(accepts(any, forced[i].two), "%s: the parallel grammar refuses %s", tag, forced[i].two);
            CHECK_MSG(!accepts(one, forced[i].two), "%s: the one-call grammar accepts %s", tag, forced[i].two);
        }
        /* what the grammar accepts parses back to the calls */
        for (int k = 0; k < 2; k++) {
            const char *text = k ? forced[i].two : forced[i].one;
            if (!text) continue;
            ty_chat_output o;
            CHECK(ty_chat_output_parse(syn, false, true, fns, N_OF(fns), true, text, strlen(text), false, &o));
            CHECK_MSG(o.n_calls == (size_t)k + 1 && !o.content && !strcmp(o.calls[0].name, "get_weather") &&
                          !strcmp(o.calls[0].arguments, "{\"city\":\"Paris\"}"),
                      "%s: %s parses to %zu calls, content [%s]", tag, text, o.n_calls,
                      o.content ? o.content : "(null)");
            ty_chat_output_free(&o);
        }
        free(other);
        toy_grammar_free(one);
        toy_grammar_free(any);
    }
    for (int f = 0; f < TY_TOOLS_N_FORMATS; f++)
        CHECK_MSG(seen[f], "no forced call of %s", ty_tool_format_name((ty_tool_format)f));

    /* a thinking block first, or closing the one the prompt opened */
    static const struct {
        ty_chat_syntax syn;
        const char *think, *open_think;
    } thinkers[] = {
        {{TY_TOOLS_HERMES, TY_REASONING_THINK}, "<think>\nHmm.\n</think>\n\n", "Hmm.\n</think>\n\n"},
        {{TY_TOOLS_DEEPSEEK_R1, TY_REASONING_THINK}, "<think>\nHmm.\n</think>\n\n", "Hmm.\n</think>\n\n"},
        {{TY_TOOLS_SEED_OSS, TY_REASONING_SEED}, "<seed:think>Hmm.</seed:think>\n", "Hmm.</seed:think>\n"},
        {{TY_TOOLS_COMMAND_R7B, TY_REASONING_COMMAND_R7B}, "<|START_THINKING|>Hmm.<|END_THINKING|>",
         "Hmm.<|END_THINKING|>"},
        {{TY_TOOLS_GPT_OSS, TY_REASONING_GPT_OSS}, "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant", NULL},
    };
    for (size_t i = 0; i < N_OF(thinkers); i++) {
        const char *call = NULL;
        for (size_t k = 0; k < N_OF(forced); k++)
            if (forced[k].tools == thinkers[i].syn.tools) call = forced[k].one;
        char text[1024];
        toy_grammar *g = grammar_of(thinkers[i].syn, TY_THINK_MAY_OPEN, both, 2, false);
        snprintf(text, sizeof text, "%s%s", thinkers[i].think, call);
        CHECK_MSG(accepts(g, text), "refused: %s", text);
        CHECK_MSG(accepts(g, call), "refused: %s", call);
        ty_chat_output o;
        CHECK(ty_chat_output_parse(thinkers[i].syn, false, true, fns, N_OF(fns), true, text, strlen(text), false, &o));
        CHECK_MSG(o.n_calls == 1 && same(o.reasoning, "Hmm.") && !o.content, "%s: parses to [%s] %zu calls", text,
                  o.reasoning ? o.reasoning : "(null)", o.n_calls);
        ty_chat_output_free(&o);
        toy_grammar_free(g);
        /* a prompt that closed the block (Qwen 3 without thinking): the calls at once */
        g = grammar_of(thinkers[i].syn, TY_THINK_CLOSED, both, 2, false);
        CHECK_MSG(accepts(g, call), "refused after a closed block: %s", call);
        CHECK_MSG(!accepts(g, text), "a second thinking block accepted: %s", text);
        toy_grammar_free(g);
        if (!thinkers[i].open_think) continue;
        g = grammar_of(thinkers[i].syn, TY_THINK_OPEN, both, 2, false);
        snprintf(text, sizeof text, "%s%s", thinkers[i].open_think, call);
        CHECK_MSG(accepts(g, text), "refused: %s", text);
        CHECK_MSG(!accepts(g, call), "the open block must be closed first: %s", call);
        CHECK(ty_chat_output_parse(thinkers[i].syn, true, true, fns, N_OF(fns), true, text, strlen(text), false, &o));
        CHECK_MSG(o.n_calls == 1 && same(o.reasoning, "Hmm."), "%s: parses to [%s] %zu calls", text,
                  o.reasoning ? o.reasoning : "(null)", o.n_calls);
        ty_chat_output_free(&o);
        toy_grammar_free(g);
    }

    /* XML parameters: a string's raw text, an enum's values, JSON for the rest, optional ones optional */
    json_t *rich = json_loads("{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
                              "{\"enum\": [\"C\", \"F\"]}, \"days\": {\"type\": \"integer\"}}, \"required\": "
                              "[\"city\", \"unit\"]}",
                              0, NULL);
    const ty_tool_function rich_fn[] = {{"get_weather", rich, false}};
    toy_grammar *g = grammar_of((ty_chat_syntax){TY_TOOLS_QWEN3_CODER, TY_REASONING_NONE}, TY_THINK_MAY_OPEN, rich_fn, 1, false);
    static const char *const yes[] = {
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Jose\n</parameter>\n<parameter=unit>\nC\n"
        "</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nF\n"
        "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
    };
    static const char *const no[] = {
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nK\n"
        "</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nC\n"
        "</parameter>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
    };
    for (size_t i = 0; i < N_OF(yes); i++) CHECK_MSG(accepts(g, yes[i]), "refused: %s", yes[i]);
    for (size_t i = 0; i < N_OF(no); i++) CHECK_MSG(!accepts(g, no[i]), "accepted: %s", no[i]);
    toy_grammar_free(g);

    /* a schema the grammar cannot express names its function */
    json_t *bad_schema = json_loads("{\"type\": \"object\", \"properties\": {\"tags\": {\"type\": \"array\", "
                                    "\"uniqueItems\": true}}}",
                                    0, NULL);
    const ty_tool_function with_bad[] = {{"get_weather", weather, true}, {"get_time", bad_schema, true}};
    for (int xml = 0; xml < 2; xml++) {
        char err[320];
        size_t bad = 0;
        const ty_chat_syntax syn = {xml ? TY_TOOLS_SEED_OSS : TY_TOOLS_HERMES, TY_REASONING_NONE};
        char *gbnf = ty_chat_grammar(syn, TY_THINK_MAY_OPEN, with_bad, 2, true, &bad, err, sizeof err);
        CHECK(gbnf == NULL);
        CHECK_EQ(bad, 1);
        CHECK_STR_CONTAINS(err, "uniqueItems");
        free(gbnf);
    }
    json_decref(bad_schema);
    json_decref(rich);
    json_decref(weather);
    json_decref(time);
}

static void test_random_answers(void) {
    static const char *const pieces[] = {
        "<tool_call>", "</tool_call>", "\n", " ", "{", "}", "[", "]", "\"", ",", ":", ";", "get_weather", "get_time",
        "\"name\": ", "\"arguments\": ", "\"parameters\": ", "{\"city\": \"Paris\"}", "Paris", "Hi.", "\xc3\xa9",
        "<think>", "</think>", "<seed:think>", "</seed:think>", "<|START_THINKING|>", "<|END_THINKING|>",
        "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "function<｜tool▁sep｜>",
        "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "```json\n", "```", "Action:", "<|START_ACTION|>",
        "<|END_ACTION|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<function=", ">", "</function>", "<parameter=",
        "</parameter>", "<|python_tag|>", ">>>", "all\n", "functools[", "<|tool_call|>", "<response>", "<|channel|>",
        "analysis", "final", " to=functions.get_weather", " <|constrain|>json", "<|message|>", "<|end|>",
        "<|start|>assistant", "<|call|>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>",
        "functions.get_weather:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>",
        "<seed:tool_call>", "</seed:tool_call>",
    };
    static const ty_reasoning_format reasonings[] = {TY_REASONING_NONE, TY_REASONING_THINK, TY_REASONING_SEED,
                                                     TY_REASONING_GPT_OSS, TY_REASONING_COMMAND_R7B};
    unsigned long long seed = 0x5eed;
    char text[1024];
    int checked = 0;
#if defined(TEST_UNDER_ASAN)
    const int per_format = 10;
#else
    const int per_format = 40;
#endif
    for (int f = 0; f < TY_TOOLS_N_FORMATS; f++)
        for (int t = 0; t < per_format; t++) {
            size_t len = 0;
            const size_t n_pieces = 1 + test_rand_u64(&seed) % 14;
            for (size_t k = 0; k < n_pieces; k++) {
                const bool whole = test_rand_u64(&seed) % 4 == 0; /* a whole call of some format */
                const char *piece = whole ? forced[test_rand_u64(&seed) % N_OF(forced)].one
                                          : pieces[test_rand_u64(&seed) % N_OF(pieces)];
                const size_t l = strlen(piece);
                if (len + l >= sizeof text) break;
                memcpy(text + len, piece, l);
                len += l;
            }
            text[len] = 0;
            const int flags = (int)(test_rand_u64(&seed) % 16);
            const sample c = {(ty_tool_format)f, reasonings[test_rand_u64(&seed) % N_OF(reasonings)], flags, text,
                              NULL, NULL, {NULL}};
            ty_chat_output o;
            CHECK(parse(&c, len, false, &o));
            check_stream((size_t)(f * 1000 + t), &c, &o);
            ty_chat_output_free(&o);
            checked++;
        }
    CHECK_EQ(checked, TY_TOOLS_N_FORMATS * per_format);
}

int main(void) {
    test_detection_snippets();
    test_detection_templates();
    test_prompt_opens_reasoning();
    test_samples();
    test_stream_holds();
    test_random_answers();
    test_grammars();
    return test_finish("test_tool_calls");
}
