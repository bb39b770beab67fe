/* test_chat_prompt.c — what a chat's prompt adds to a template's rendering
 * (src/chat/template.c, docs/chat-templates.md), as llama-server's --jinja does: a call's
 * arguments kept as text for a template that takes only text, a null content given as ""
 * to one that fails on it, the system text moved into the first user message for one
 * without a system role, firefunction's `functions` and `datetime`, the tool_use variant
 * for requests with tools; and the reading of a reply: partial parses that extend each
 * other, a forced call's grammar with no thinking block after a prompt that closed it. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tool_prompt.h"
#include "toy.h"

static const char *const tools =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]";

static toy_chat_template *new_template(const char *text) {
    toy_chat_template *t = NULL;
    const toy_status st = toy_chat_template_new(text, "<s>", "</s>", &t);
    CHECK_MSG(!st, "%s: %s", text, toy_last_error());
    return t;
}

/* the chat prompt of messages (and tools), or "ERROR: message" */
static char *prompt_of(const toy_chat_template *t, const char *messages, const char *tools_json, const char *kwargs) {
    char *p = NULL;
    if (toy_chat_template_prompt(t, messages, tools_json, kwargs, true, &p)) {
        const char *e = toy_last_error();
        p = malloc(strlen(e) + 8);
        strcpy(p, "ERROR: ");
        strcat(p, e);
    }
    return p;
}

static void expect(const toy_chat_template *t, const char *messages, const char *tools_json, const char *kwargs,
                   const char *want) {
    char *got = prompt_of(t, messages, tools_json, kwargs);
    CHECK_MSG(got && !strcmp(got, want), "%s\n  got:  [%s]\n  want: [%s]", messages, got ? got : "(null)", want);
    free(got);
}

static void test_text_arguments(void) {
    /* functionary v3.1 adds the arguments to a string: an object fails there */
    toy_chat_template *t = new_template(
        "{% for m in messages %}{% if m.tool_calls %}{{ '<function=' + m.tool_calls[0].function.name + '>' + "
        "m.tool_calls[0].function.arguments + '</function>' }}{% else %}{{ m.role + ':' + m.content + ';' }}"
        "{% endif %}{% endfor %}{{ 'tools' if tools else '' }}");
    expect(t,
           "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
           "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
           "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]}]",
           tools, NULL, "user:hi;<function=get_weather>{\"city\": \"Paris\"}</function>tools");
    toy_chat_template_free(t);
    /* a template that writes objects gets an object */
    t = new_template("{% for m in messages %}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | tojson }}"
                     "{% endif %}{% endfor %}{{ tools | length if tools else 0 }}");
    expect(t,
           "[{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", "
           "\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}}]}]",
           tools, NULL, "{\"a\": 1}1");
    toy_chat_template_free(t);
}

static void test_null_content(void) {
    /* Qwen 3's: content.lstrip() on an assistant message that only calls */
    toy_chat_template *t = new_template("{% for m in messages %}[{{ m.content.lstrip() }}]{% endfor %}{{ tools | length if tools else 0 }}");
    expect(t,
           "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
           "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{}\"}}]}]",
           tools, NULL, "[hi][]1");
    toy_chat_template_free(t);
    /* one that tells None apart keeps it */
    t = new_template("{% for m in messages %}[{{ 'none' if m.content is none else m.content }}]{% endfor %}");
    expect(t, "[{\"role\": \"assistant\", \"content\": null}]", NULL, NULL, "[none]");
    toy_chat_template_free(t);
}

static void test_system_role(void) {
    /* Gemma's refuse a system message: its text begins the first user message */
    toy_chat_template *t = new_template(
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}<{{ m.role }}>{{ m.content if m.content is string else m.content | map(attribute='text') | join('|') }}"
        "{% endfor %}");
    expect(t, "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]", NULL,
           NULL, "<user>Be brief.\n\nHi");
    expect(t, "[{\"role\": \"system\", \"content\": \"Be brief.\"}]", NULL, NULL, "<user>Be brief.");
    expect(t,
           "[{\"role\": \"system\", \"content\": [{\"type\": \"text\", \"text\": \"Be\"}, {\"type\": \"text\", \"text\": "
           "\" brief.\"}]}, {\"role\": \"assistant\", \"content\": \"Yes.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]",
           NULL, NULL, "<assistant>Yes.<user>Be brief.\n\nHi");
    toy_chat_template_free(t);
    /* one with a system role is left as it is */
    t = new_template("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}");
    expect(t, "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U\"}]", NULL, NULL,
           "<system>S<user>U");
    toy_chat_template_free(t);
}

