// A thinking model's tool calls through the official openai npm package: a model whose own
// template is Qwen 3's (Hermes calls in <tool_call>, reasoning in <think>), its replies
// forced with a grammar (the weights are random). The client reads reasoning_content and
// tool_calls, whole and streamed, and the chat.completions.parse() loop works: the message
// parse() hands back (parsed, parsed_arguments, refusal, annotations) goes back with the
// tool's result and the conversation goes on.
//
// usage: node serve_templates.mjs PORT MODEL_ID
import OpenAI from "openai";
import { check, finish } from "./check.mjs";

const [port, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });

const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "The weather of a city", strict: true,
    parameters: { type: "object", properties: { city: { type: "string", description: "The city" } }, required: ["city"],
      additionalProperties: false },
  },
}];
// a GBNF grammar whose one sentence is text
const exactly = (text) => `root ::= ${JSON.stringify(text)}`;
const thinkThenCall = "<think>\nThe user wants the weather.\n</think>\n\n" +
  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const messages = [{ role: "user", content: "What is the weather in Paris?" }];

// whole: reasoning apart, the call parsed
const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 200, grammar: exactly(thinkThenCall) });
const m = r.choices[0].message;
check(r.choices[0].finish_reason === "tool_calls" && m.content === null &&
  m.reasoning_content === "The user wants the weather." && m.tool_calls?.length === 1 &&
  m.tool_calls[0].function.name === "get_weather" && JSON.parse(m.tool_calls[0].function.arguments).city === "Paris",
  `whole: ${JSON.stringify(r.choices[0])}`);

// streamed: delta.reasoning_content, then delta.tool_calls
let reasoning = "", content = "", name = "", args = "", finishReason = null;
for await (const chunk of await client.chat.completions.create({ model, messages, tools, max_tokens: 200,
  grammar: exactly(thinkThenCall), stream: true })) {
  const d = chunk.choices[0]?.delta ?? {};
  reasoning += d.reasoning_content ?? "";
  content += d.content ?? "";
  for (const tc of d.tool_calls ?? []) {
    name += tc.function?.name ?? "";
    args += tc.function?.arguments ?? "";
  }
  finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
}
check(reasoning === "The user wants the weather." && content === "" && name === "get_weather" &&
  JSON.parse(args || "{}").city === "Paris" && finishReason === "tool_calls",
  `streamed: reasoning ${JSON.stringify(reasoning)} content ${JSON.stringify(content)} ${name} ${args} ${finishReason}`);

// the parse() loop: the call's arguments parsed by the client, its message sent back as it is
const first = await client.chat.completions.parse({ model, messages, tools, max_tokens: 200, grammar: exactly(thinkThenCall) });
const call = first.choices[0].message.tool_calls?.[0];
check(call?.function.parsed_arguments?.city === "Paris", `parse(): ${JSON.stringify(first.choices[0].message)}`);
if (call) {
  const history = [...messages, first.choices[0].message,
    { role: "tool", tool_call_id: call.id, content: JSON.stringify({ sky: "clear", celsius: 21 }) }];
  const second = await client.chat.completions.parse({ model, messages: history, tools, max_tokens: 200,
    grammar: exactly("<think>\nThe tool answered.\n</think>\n\nIt is clear, 21 degrees.") });
  const answer = second.choices[0].message;
  check(second.choices[0].finish_reason === "stop" && answer.content === "It is clear, 21 degrees." &&
    answer.reasoning_content === "The tool answered." && !answer.tool_calls?.length,
    `parse() with the message handed back: ${JSON.stringify(second.choices[0])}`);
}
finish("serve_templates");
