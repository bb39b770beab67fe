// Tool calling in toy serve through the official openai npm package: a conversation with
// a tool call and its result, and forced calls (tool_choice required and named) whole and
// streamed, on a random-weight model; the calls' arguments parse and name the function.
//
// usage: node serve_tools.mjs PORT MODEL_ID
import OpenAI from "openai";
import { check, finish } from "./check.mjs";

const [port, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });

const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "The weather of a city",
    parameters: { type: "object", properties: { city: { type: "string", enum: ["Paris", "Rome"] } }, required: ["city"],
      additionalProperties: false },
  },
}];
const messages = [
  { role: "user", content: "Weather in Rome?" },
  { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Rome\"}" } }] },
  { role: "tool", tool_call_id: "call_1", content: "rain" },
];

// the conversation goes through, its answer a message from the assistant
const answer = await client.chat.completions.create({ model, messages, tools, max_tokens: 8, seed: 1 });
check(answer.choices[0].message.role === "assistant" && ["stop", "length", "tool_calls"].includes(answer.choices[0].finish_reason),
  `conversation with a tool result: ${JSON.stringify(answer.choices[0])}`);

for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
  let r;
  try {
    r = await client.chat.completions.create({ model, messages: messages.slice(0, 1), tools, tool_choice, temperature: 1,
      seed: 7, max_tokens: 400 });
  } catch (e) {
    if (e.status === 400 && /needs grammars/.test(e.message)) { // a build without grammars on the sampler
      console.log(`SKIP: tool_choice ${JSON.stringify(tool_choice)}: ${e.message}`);
      continue;
    }
    throw e;
  }
  const c = r.choices[0];
  const call = c.message.tool_calls?.[0];
  check(c.finish_reason === "tool_calls" && c.message.content === null && call?.type === "function" &&
    call.function.name === "get_weather" && ["Paris", "Rome"].includes(JSON.parse(call.function.arguments).city),
    `tool_choice ${JSON.stringify(tool_choice)}: ${JSON.stringify(c)}`);
  // streamed: the same calls in delta.tool_calls, by index
  const streamed = [];
  let finish = null;
  for await (const chunk of await client.chat.completions.create({ model, messages: messages.slice(0, 1), tools, tool_choice,
    temperature: 1, seed: 7, max_tokens: 400, stream: true })) {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      const s = (streamed[tc.index] ??= { id: null, name: "", args: "" });
      s.id = tc.id ?? s.id;
      s.name += tc.function?.name ?? "";
      s.args += tc.function?.arguments ?? "";
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  const whole = (c.message.tool_calls ?? []).map((t) => [t.function.name, t.function.arguments]);
  check(finish === "tool_calls" && streamed.every((s) => s.id?.startsWith("call_")) &&
    JSON.stringify(streamed.map((s) => [s.name, s.args])) === JSON.stringify(whole),
    `streamed tool_choice ${JSON.stringify(tool_choice)}: ${JSON.stringify(streamed)} ${finish}, whole ${JSON.stringify(whole)}`);
}

// a bad tool_choice is an APIError naming it
try {
  await client.chat.completions.create({ model, messages, tools, tool_choice: { type: "function", function: { name: "nope" } } });
  check(false, "an undeclared function in tool_choice was accepted");
} catch (e) {
  check(e.status === 400 && /nope/.test(e.message), `undeclared function: ${e.status} ${e.message}`);
}
finish("serve_tools");
