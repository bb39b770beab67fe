/* test_chat_template.c — chat template detection and formatting (src/chat/families.c).
 *
 * The first table is llama.cpp's own: tests/test-chat-template.cpp (ggml-org/llama.cpp,
 * commit 03f94f19) feeds each template text with its six-message conversation through
 * llama_chat_apply_template and compares with expected_output. The template texts are
 * copied from there (the long Mistral v3 and Yandex ones cut to the lines that carry
 * their markers), and so are the expected strings, byte for byte. For the families that
 * file has no case for, the expected strings follow src/llama-chat.cpp
 * (llm_chat_apply_template) by hand, on the four-message conversation below. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "toy.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* test-chat-template.cpp's conversation */
static const toy_chat_message conv6[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

/* system, user, assistant, and a follow-up user message; the spaces around the
 * assistant's reply show which families trim */
static const toy_chat_message conv4[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", " Hi there "},
    {"user", "Who are you"},
};

static char *apply(const char *family, const toy_chat_message *m, size_t n, bool add_ass) {
    char *out = NULL;
    const toy_status st = toy_chat_apply(family, m, n, add_ass, &out);
    CHECK_MSG(st == TOY_OK, "%s: %s", family, toy_last_error());
    return out;
}

static void check_output(const char *what, const char *got, const char *expected) {
    CHECK_MSG(got && strcmp(got, expected) == 0, "%s:\n  got      \"%s\"\n  expected \"%s\"", what,
              got ? got : "(null)", expected);
}

/* ================================================================ llama.cpp's cases */

typedef struct {
    const char *name;     /* test-chat-template.cpp's name for the case */
    const char *family;   /* what detection must say */
    const char *tmpl;     /* the template text */
    const char *expected; /* expected_output, add_generation_prompt = true */
} llama_case;

static const llama_case llama_cases[] = {
    {"teknium/OpenHermes-2.5-Mistral-7B", "chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"},
    {"mistralai/Mistral-7B-Instruct-v0.2 (old, no system prompt)", "llama2",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"},
    {"TheBloke/FusionNet_34Bx2_MoE-AWQ", "llama2-sys-bos",
     "{%- for idx in range(0, messages|length) -%}\n{%- if messages[idx]['role'] == 'user' -%}\n{%- if idx > 1 -%}\n{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}\n{%- else -%}\n{{- messages[idx]['content'] + ' [/INST]' -}}\n{%- endif -%}\n{% elif messages[idx]['role'] == 'system' %}\n{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}\n{%- elif messages[idx]['role'] == 'assistant' -%}\n{{- ' '  + messages[idx]['content'] + ' ' + eos_token -}}\n{% endif %}\n{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"},
    {"bofenghuang/vigogne-2-70b-chat", "llama2-sys-strip",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif true == true and not '<<SYS>>' in messages[0]['content'] %}{% set loop_messages = messages %}{% set system_message = 'Vous êtes Vigogne, un assistant IA créé par Zaion Lab. Vous suivez extrêmement bien les instructions. Aidez autant que vous le pouvez.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'system' %}{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]"},
    {"mlabonne/AlphaMonarch-7B", "monarch",
     "{% for message in messages %}{{bos_token + message['role'] + '\\n' + message['content'] + eos_token + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ bos_token + 'assistant\\n' }}{% endif %}",
     "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n"},
    {"google/gemma-7b-it", "gemma",
     "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
    {"OrionStarAI/Orion-14B-Chat", "orion",
     "{% for message in messages %}{% if loop.first %}{{ bos_token }}{% endif %}{% if message['role'] == 'user' %}{{ 'Human: ' + message['content'] + '\\n\\nAssistant: ' + eos_token }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
     "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n\nAssistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: </s>"},
    {"openchat/openchat-3.5-0106", "openchat",
     "{{ bos_token }}{% for message in messages %}{{ 'GPT4 Correct ' + message['role'].title() + ': ' + message['content'] + '<|end_of_turn|>'}}{% endfor %}{% if add_generation_prompt %}{{ 'GPT4 Correct Assistant:' }}{% endif %}",
     "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant:    I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question<|end_of_turn|>GPT4 Correct Assistant:"},
    {"deepseek-ai/deepseek-coder-33b-instruct", "deepseek",
     "{% if not add_generation_prompt is defined %}\n{% set add_generation_prompt = false %}\n{% endif %}\n{%- set ns = namespace(found=false) -%}\n{%- for message in messages -%}\n    {%- if message['role'] == 'system' -%}\n        {%- set ns.found = true -%}\n    {%- endif -%}\n{%- endfor -%}\n{{bos_token}}{%- if not ns.found -%}\n{{'You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you only answer questions related to computer science. For politically sensitive questions, security and privacy issues, and other non-computer science questions, you will refuse to answer\\n'}}\n{%- endif %}\n{%- for message in messages %}\n    {%- if message['role'] == 'system' %}\n{{ message['content'] }}\n    {%- else %}\n        {%- if message['role'] == 'user' %}\n{{'### Instruction:\\n' + message['content'] + '\\n'}}\n        {%- else %}\n{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{% if add_generation_prompt %}\n{{'### Response:'}}\n{% endif %}",
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n"},
    {"eachadea/vicuna-13b-1.1", "vicuna",
     "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{- '' + message['content'] + '\n\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + '\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}{{-'ASSISTANT:'-}}{%- endif -%}",
     "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {"Orca-Vicuna", "vicuna-orca",
     "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{-'SYSTEM: ' + message['content'] + '\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + '\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}{{-'ASSISTANT:'-}}{%- endif -%}",
     "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {"CohereForAI/c4ai-command-r-plus", "command-r",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif false == true %}{% set loop_messages = messages %}{% set system_message = 'You are Command-R, a brilliant, sophisticated, AI-assistant trained to assist human users by providing thorough responses. You are trained by Cohere.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% if system_message != false %}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + system_message + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% set content = message['content'] %}{% if message['role'] == 'user' %}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] == 'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}",
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"Llama-3", "llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"Phi-3-mini", "phi3",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {"Phi-3-small", "phi3",
     "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {"Phi-3-vision", "phi3",
     "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != 'assistant' %}{{- '<|assistant|>\n' -}}{% endif %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {"ChatGLM3", "chatglm3",
     "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n {{ message['content'] }}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
     "[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n Hi there<|user|>\n Who are you<|assistant|>\n    I am an assistant   <|user|>\n Another question<|assistant|>"},
    {"ChatGLM4", "chatglm4",
     "[gMASK]<sop>{% for item in messages %}{% if item['tools'] is defined %}<|system|>\n你是一个名为 ChatGLM 的人工智能助手。你是基于智谱AI训练的语言模型 GLM-4 模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具{% set tools = item['tools'] %}{% for tool in tools %}{% if tool['type'] == 'function' %}\n\n## {{ tool['function']['name'] }}\n\n{{ tool['function'] | tojson(indent=4) }}\n......{% endif %}{% endfor %}{% endif %}{% if item['content'] %}<|{{ item['role'] }}|>{{ item['metadata'] }}\n{{ item['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
     "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>\n"},
    {"GLMEdge", "glmedge",
     "{% for item in messages %}{% if item['role'] == 'system' %}<|system|>\n{{ item['content'] }}{% elif item['role'] == 'user' %}<|user|>\n{{ item['content'] }}{% elif item['role'] == 'assistant' %}<|assistant|>\n{{ item['content'] }}{% endif %}{% endfor %}<|assistant|>",
     "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>"},
    {"MiniCPM-3B-OpenHermes-2.5-v2-GGUF", "minicpm",
     "{% for message in messages %}{% if message['role'] == 'user' %}{{'<用户>' + message['content'].strip() + '<AI>'}}{% else %}{{message['content'].strip()}}{% endif %}{% endfor %}",
     "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an assistant<用户>Another question<AI>"},
    {"DeepSeek-V2", "deepseek2",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ message['content'] + '\n\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}",
     "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:"},
    {"ibm-granite/granite-3.0-8b-instruct", "granite",
     "{%- if tools %}\n    {{- '<|start_of_role|>available_tools<|end_of_role|>\n' }}\n    {%- for tool in tools %}\n    {{- tool | tojson(indent=4) }}\n    {%- if not loop.last %}\n        {{- '\n\n' }}\n    {%- endif %}\n    {%- endfor %}\n    {{- '<|end_of_text|>\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if message['role'] == 'system' %}\n    {{- '<|start_of_role|>system<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}\n    {%- elif message['role'] == 'user' %}\n    {{- '<|start_of_role|>user<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}\n    {%- elif message['role'] == 'assistant' %}\n    {{- '<|start_of_role|>assistant<|end_of_role|>'  + message['content'] + '<|end_of_text|>\n' }}\n    {%- elif message['role'] == 'assistant_tool_call' %}\n    {{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + message['content'] + '<|end_of_text|>\n' }}\n    {%- elif message['role'] == 'tool_response' %}\n    {{- '<|start_of_role|>tool_response<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}\n    {%- endif %}\n    {%- if loop.last and add_generation_prompt %}\n    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n    {%- endif %}\n{%- endfor %}",
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"},
    {"mistralai/Mistral-7B-Instruct-v0.2 ('v1' template with a system prompt)", "mistral-v1",
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n",
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]"},
    {"Mistral-Large-Instruct-2407 ('v3'; excerpt)", "mistral-v3",
     "{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- endif %}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- endif %}\n{%- endfor %}\n",
     "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]"},
    {"Mistral-Nemo-Instruct-2407 ('v3-tekken'; excerpt)", "mistral-v3-tekken",
     "{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS][\" }}\n            {%- endif %}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- message[\"content\"] + eos_token}}\n    {%- endif %}\n{%- endfor %}\n",
     "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"},
    {"mistralai/Mistral-Large-Instruct-2411 ('v7')", "mistral-v7",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and assistant roles are supported!') }}{% endif %}{% endfor %}",
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"},
    {"ai-sage/GigaChat-20B-A3B-instruct", "gigachat",
     "{% if messages[0]['role'] == 'system' -%}\n    {%- set loop_messages = messages[1:] -%}\n    {%- set system_message = bos_token + messages[0]['content'] + additional_special_tokens[1] -%}\n{%- else -%}\n    {%- set loop_messages = messages -%}\n    {%- set system_message = bos_token + '' -%}\n{%- endif -%}\n{%- for message in loop_messages %}\n    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n    {% endif %}\n    \n    {%- if loop.index0 == 0 -%}\n        {{ system_message -}}\n    {%- endif -%}\n    {%- if message['role'] == 'user' -%}\n        {{ message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1] -}}\n        {{ 'available functions' + additional_special_tokens[0] + additional_special_tokens[2] + additional_special_tokens[3]  + additional_special_tokens[1] -}}\n    {%- endif -%}\n    {%- if message['role'] == 'assistant' -%}\n        {{ message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1] -}}\n    {%- endif -%}\n    {%- if loop.last and add_generation_prompt -%}\n        {{ 'assistant' + additional_special_tokens[0] -}}\n    {%- endif -%}\n{%- endfor %}",
     "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>user<|role_sep|>Who are you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>   I am an assistant   <|message_sep|>user<|role_sep|>Another question<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>"},
    {"Infinigence/Megrez-3B-Instruct", "megrez",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|role_start|>system<|role_end|>你是Megrez-3B-Instruct，将针对用户的问题给出详细的、积极的回答。<|turn_end|>' }}{% endif %}{{ '<|role_start|>' + message['role'] + '<|role_end|>' + message['content'] + '<|turn_end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|role_start|>assistant<|role_end|>' }}{% endif %}",
     "<|role_start|>system<|role_end|>You are a helpful assistant<|turn_end|><|role_start|>user<|role_end|>Hello<|turn_end|><|role_start|>assistant<|role_end|>Hi there<|turn_end|><|role_start|>user<|role_end|>Who are you<|turn_end|><|role_start|>assistant<|role_end|>   I am an assistant   <|turn_end|><|role_start|>user<|role_end|>Another question<|turn_end|><|role_start|>assistant<|role_end|>"},
    {"phi-4", "phi4",
     "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|><|im_start|>assistant<|im_sep|>'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}",
     "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>"},
    {"yandex/YandexGPT-5-Lite-8B-instruct (excerpt)", "yandex",
     "<s>{%- set names = {'assistant': ' Ассистент:', 'user': ' Пользователь:'} %}\n{%- set tools_prefix = 'Тебе доступны следующие функции:' %}\n",
     " Пользователь: Hello\n\n Ассистент: Hi there\n\n Пользователь: Who are you\n\n Ассистент:    I am an assistant   \n\n Пользователь: Another question\n\n Ассистент:[SEP]"},
    {"inclusionAI/Ling-lite", "bailing",
     "{% for message in messages %}{% set role = message['role'] | lower %}{% if role == 'user' %}{% set role = 'HUMAN' %}{% endif %}{% set role = role | upper %}{{ '<role>' + role + '</role>' + message['content'] }}{% endfor %}{% if add_generation_prompt %}{{ '<role>ASSISTANT</role>' }}{% endif %}",
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>Another question<role>ASSISTANT</role>"},
    {"ByteDance-Seed/Seed-OSS-36B-Instruct", "seed_oss",
     "{# <seed:bos> #}{%- for message in messages %}{%- if message.role in [\"user\", \"system\"] %}{{ bos_token + message.role + \"\\n\" + message.content + eos_token }}{%- elif message.role == \"assistant\" %}{{ bos_token + message.role }}{%- if message.content is defined and message.content is string and message.content|trim|length > 0 %}{{ \"\\n\" + message.content|trim + eos_token }}{%- endif %}{%- else %}{{ bos_token + message.role + \"\\n\" + message.content + eos_token }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{ bos_token + \"assistant\\n\" }}{%- endif %}",
     "<seed:bos>system\nYou are a helpful assistant<seed:eos><seed:bos>user\nHello<seed:eos><seed:bos>assistant\nHi there<seed:eos><seed:bos>user\nWho are you<seed:eos><seed:bos>assistant\nI am an assistant<seed:eos><seed:bos>user\nAnother question<seed:eos><seed:bos>assistant\n"},
};

static void test_llama_cpp_cases(void) {
    for (size_t i = 0; i < N_OF(llama_cases); i++) {
        const llama_case *c = &llama_cases[i];
        const char *detected = toy_chat_template_detect(c->tmpl);
        CHECK_MSG(detected && strcmp(detected, c->family) == 0, "%s: detected %s, expected %s",
                  c->name, detected ? detected : "(null)", c->family);
        /* the template text itself, as llama_chat_apply_template takes it */
        char *out = apply(c->tmpl, conv6, N_OF(conv6), true);
        check_output(c->name, out, c->expected);
        free(out);
        out = apply(c->family, conv6, N_OF(conv6), true);
        check_output(c->family, out, c->expected);
        free(out);
    }
}

/* test-chat-template.cpp's "ibm-granite/granite-3.x (tool call)": the tool-call role gets
 * <|tool_call|> before its content. */
static void test_granite_tool_call(void) {
    toy_chat_message conv[N_OF(conv6) + 3];
    memcpy(conv, conv6, sizeof conv6);
    conv[6] = (toy_chat_message){"user", "What is the weather?"};
    conv[7] = (toy_chat_message){
        "assistant_tool_call",
        "[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]"};
    conv[8] = (toy_chat_message){"tool_response", "{\"temperature\": 72}"};
    char *out = apply("granite", conv, N_OF(conv), true);
    check_output("granite tool call", out,
                 "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]<|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
    free(out);
}

/* ================================================================ the other families */

/* Expected strings written from llm_chat_apply_template (src/llama-chat.cpp), conv4 with
 * add_assistant. */
static const struct {
    const char *family;
    const char *expected;
} other_cases[] = {
    {"zephyr", "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\n Hi there <|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n"},
    {"falcon3", "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\n Hi there \n<|user|>\nWho are you\n<|assistant|>\n"},
    {"llama2-sys", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>[INST] Who are you [/INST]"},
    {"mistral-v7-tekken", "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST] Hi there </s>[INST]Who are you[/INST]"},
    {"deepseek3", "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜> Hi there <｜end▁of▁sentence｜><｜User｜>Who are you<｜Assistant｜>"},
    {"exaone3", "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]Who are you\n[|assistant|]"},
    {"exaone4", "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]Who are you\n[|assistant|]"},
    {"rwkv-world", "System: You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there\n\nUser: Who are you\n\nAssistant:"},
    {"llama4", "<|header_start|>system<|header_end|>\n\nYou are a helpful assistant<|eot|><|header_start|>user<|header_end|>\n\nHello<|eot|><|header_start|>assistant<|header_end|>\n\nHi there<|eot|><|header_start|>user<|header_end|>\n\nWho are you<|eot|><|header_start|>assistant<|header_end|>\n\n"},
    {"smolvlm", "<|im_start|>You are a helpful assistant\n\nUser: Hello<end_of_utterance>\nAssistant:  Hi there <end_of_utterance>\nUser: Who are you<end_of_utterance>\nAssistant:"},
    {"dots1", "<|system|>You are a helpful assistant<|endofsystem|><|userprompt|>Hello<|endofuserprompt|><|response|> Hi there <|endofresponse|><|userprompt|>Who are you<|endofuserprompt|><|response|>"},
    {"hunyuan-moe", "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|extra_0|> Hi there <|eos|><|startoftext|>Who are you<|extra_0|>"},
    {"gpt-oss", "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>Hello<|end|><|start|>assistant<|message|> Hi there <|return|><|start|>user<|message|>Who are you<|end|><|start|>assistant"},
    {"hunyuan-dense", "You are a helpful assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜><｜hy_Assistant｜> Hi there <｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are you<｜hy_Assistant｜>"},
    {"kimi-k2", "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|> Hi there <|im_end|><|im_user|>user<|im_middle|>Who are you<|im_end|><|im_assistant|>assistant<|im_middle|>"},
};

static void test_other_families(void) {
    for (size_t i = 0; i < N_OF(other_cases); i++) {
        char *out = apply(other_cases[i].family, conv4, N_OF(conv4), true);
        check_output(other_cases[i].family, out, other_cases[i].expected);
        free(out);
    }
}

/* add_assistant = false leaves the generation prompt off; formats without one (llama2,
 * Mistral, Orion, MiniCPM, Hunyuan, RWKV) ignore the flag. */
static void test_add_assistant(void) {
    char *out = apply("chatml", conv4, 2, false);
    check_output("chatml, no prompt", out,
                 "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n");
    free(out);
    out = apply("llama3", conv4, 2, false);
    check_output("llama3, no prompt", out,
                 "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>");
    free(out);
    const char *no_prompt[] = {"llama2", "mistral-v1", "orion", "rwkv-world", "minicpm"};
    for (size_t i = 0; i < N_OF(no_prompt); i++) {
        char *with = apply(no_prompt[i], conv4, N_OF(conv4), true);
        char *without = apply(no_prompt[i], conv4, N_OF(conv4), false);
        CHECK_MSG(with && without && strcmp(with, without) == 0, "%s", no_prompt[i]);
        free(with);
        free(without);
    }
    /* an empty conversation: only the generation prompt, or nothing */
    out = apply("chatml", NULL, 0, true);
    check_output("chatml, empty", out, "<|im_start|>assistant\n");
    free(out);
    out = apply("chatml", NULL, 0, false);
    check_output("chatml, empty, no prompt", out, "");
    free(out);
}

/* ================================================================ detection */

static void test_detect(void) {
    static const struct {
        const char *tmpl;
        const char *family;
    } cases[] = {
        /* Llama 3.1's template (excerpt) */
        {"{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}", "llama3"},
        /* Gemma 2 (excerpt) */
        {"{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}", "gemma"},
        /* Mistral-7B-Instruct-v0.1: plain [INST] is llama2 */
        {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}{% endif %}{% endfor %}", "llama2"},
        /* Llama 2 chat's <<SYS>> template */
        {"{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% endif %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}", "llama2-sys-strip"},
        {"{{ '[INST] <<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' }}", "llama2-sys"},
        /* a Zephyr-format template with <|endoftext|> */
        {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '<|endoftext|>\\n' }}{% else %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|endoftext|>\\n' }}{% endif %}{% endfor %}", "zephyr"},
        /* HuggingFaceH4/zephyr-7b-beta's own template: llama.cpp reads <|user|> and
         * <|assistant|> without a literal </s> as GLM-Edge, and so does toy */
        {"{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}", "glmedge"},
        /* Falcon 3 (excerpt) */
        {"{{ '<|user|>\\n' + message['content'] + '\\n' }}{{ '<|assistant|>\\n' + message['content'] + '</s>' }}", "falcon3"},
        /* SmolVLM: <|im_start|> but not ChatML */
        {"<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}: {{ message['content'] }}<end_of_utterance>\n{% endfor %}", "smolvlm"},
        {"{{ '<｜User｜>' + message['content'] }}{{ '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}", "deepseek3"},
        {"{{ '[|system|]' + content + '[|endofturn|]\\n' }}{{ '[|assistant|]' }}", "exaone3"},
        {"{{ '[|system|]' + content + '[|endofturn|]\\n' }}{{ '[|tool|]' }}{{ '[|assistant|]' }}", "exaone4"},
        {"{{- 'User: ' + message['content']|trim + '\\n\\n' -}}", "rwkv-world"},
        {"{{- '<|header_start|>' + message['role'] + '<|header_end|>\\n\\n' }}", "llama4"},
        {"{{ '<|userprompt|>' + message['content'] + '<|endofuserprompt|>' }}", "dots1"},
        {"<|startoftext|>{{ content }}<|extra_4|>{{ content }}<|extra_0|>", "hunyuan-moe"},
        {"<|start|>assistant<|channel|>final<|message|>", "gpt-oss"},
        {"<｜hy_Assistant｜>{{ content }}<｜hy_place▁holder▁no▁3｜>", "hunyuan-dense"},
        {"{{ '<|im_assistant|>assistant<|im_middle|>' }}", "kimi-k2"},
        /* a name that starts with "mistral" goes down llama.cpp's [INST] branch */
        {"mistral", "llama2"},
        {"chatml", "chatml"},
        {"llama2-sys-bos", "llama2-sys-bos"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        const char *got = toy_chat_template_detect(cases[i].tmpl);
        CHECK_MSG(got && strcmp(got, cases[i].family) == 0, "case %zu: detected %s, expected %s",
                  i, got ? got : "(null)", cases[i].family);
    }
    /* unknown: llama.cpp's "INVALID TEMPLATE", a plain template, a near-miss name */
    CHECK(toy_chat_template_detect("INVALID TEMPLATE") == NULL);
    CHECK(toy_chat_template_detect("{% for m in messages %}{{ m.content }}{% endfor %}") == NULL);
    CHECK(toy_chat_template_detect("ChatML") == NULL);
    CHECK(toy_chat_template_detect("") == NULL);
    CHECK(toy_chat_template_detect(NULL) == NULL);

    /* every family name is its own answer and can be applied */
    static const char *const names[] = {
        "chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1",
        "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "phi4",
        "falcon3", "zephyr", "monarch", "gemma", "orion", "openchat", "vicuna", "vicuna-orca",
        "deepseek", "deepseek2", "deepseek3", "command-r", "llama3", "chatglm3", "chatglm4",
        "glmedge", "minicpm", "exaone3", "exaone4", "rwkv-world", "granite", "gigachat",
        "megrez", "yandex", "bailing", "llama4", "smolvlm", "dots1", "hunyuan-moe", "gpt-oss",
        "hunyuan-dense", "kimi-k2", "seed_oss"};
    for (size_t i = 0; i < N_OF(names); i++) {
        const char *got = toy_chat_template_detect(names[i]);
        CHECK_MSG(got && strcmp(got, names[i]) == 0, "name %s detected as %s", names[i],
                  got ? got : "(null)");
        char *out = apply(names[i], conv4, N_OF(conv4), true);
        CHECK_MSG(out && out[0], "%s gave an empty prompt", names[i]);
        free(out);
    }
}

/* ================================================================ errors and roles */

static void test_errors(void) {
    char *out = (char *)1;
    CHECK_EQ(toy_chat_apply("no-such-family", conv4, N_OF(conv4), true, &out), TOY_ERR_UNSUPPORTED);
    CHECK(out == NULL);
    CHECK_STR_CONTAINS(toy_last_error(), "\"no-such-family\"");
    CHECK_STR_CONTAINS(toy_last_error(), "chatml"); /* and what would have worked */

    /* a long unknown template is named by its beginning */
    char long_tmpl[300];
    memset(long_tmpl, 'x', sizeof long_tmpl - 1);
    long_tmpl[sizeof long_tmpl - 1] = 0;
    CHECK_EQ(toy_chat_apply(long_tmpl, conv4, 1, true, &out), TOY_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(toy_last_error(), "xxx...\"");

    const toy_chat_message no_role[] = {{"user", "hi"}, {NULL, "x"}};
    CHECK_EQ(toy_chat_apply("chatml", no_role, 2, true, &out), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "message 1 has no role");
    const toy_chat_message no_content[] = {{"user", NULL}};
    CHECK_EQ(toy_chat_apply("chatml", no_content, 1, true, &out), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "message 0 (user) has no content");
    CHECK_EQ(toy_chat_apply(NULL, conv4, 1, true, &out), TOY_ERR_INVALID);
    CHECK_EQ(toy_chat_apply("chatml", NULL, 2, true, &out), TOY_ERR_INVALID);
    CHECK_EQ(toy_chat_apply("chatml", conv4, 1, true, NULL), TOY_ERR_INVALID);
}

/* Roles other than system / user / assistant are not errors in llama.cpp: a format that
 * writes the role name writes it, the others fall into their last case or skip it. */
static void test_other_roles(void) {
    const toy_chat_message conv[] = {{"user", "Hi"}, {"tool", " 42 "}};
    static const struct {
        const char *family;
        const char *expected;
    } cases[] = {
        {"chatml", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>tool\n 42 <|im_end|>\n<|im_start|>assistant\n"},
        /* llama2 and Mistral: anything but system and user is the assistant */
        {"llama2", "[INST] Hi [/INST] 42 </s>"},
        {"mistral-v3", "[INST] Hi[/INST] 42</s>"},
        /* Gemma keeps the name (only "assistant" becomes "model") and trims */
        {"gemma", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>tool\n42<end_of_turn>\n<start_of_turn>model\n"},
        /* OpenChat capitalises it */
        {"openchat", "GPT4 Correct User: Hi<|end_of_turn|>GPT4 Correct Tool:  42 <|end_of_turn|>GPT4 Correct Assistant:"},
        /* Vicuna, command-r, EXAONE 3 leave it out; EXAONE 4 knows tools */
        {"vicuna", "USER: Hi\nASSISTANT:"},
        {"command-r", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
        {"exaone3", "[|user|]Hi\n[|assistant|]"},
        {"exaone4", "[|user|]Hi\n[|tool|]42[|endofturn|]\n[|assistant|]"},
        /* Bailing writes it in capitals */
        {"bailing", "<role>HUMAN</role>Hi<role>TOOL</role> 42 <role>ASSISTANT</role>"},
        /* Kimi K2 has a header for tools */
        {"kimi-k2", "<|im_user|>user<|im_middle|>Hi<|im_end|><|im_system|>tool<|im_middle|> 42 <|im_end|><|im_assistant|>assistant<|im_middle|>"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        char *out = apply(cases[i].family, conv, N_OF(conv), true);
        check_output(cases[i].family, out, cases[i].expected);
        free(out);
    }
    /* Gemma: a system message opens the next non-model turn, whatever its role */
    const toy_chat_message sys_first[] = {{"system", " Be brief. "}, {"assistant", "Ok"},
                                          {"user", "Hi"}};
    char *out = apply("gemma", sys_first, N_OF(sys_first), false);
    check_output("gemma system before model", out,
                 "<start_of_turn>model\nOk<end_of_turn>\n<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n");
    free(out);
}

int main(void) {
    test_llama_cpp_cases();
    test_granite_tool_call();
    test_other_families();
    test_add_assistant();
    test_detect();
    test_errors();
    test_other_roles();
    return test_finish("test_chat_template");
}