static void test_firefunction(void) {
    toy_chat_template *t = new_template(
        "{# functools[ #}{{ 'F=' + functions + ';D=' + datetime + ';' }}{% for m in messages %}{{ m.content }}"
        "{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments + '!' }}{% endif %}{% endfor %}");
    expect(t, "[{\"role\": \"user\", \"content\": \"hi\"}]", tools, "{\"datetime\": \"Dec 07 2026\"}",
           "F=[\n  {\n    \"type\": \"function\",\n    \"function\": {\n      \"name\": \"get_weather\",\n      "
           "\"parameters\": {\n        \"type\": \"object\",\n        \"properties\": {\n          \"city\": {\n"
           "            \"type\": \"string\"\n          }\n        },\n        \"required\": [\n          \"city\"\n"
           "        ]\n      }\n    }\n  }\n];D=Dec 07 2026;hi");
    expect(t, "[{\"role\": \"user\", \"content\": \"hi\"}]", NULL, "{\"datetime\": \"now\"}", "F=;D=now;hi");
    /* its template adds the arguments to a string, which the probes find with its variables given */
    expect(t,
           "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
           "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{}\"}}]}]",
           NULL, "{\"datetime\": \"now\"}", "F=;D=now;hi{}!");
    /* the reply is read as firefunction's */
    char *msg = NULL;
    CHECK(!toy_chat_template_parse(t, "", " functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]",
                                   tools, true, &msg));
    CHECK_STR_CONTAINS(msg, "\"name\":\"get_weather\"");
    free(msg);
    toy_chat_template_free(t);
}

static void test_tool_use_variant(void) {
    toy_chat_template *t = new_template("default:{% for m in messages %}{{ m.content }}{% endfor %}");
    ty_chat_template_set_tool_use(t, new_template("tool_use:{{ tools | length }}:{% for m in messages %}{{ m.content }}"
                                                  "{% endfor %}<tool_call>"));
    expect(t, "[{\"role\": \"user\", \"content\": \"hi\"}]", NULL, NULL, "default:hi");
    expect(t, "[{\"role\": \"user\", \"content\": \"hi\"}]", "[]", NULL, "default:hi");
    expect(t, "[{\"role\": \"user\", \"content\": \"hi\"}]", tools, NULL, "tool_use:1:hi<tool_call>");
    /* the variant's syntax reads the reply: Hermes calls */
    char *msg = NULL;
    CHECK(!toy_chat_template_parse(t, "", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
                                   tools, true, &msg));
    CHECK_STR_CONTAINS(msg, "\"tool_calls\"");
    free(msg);
    toy_chat_template_free(t);
}

static void test_partial_parse(void) {
    toy_chat_template *t = new_template("{% for m in messages %}{{ m.content }}{% endfor %}<think>{{ tools }}");
    static const char reply[] = "<think>\nI should greet.\n</think>\n\nHello there, friend.";
    char prev_r[128] = "", prev_c[128] = "";
    for (size_t n = 0; n <= strlen(reply); n++) {
        char part[128], *msg = NULL;
        memcpy(part, reply, n);
        part[n] = 0;
        const bool last = n == strlen(reply);
        CHECK(!(last ? toy_chat_template_parse : toy_chat_template_parse_partial)(t, "", part, NULL, true, &msg));
        const char *r = strstr(msg, "\"reasoning_content\":\""), *c = strstr(msg, "\"content\":\"");
        char rr[128] = "", cc[128] = "";
        if (r) sscanf(r + 21, "%127[^\"]", rr);
        if (c) sscanf(c + 11, "%127[^\"]", cc);
        CHECK_MSG(!strncmp(rr, prev_r, strlen(prev_r)) && !strncmp(cc, prev_c, strlen(prev_c)),
                  "at %zu: [%s][%s] does not extend [%s][%s]", n, rr, cc, prev_r, prev_c);
        strcpy(prev_r, rr);
        strcpy(prev_c, cc);
        free(msg);
    }
    CHECK_MSG(!strcmp(prev_r, "I should greet.") && !strcmp(prev_c, "Hello there, friend."), "[%s][%s]", prev_r, prev_c);
    toy_chat_template_free(t);
}

static void test_grammar_after_closed_thinking(void) {
    toy_chat_template *t = new_template("{{ tools }}<think></think><tool_call>");
    char *open = NULL, *closed = NULL;
    CHECK(!toy_chat_template_tool_grammar(t, "<|im_start|>assistant\n", tools, NULL, false, &open));
    CHECK(!toy_chat_template_tool_grammar(t, "<|im_start|>assistant\n<think>\n\n</think>\n\n", tools, NULL, false,
                                          &closed));
    CHECK_MSG(open && strstr(open, "<think>"), "a thinking block may come first: %s", open);
    CHECK_MSG(closed && !strstr(closed, "<think>"), "no thinking block after a closed one: %s", closed);
    free(open);
    free(closed);
    toy_chat_template_free(t);
}

int main(void) {
    test_text_arguments();
    test_null_content();
    test_system_role();
    test_firefunction();
    test_tool_use_variant();
    test_partial_parse();
    test_grammar_after_closed_thinking();
    return test_finish("test_chat_prompt");
}
