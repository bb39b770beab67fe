/* test_tool_requests.c — tool calling in toy serve (src/server/tool_requests.c): a
 * conversation with tools, a call and its result rendered in each family's syntax (exact
 * prompts), the prompt without tools left as toy_chat_apply makes it, answers in the
 * forms the server writes parsed into calls (parallel, one, malformed; tool_calls.c's
 * parser, whose every format test_tool_calls checks), the grammars of forced calls, and
 * the checks on tools, tool_choice and tool messages. */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tool_requests.h"
#include "toy.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const tools_json =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather of a city\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
    "[\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {}}}}]";

/* the first tool as the templates write it (tojson), flat and indented by 4 */
#define TOOL0                                                                                                      \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather of a city\", " \
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "   \
    "[\"city\"]}}}"
#define TOOL1 "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}"
#define TOOL0_INDENT4                                                                                               \
    "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": " \
    "\"Weather of a city\",\n        \"parameters\": {\n            \"type\": \"object\",\n            "            \
    "\"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                }\n " \
    "           },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}"
#define TOOL1_INDENT4                                                                                           \
    "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_time\",\n        \"parameters\": " \
    "{\n            \"type\": \"object\",\n            \"properties\": {}\n        }\n    }\n}"

/* the syntax of a built-in family, as the server reads its answers */
static ty_chat_syntax family_syntax(const char *family) {
    toy_chat_template *t = NULL;
    CHECK(!toy_chat_template_builtin(family, &t));
    const ty_chat_syntax syn = ty_chat_template_syntax(t);
    toy_chat_template_free(t);
    return syn;
}

static tools_request request(const char *family, const char *extra) {
    char body[2048];
    snprintf(body, sizeof body, "{\"tools\": %s%s}", tools_json, extra);
    json_t *j = json_loads(body, 0, NULL);
    tools_request t;
    tools_error err;
    CHECK_MSG(tools_request_parse(j, family_syntax(family), &t, &err), "%s", err.message);
    json_decref(j);
    return t;
}

/* The prompt of the conversation in the family's tool form (tool_prompt.h), the tools
 * as the request gives them. */
static bool render(const tools_request *t, const char *family, const ty_chat_turn *m, size_t n, bool agp, char **got) {
    const ty_chat_tools shown = {t ? t->json : NULL, t ? t->parallel : true, t && t->choice == TOOL_CHOICE_NONE};
    return ty_tool_prompt_family(t ? &shown : NULL, family, m, n, agp, got) == TOY_OK;
}

/* system, user, an assistant's call, its result */
static json_t *calls_json;
static ty_chat_turn conv[4];

static void make_conversation(void) {
    calls_json = json_loads("[{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                            "\"arguments\": \"{\\\"city\\\":\\\"Paris\\\"}\"}}]",
                            0, NULL);
    CHECK(calls_json != NULL);
    conv[0] = (ty_chat_turn){"system", "You are helpful.", NULL, NULL};
    conv[1] = (ty_chat_turn){"user", "Weather in Paris?", NULL, NULL};
    conv[2] = (ty_chat_turn){"assistant", "", calls_json, NULL};
    conv[3] = (ty_chat_turn){"tool", "sunny", NULL, "call_1"};
}

static void check_prompt(const char *family, const char *expected) {
    tools_request t = request(family, "");
    char *got = NULL;
    CHECK_MSG(render(&t, family, conv, N_OF(conv), true, &got), "%s: %s", family, toy_last_error());
    CHECK_MSG(got && !strcmp(got, expected), "%s:\n  got      \"%s\"\n  expected \"%s\"", family, got ? got : "(null)",
              expected);
    free(got);
    tools_request_free(&t);
}

#define GENERIC_SYSTEM                                                                                             \
    "You are helpful.\n\nYou can call functions (tools). They are, one JSON object a line:\n" TOOL0 "\n" TOOL1      \
    "\n\nTo call one or more of them, answer with only a JSON object of this form:\n{\"tool_calls\": [{\"name\": " \
    "<function name>, \"arguments\": <its arguments as a JSON object>}]}\nThe results come back as "               \
    "{\"tool_results\": [{\"tool_call_id\": <id>, \"content\": <result>}]}. To answer without calling a function, " \
    "reply in plain text."

static void test_render(void) {
    make_conversation();
    check_prompt("chatml",
                 "<|im_start|>system\nYou are helpful.\n\n# Tools\n\nYou may call one or more functions to assist "
                 "with the user query.\n\nYou are provided with function signatures within <tools></tools> XML "
                 "tags:\n<tools>\n" TOOL0 "\n" TOOL1
                 "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                 "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                 "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
                 "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                 "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                 "\"Paris\"}}\n</tool_call><|im_end|>\n"
                 "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_prompt("llama3",
                 "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: "
                 "December 2023\nToday Date: 26 Jul 2024\n\nYou have access to the following functions. To call a "
                 "function, please respond with JSON for a function call.Respond in the format {\"name\": function "
                 "name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n" TOOL0_INDENT4
                 "\n\n" TOOL1_INDENT4 "\n\nYou are helpful.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
                 "{\"city\": \"Paris\"}}<|eot_id|>"
                 "<|start_header_id|>ipython<|end_header_id|>\n\nsunny<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_prompt("mistral-v3",
                 "[AVAILABLE_TOOLS] [" TOOL0 ", " TOOL1 "][/AVAILABLE_TOOLS]"
                 "[INST] You are helpful.\n\nWeather in Paris?[/INST]"
                 "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
                 "\"call_1\"}]</s>"
                 "[TOOL_RESULTS] {\"content\": \"sunny\", \"call_id\": \"call_1\"}[/TOOL_RESULTS]");
    check_prompt("mistral-v7-tekken",
                 "[SYSTEM_PROMPT]You are helpful.[/SYSTEM_PROMPT]"
                 "[AVAILABLE_TOOLS][" TOOL0 ", " TOOL1 "][/AVAILABLE_TOOLS]"
                 "[INST]Weather in Paris?[/INST]"
                 "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
                 "\"call_1\"}]</s>"
                 "[TOOL_RESULTS]{\"content\": \"sunny\", \"call_id\": \"call_1\"}[/TOOL_RESULTS]");
    /* the generic form, in Gemma's turns (the system text opens the first user turn) */
    check_prompt("gemma", "<start_of_turn>user\n" GENERIC_SYSTEM "\n\nWeather in Paris?<end_of_turn>\n"
                          "<start_of_turn>model\n{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": "
                          "{\"city\": \"Paris\"}, \"id\": \"call_1\"}]}<end_of_turn>\n"
                          "<start_of_turn>user\n{\"tool_results\": [{\"tool_call_id\": \"call_1\", \"content\": "
                          "\"sunny\"}]}<end_of_turn>\n<start_of_turn>model\n");
    check_prompt("phi3", "<|system|>\n" GENERIC_SYSTEM "<|end|>\n<|user|>\nWeather in Paris?<|end|>\n"
                         "<|assistant|>\n{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                         "\"Paris\"}, \"id\": \"call_1\"}]}<|end|>\n"
                         "<|user|>\n{\"tool_results\": [{\"tool_call_id\": \"call_1\", \"content\": \"sunny\"}]}"
                         "<|end|>\n<|assistant|>\n");

    /* Mistral v3: an answer after the results follows them directly, as the template
     * writes it; a later user message opens a turn */
    {
        ty_chat_turn m[6];
        memcpy(m, conv, sizeof conv);
        m[4] = (ty_chat_turn){"assistant", " It is sunny. ", NULL, NULL};
        m[5] = (ty_chat_turn){"user", "Thanks", NULL, NULL};
        tools_request t = request("mistral-v3", "");
        char *got = NULL;
        CHECK(render(&t, "mistral-v3", m, 6, true, &got));
        CHECK_STR_CONTAINS(got, "[/TOOL_RESULTS] It is sunny.</s>[AVAILABLE_TOOLS] [");
        CHECK_STR_CONTAINS(got, "[/AVAILABLE_TOOLS][INST] Thanks[/INST]");
        CHECK(got && strncmp(got, "[INST] You are helpful.\n\nWeather in Paris?[/INST][TOOL_CALLS]", 61) == 0);
        free(got);
        tools_request_free(&t);
    }

    /* parallel calls in one assistant message, two results in a row */
    {
        json_t *two = json_loads(
            "[{\"id\": \"a\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
            "\"{\\\"city\\\": \\\"Rome\\\"}\"}}, {\"id\": \"b\", \"type\": \"function\", \"function\": {\"name\": "
            "\"get_time\", \"arguments\": \"{}\"}}]",
            0, NULL);
        const ty_chat_turn m[] = {{"user", "Rome?", NULL, NULL},
                                   {"assistant", "Let me see.", two, NULL},
                                   {"tool", "rain", NULL, "a"},
                                   {"tool", "noon", NULL, "b"}};
        char *got = NULL;
        CHECK(render(NULL, "chatml", m, N_OF(m), false, &got));
        CHECK_MSG(got && !strcmp(got, "<|im_start|>user\nRome?<|im_end|>\n<|im_start|>assistant\nLet me see.\n"
                                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                                      "\"Rome\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
                                      "\"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
                                      "<tool_response>\nrain\n</tool_response>\n<tool_response>\nnoon\n"
                                      "</tool_response><|im_end|>\n"),
                  "got \"%s\"", got ? got : "(null)");
        free(got);
        CHECK(render(NULL, "llama3", m, N_OF(m), false, &got));
        CHECK_STR_CONTAINS(got, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
                                "\"parameters\": {\"city\": \"Rome\"}}\n{\"name\": \"get_time\", \"parameters\": "
                                "{}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\nrain<|eot_id|>"
                                "<|start_header_id|>ipython<|end_header_id|>\n\nnoon<|eot_id|>");
        free(got);
        CHECK(render(NULL, "zephyr", m, N_OF(m), false, &got));
        CHECK_STR_CONTAINS(got, "<|user|>\n{\"tool_results\": [{\"tool_call_id\": \"a\", \"content\": \"rain\"}, "
                                "{\"tool_call_id\": \"b\", \"content\": \"noon\"}]}<|endoftext|>\n");
        free(got);
        json_decref(two);
    }

    /* no tools, no tool messages: toy_chat_apply's prompt, in every family */
    {
        static const char *const families[] = {"chatml", "llama3", "mistral-v1", "mistral-v3", "mistral-v3-tekken",
                                               "mistral-v7", "gemma", "phi3", "llama2", "deepseek3"};
        const toy_chat_message plain[] = {{"system", "S"}, {"user", " Hi "}, {"assistant", " Yo "}, {"user", "Q"}};
        ty_chat_turn m[4];
        for (size_t i = 0; i < 4; i++) m[i] = (ty_chat_turn){plain[i].role, plain[i].content, NULL, NULL};
        for (size_t f = 0; f < N_OF(families); f++) {
            char *want = NULL, *got = NULL;
            CHECK(toy_chat_apply(families[f], plain, 4, true, &want) == TOY_OK);
            CHECK(render(NULL, families[f], m, 4, true, &got));
            CHECK_MSG(want && got && !strcmp(want, got), "%s: \"%s\" != \"%s\"", families[f], got ? got : "",
                      want ? want : "");
            toy_free(want);
            free(got);
        }
    }

    /* tool_choice "none": the generic form leaves the tools out, the native forms keep
     * them (as llama-server, whose templates get the tools either way) */
    {
        char *got = NULL;
        tools_request t = request("gemma", ", \"tool_choice\": \"none\"");
        CHECK(render(&t, "gemma", conv, 2, true, &got));
        CHECK_MSG(got && !strstr(got, "tool_calls"), "%s", got);
        free(got);
        tools_request_free(&t);
        t = request("chatml", ", \"tool_choice\": \"none\"");
        CHECK(render(&t, "chatml", conv, 2, true, &got));
        CHECK_STR_CONTAINS(got, "<tools>\n" TOOL0);
        CHECK(!tools_parse_calls(&t));
        free(got);
        tools_request_free(&t);
    }
    json_decref(calls_json);
}

/* ---------------------------------------------------------------- parsing */

static const char *const fns[] = {"get_weather", "get_time"};

typedef struct {
    ty_tool_format syntax;
    bool parallel;
    const char *text;
    size_t n_calls;
    const char *content;   /* NULL: null */
    const char *calls[3];  /* "name arguments" */
} parse_case;

static const parse_case parse_cases[] = {
    /* Hermes: the text before the call is content, white space trimmed */
    {TY_TOOLS_HERMES, true, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
     1, NULL, {"get_weather {\"city\": \"Paris\"}"}},
    {TY_TOOLS_HERMES, true, "Let me look.\n<tool_call>{\"name\":\"get_time\",\"arguments\":{}}</tool_call>\n\n"
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x}\\\"{\"}}\n</tool_call>\n",
     2, "Let me look.", {"get_time {}", "get_weather {\"city\": \"x}\\\"{\"}"}},
    {TY_TOOLS_HERMES, false, "<tool_call>{\"name\":\"get_time\",\"arguments\":{}}</tool_call><tool_call>{\"name\":"
     "\"get_weather\",\"arguments\":{}}</tool_call> done", 1, "done", {"get_time {}"}},
    /* malformed: plain content */
    {TY_TOOLS_HERMES, true, "<tool_call>{\"name\":\"get_time\",\"arguments\":{}}", 0,
     "<tool_call>{\"name\":\"get_time\",\"arguments\":{}}", {0}},
    {TY_TOOLS_HERMES, true, "<tool_call>{\"name\":\"rm_rf\",\"arguments\":{}}</tool_call>", 0,
     "<tool_call>{\"name\":\"rm_rf\",\"arguments\":{}}</tool_call>", {0}},
    {TY_TOOLS_HERMES, true, "<tool_call>{\"name\":\"get_time\",\"arguments\":\"{}\"}</tool_call>", 0,
     "<tool_call>{\"name\":\"get_time\",\"arguments\":\"{}\"}</tool_call>", {0}},
    {TY_TOOLS_HERMES, true, "<tool_call>{\"name\":\"get_time\",\"arguments\":{},}</tool_call>", 0,
     "<tool_call>{\"name\":\"get_time\",\"arguments\":{},}</tool_call>", {0}},
    {TY_TOOLS_HERMES, true, "<tool_call>{\"name\":\"get_time\",\"arguments\":{},\"x\":1}</tool_call>", 0,
     "<tool_call>{\"name\":\"get_time\",\"arguments\":{},\"x\":1}</tool_call>", {0}},
    {TY_TOOLS_HERMES, true, "Just text.", 0, "Just text.", {0}},
    {TY_TOOLS_HERMES, true, "", 0, "", {0}},
    /* Llama 3.x: at the start only, "parameters" */
    {TY_TOOLS_LLAMA3, true, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", 1, NULL,
     {"get_weather {\"city\": \"Oslo\"}"}},
    {TY_TOOLS_LLAMA3, true, "{\"type\": \"function\", \"name\": \"get_time\", \"parameters\": {}}; {\"name\": "
     "\"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", 2, NULL,
     {"get_time {}", "get_weather {\"city\": \"Oslo\"}"}},
    {TY_TOOLS_LLAMA3, false, "{\"name\": \"get_time\", \"parameters\": {}}\n{\"name\": \"get_time\", \"parameters\": {}}",
     1, NULL, {"get_time {}"}},
    {TY_TOOLS_LLAMA3, true, "Sure: {\"name\": \"get_time\", \"parameters\": {}}", 0,
     "Sure: {\"name\": \"get_time\", \"parameters\": {}}", {0}},
    {TY_TOOLS_LLAMA3, true, "{\"name\": \"get_time\", \"parameters\": {}", 0, "{\"name\": \"get_time\", \"parameters\": {}",
     {0}},
    /* Mistral */
    {TY_TOOLS_MISTRAL_NEMO, true, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}, \"id\": "
     "\"abcdefghi\"}, {\"name\": \"get_time\", \"arguments\": {}}]", 2, NULL,
     {"get_weather {\"city\": \"Lima\"}", "get_time {}"}},
    {TY_TOOLS_MISTRAL_NEMO, false, "Hmm [TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", "
     "\"arguments\": {}}]", 1, "Hmm", {"get_time {}"}},
    {TY_TOOLS_MISTRAL_NEMO, true, "[TOOL_CALLS][]", 0, "[TOOL_CALLS][]", {0}},
    {TY_TOOLS_MISTRAL_NEMO, true, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, 3]", 0,
     "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, 3]", {0}},
    /* generic */
    {TY_TOOLS_GENERIC, true, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Kyiv\"}}, "
     "{\"name\": \"get_time\", \"arguments\": {}}]}\n", 2, NULL, {"get_weather {\"city\": \"Kyiv\"}", "get_time {}"}},
    {TY_TOOLS_GENERIC, true, "{\"tool_call\": {\"name\": \"get_time\", \"arguments\": {}}} and more", 1, "and more",
     {"get_time {}"}},
    {TY_TOOLS_GENERIC, true, "{\"response\": \"hello\"}", 0, "{\"response\": \"hello\"}", {0}},
    {TY_TOOLS_GENERIC, true, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}], \"x\": 1}", 0,
     "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}], \"x\": 1}", {0}},
    {TY_TOOLS_GENERIC, true, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}]", 0,
     "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}]", {0}},
};

