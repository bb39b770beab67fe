// Structured output through the official openai npm package, on a random-weight model at
// temperature 1: response_format json_schema (whole and streamed: the same text, valid
// for the schema) and json_object, logit_bias, and an unsupported type as an APIError.
//
// usage: node serve_structured.mjs PORT MODEL_ID
import OpenAI from "openai";
import { check, finish } from "./check.mjs";

const [port, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });

const schema = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Rome"] }, days: { type: "integer", minimum: 1, maximum: 7 },
    note: { type: "string", maxLength: 8 } },
  required: ["city", "days", "note"], additionalProperties: false,
};
const valid = (o) => ["Paris", "Rome"].includes(o.city) && Number.isInteger(o.days) && o.days >= 1 && o.days <= 7 &&
  typeof o.note === "string" && [...o.note].length <= 8 && Object.keys(o).length === 3;
const messages = [{ role: "user", content: "Plan a trip." }];
const response_format = { type: "json_schema", json_schema: { name: "trip", schema, strict: true } };

for (const seed of [1, 2, 3]) {
  const r = await client.chat.completions.create({ model, messages, response_format, temperature: 1, seed, max_tokens: 300 });
  const c = r.choices[0];
  let parsed = null;
  try { parsed = JSON.parse(c.message.content); } catch { /* checked below */ }
  check(c.finish_reason === "stop" && parsed && valid(parsed), `json_schema seed ${seed}: ${JSON.stringify(c)}`);
  let streamed = "";
  for await (const chunk of await client.chat.completions.create({ model, messages, response_format, temperature: 1, seed,
    max_tokens: 300, stream: true })) streamed += chunk.choices[0]?.delta?.content ?? "";
  check(streamed === c.message.content, `json_schema seed ${seed} streamed: ${streamed} != ${c.message.content}`);
}

const obj = await client.chat.completions.create({ model, messages, response_format: { type: "json_object" }, temperature: 1,
  seed: 4, max_tokens: 200 });
const text = obj.choices[0].message.content;
check(text.trimStart().startsWith("{") && (obj.choices[0].finish_reason !== "stop" || typeof JSON.parse(text) === "object"),
  `json_object: ${JSON.stringify(obj.choices[0])}`);

// logit_bias: +100 on one token makes it the greedy answer; -100 bans it
const greedy = async (logit_bias) =>
  (await client.completions.create({ model, prompt: "The", max_tokens: 1, temperature: 0, logit_bias })).choices[0].text;
const promoted = await greedy({ 300: 100 }), other = await greedy({ 301: 100 });
check(promoted !== other && await greedy({ 300: -100, 301: 100 }) === other && await greedy({ 300: 100, 301: 50 }) === promoted,
  `logit_bias: ${promoted} / ${other}`);

try {
  await client.chat.completions.create({ model, messages, response_format: { type: "xml" } });
  check(false, "response_format xml accepted");
} catch (e) {
  check(e.status === 400 && /xml/.test(e.message), `response_format xml: ${e}`);
}

finish("serve_structured");