static void test_parse(void) {
    for (size_t c = 0; c < N_OF(parse_cases); c++) {
        const parse_case *pc = &parse_cases[c];
        const ty_chat_syntax syn = {pc->syntax, TY_REASONING_NONE};
        ty_chat_output o;
        CHECK(ty_chat_output_parse(syn, false, true, fns, N_OF(fns), pc->parallel, pc->text, strlen(pc->text), false,
                                   &o));
        CHECK_MSG(o.n_calls == pc->n_calls, "case %zu: %zu calls, expected %zu", c, o.n_calls, pc->n_calls);
        /* (an empty answer's content is null) */
        const char *want = pc->content && *pc->content ? pc->content : NULL;
        CHECK_MSG(want ? o.content && !strcmp(o.content, want) : !o.content, "case %zu: content \"%s\", expected \"%s\"",
                  c, o.content ? o.content : "(null)", want ? want : "(null)");
        for (size_t k = 0; k < o.n_calls && k < pc->n_calls; k++) { /* the name, and the same JSON */
            const char *sp = strchr(pc->calls[k], ' ');
            json_t *want_args = json_loads(sp + 1, 0, NULL), *got_args = json_loads(o.calls[k].arguments, 0, NULL);
            CHECK_MSG(!strncmp(o.calls[k].name, pc->calls[k], (size_t)(sp - pc->calls[k])) &&
                          json_equal(want_args, got_args),
                      "case %zu call %zu: \"%s %s\", expected \"%s\"", c, k, o.calls[k].name, o.calls[k].arguments,
                      pc->calls[k]);
            json_decref(want_args);
            json_decref(got_args);
        }
        if (o.n_calls) {
            json_t *j = ty_tool_calls_json(&o, 0, true, TY_TOOLS_HERMES);
            const char *id = json_string_value(json_object_get(json_array_get(j, 0), "id"));
            CHECK(json_array_size(j) == o.n_calls && id &&
                  (o.calls[0].id ? !strcmp(id, o.calls[0].id) : strlen(id) == 29 && !strncmp(id, "call_", 5)));
            CHECK(json_integer_value(json_object_get(json_array_get(j, 0), "index")) == 0);
            CHECK(!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(j, 0), "function"), "name")),
                          o.calls[0].name));
            json_decref(j);
            /* a stream's later calls are counted from where the last delta stopped */
            j = ty_tool_calls_json(&o, o.n_calls - 1, true, TY_TOOLS_HERMES);
            CHECK(json_array_size(j) == 1 &&
                  json_integer_value(json_object_get(json_array_get(j, 0), "index")) == (json_int_t)o.n_calls - 1);
            json_decref(j);
        }
        ty_chat_output_free(&o);
    }
}

/* ---------------------------------------------------------------- checks */

static void expect_error(const char *body, const char *message) {
    json_t *j = json_loads(body, 0, NULL);
    CHECK_MSG(j != NULL, "bad test body %s", body);
    tools_request t;
    tools_error err;
    const bool ok = tools_request_parse(j, family_syntax("chatml"), &t, &err);
    CHECK_MSG(!ok && err.status == 400 && strstr(err.message, message), "%s: %s", body, ok ? "accepted" : err.message);
    tools_request_free(&t);
    json_decref(j);
}

static void test_request_checks(void) {
    expect_error("{\"tools\": {}}", "tools must be an array");
    expect_error("{\"tools\": [{\"type\": \"code\", \"function\": {\"name\": \"f\"}}]}", "tools[0].type must be \"function\"");
    expect_error("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", "
                 "\"function\": {\"name\": \"a b\"}}]}",
                 "tools[1].function.name must be 1 to 64 letters");
    expect_error("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", "
                 "\"function\": {\"name\": \"f\"}}]}",
                 "tools[1].function.name 'f' is tools[0]'s too");
    expect_error("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": []}}]}",
                 "tools[0].function.parameters must be a JSON Schema object");
    expect_error("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"returns\": {}}}]}",
                 "tools[0].function.returns is not supported");
    expect_error("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": \"any\"}",
                 "tool_choice must be");
    expect_error("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": "
                 "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}}",
                 "tool_choice names the function 'g', which tools does not declare");
    expect_error("{\"tool_choice\": \"required\"}", "tool_choice \"required\" needs tools");
    expect_error("{\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}", "which tools does not declare");
    expect_error("{\"tools\": [], \"parallel_tool_calls\": 1}", "parallel_tool_calls must be true or false");

    json_t *j = json_loads("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": "
                           "\"function\", \"function\": {\"name\": \"g\", \"strict\": true}}], \"tool_choice\": "
                           "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}, \"parallel_tool_calls\": false}",
                           0, NULL);
    tools_request t;
    tools_error err;
    CHECK(tools_request_parse(j, family_syntax("llama3"), &t, &err));
    CHECK(t.n_functions == 2 && t.choice == TOOL_CHOICE_NAMED && t.named == 1 && !t.parallel && t.functions[1].strict);
    CHECK(t.syntax.tools == TY_TOOLS_LLAMA3 && tools_parse_calls(&t));
    /* a function without parameters takes an empty object */
    json_t *empty = json_pack("{s:s,s:{}}", "type", "object", "properties");
    CHECK(json_equal((json_t *)t.functions[0].parameters, empty));
    json_decref(empty);
    tools_request_free(&t);
    json_decref(j);
    j = json_loads("{\"tools\": [], \"tool_choice\": \"auto\"}", 0, NULL);
    CHECK(tools_request_parse(j, family_syntax("gemma"), &t, &err) && t.n_functions == 0 &&
          !tools_parse_calls(&t));
    CHECK(t.syntax.tools == TY_TOOLS_GENERIC);
    tools_request_free(&t);
    json_decref(j);
}

static void expect_message_error(const char *msg, const char *role, const char *message) {
    json_t *j = json_loads(msg, 0, NULL);
    const json_t *calls;
    const char *id;
    tools_error err;
    const bool ok = tools_message_check(j, 3, role, &calls, &id, &err);
    CHECK_MSG(!ok && strstr(err.message, message), "%s: %s", msg, ok ? "accepted" : err.message);
    json_decref(j);
}

static void test_message_checks(void) {
    expect_message_error("{\"role\": \"user\", \"tool_calls\": [{}]}", "user", "messages[3].tool_calls: only an assistant");
    expect_message_error("{\"tool_calls\": {}}", "assistant", "messages[3].tool_calls must be an array");
    expect_message_error("{\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "
                         "\"{}\"}}]}",
                         "assistant", "messages[3].tool_calls[0] must be {\"id\"");
    expect_message_error("{\"tool_calls\": [{\"id\": \"x\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
                         "\"arguments\": \"[1]\"}}]}",
                         "assistant", "messages[3].tool_calls[0].function.arguments must be the text of a JSON object");
    expect_message_error("{\"tool_calls\": [{\"id\": \"x\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
                         "\"arguments\": {}}}]}",
                         "assistant", "messages[3].tool_calls[0] must be");
    expect_message_error("{\"content\": \"r\"}", "tool", "messages[3] (role tool) needs a tool_call_id");
    expect_message_error("{\"tool_call_id\": \"c\"}", "user", "messages[3].tool_call_id: only a tool message");
    expect_message_error("{\"tool_call_id\": 7}", "tool", "messages[3].tool_call_id must be a non-empty string");

    json_t *j = json_loads("{\"tool_calls\": [{\"id\": \"x\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
                           "\"arguments\": \"{\\\"a\\\": 1}\"}}]}",
                           0, NULL);
    const json_t *calls;
    const char *id;
    tools_error err;
    CHECK(tools_message_check(j, 0, "assistant", &calls, &id, &err) && calls && !id);
    json_decref(j);
}

/* ---------------------------------------------------------------- forcing */

static char *grammar_of(const char *family, const char *extra, tools_error *err) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
             "\"object\", \"properties\": {\"a\": {\"type\": \"boolean\"}}, \"required\": [\"a\"]}}}, {\"type\": "
             "\"function\", \"function\": {\"name\": \"g\"}}]%s}",
             extra);
    json_t *j = json_loads(body, 0, NULL);
    tools_request t;
    char *gbnf = NULL;
    if (!tools_request_parse(j, family_syntax(family), &t, err) || !tools_grammar(&t, TY_THINK_MAY_OPEN, &gbnf, err))
        gbnf = NULL;
    tools_request_free(&t);
    json_decref(j);
    return gbnf;
}

/* Whether a grammar accepts the text (the grammar's own check, with no vocabulary). */
static bool accepts(const char *gbnf, const char *text) {
    toy_grammar *g = NULL;
    if (toy_grammar_new(NULL, gbnf, &g)) return false;
    const bool ok = toy_grammar_accepts(g, text, strlen(text));
    toy_grammar_free(g);
    return ok;
}

static void test_grammar(void) {
    static const struct {
        const char *family, *extra;
        const char *yes, *no; /* an answer the grammar takes, one it refuses */
    } cases[] = {
        {"chatml", ", \"tool_choice\": \"required\"",
         "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": true}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"h\", \"arguments\": {}}\n</tool_call>"},
        {"llama3", ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}",
         "{\"name\": \"g\", \"parameters\": {}}", "{\"name\": \"f\", \"parameters\": {\"a\": true}}"},
        {"mistral-v7-tekken", ", \"tool_choice\": \"required\"",
         "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": false}, \"id\": \"abcdefghi\"}]", "[TOOL_CALLS][]"},
        {"gemma", ", \"tool_choice\": \"required\"", "{\"tool_calls\": [{\"name\": \"g\", \"arguments\": {}}]}",
         "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}"},
    };
    for (size_t c = 0; c < N_OF(cases); c++) {
        tools_error err;
        char *g = grammar_of(cases[c].family, cases[c].extra, &err);
        CHECK_MSG(g != NULL, "%s: %s", cases[c].family, err.message);
        CHECK_MSG(g && accepts(g, cases[c].yes), "%s: refuses %s", cases[c].family, cases[c].yes);
        CHECK_MSG(g && !accepts(g, cases[c].no), "%s: takes %s", cases[c].family, cases[c].no);
        free(g);
    }
    /* auto and none: no grammar */
    tools_error err;
    err.status = 0;
    char *g = grammar_of("chatml", ", \"tool_choice\": \"auto\"", &err);
    CHECK(g == NULL && err.status == 0);
    /* a schema the grammar cannot express names the function */
    json_t *j = json_loads("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": "
                           "\"function\", \"function\": {\"name\": \"h\", \"parameters\": {\"type\": \"object\", "
                           "\"properties\": {\"x\": {\"type\": \"complex\"}}}}}], \"tool_choice\": \"required\"}",
                           0, NULL);
    tools_request t;
    err.status = 0;
    CHECK(tools_request_parse(j, family_syntax("chatml"), &t, &err));
    g = NULL;
    CHECK(!tools_grammar(&t, TY_THINK_MAY_OPEN, &g, &err) && !g && err.status == 400);
    CHECK_STR_CONTAINS(err.message, "tools[1].function.parameters: #/properties/x");
    tools_request_free(&t);
    json_decref(j);
}

int main(void) {
    test_render();
    test_parse();
    test_request_checks();
    test_message_checks();
    test_grammar();
    if (test_failures) fprintf(stderr, "%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
