// toy serve driven by the official openai npm package: chat and text completions,
// streaming and not, stop strings, n > 1, logprobs, usage, embeddings (float and base64),
// errors; greedy answers equal toy run's output (given by the caller).
//
// usage: node serve_openai.mjs PORT MODEL_ID PROMPT EXPECTED_GREEDY_24
import OpenAI from "openai";
import { check, finish } from "./check.mjs";

const [port, model, prompt, expected] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });

// text completions: the same tokens as toy run
const c = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0 });
check(c.choices[0].text === expected, `greedy completion ${JSON.stringify(c.choices[0].text)} != toy run's ${JSON.stringify(expected)}`);
check(c.usage.completion_tokens === 24 && c.choices[0].finish_reason === "length", "completion usage and finish reason");
let streamed = "";
for await (const chunk of await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stream: true }))
  streamed += chunk.choices[0]?.text ?? "";
check(streamed === expected, "streamed greedy completion equals toy run's");

// chat: non-streaming and streaming give the same choices for a seed
const messages = [{ role: "system", content: "You answer from the scriptures." }, { role: "user", content: "Who is the LORD?" }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, seed: 11, n: 2 });
check(chat.choices.length === 2 && chat.choices[0].message.role === "assistant", "chat: two choices from the assistant");
const parts = ["", ""];
let usage = null;
const stream = await client.chat.completions.create({ model, messages, max_tokens: 16, seed: 11, n: 2, stream: true,
  stream_options: { include_usage: true } });
for await (const chunk of stream) {
  for (const ch of chunk.choices) parts[ch.index] += ch.delta?.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}
check(parts[0] === chat.choices[0].message.content && parts[1] === chat.choices[1].message.content,
  "streamed chat choices equal the non-streamed ones");
check(usage && usage.prompt_tokens === chat.usage.prompt_tokens && usage.completion_tokens === chat.usage.completion_tokens,
  `streamed usage ${JSON.stringify(usage)} equals ${JSON.stringify(chat.usage)}`);

// stop strings
const stop = expected.slice(6, 10);
const s = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stop: [stop] });
check(s.choices[0].text === expected.slice(0, expected.indexOf(stop)) && s.choices[0].finish_reason === "stop",
  `stop ${JSON.stringify(stop)}: ${JSON.stringify(s.choices[0])}`);

// log-probabilities
const lp = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
const entries = lp.choices[0].logprobs?.content ?? [];
check(entries.length === 5 && entries.every(e => e.top_logprobs.length === 2 && e.logprob <= 0), "chat logprobs");

// embeddings: floats of norm 1; the client's default (it asks for base64 and decodes it)
// and an explicit base64 (a string of little-endian float32 bytes) give the same numbers
const texts = [prompt, "In the beginning"];
const ef = await client.embeddings.create({ model, input: texts, encoding_format: "float" });
const norm = v => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));
check(ef.object === "list" && ef.data.length === 2 && ef.data.every((d, i) => d.index === i && d.object === "embedding"),
  "embeddings: one per input, in order");
check(ef.data.every(d => d.embedding.length === ef.data[0].embedding.length && d.embedding.length > 0 &&
  Math.abs(norm(d.embedding) - 1) < 1e-5), "embeddings: vectors of one length and norm 1");
check(ef.usage.prompt_tokens > texts.length && ef.usage.total_tokens === ef.usage.prompt_tokens,
  `embeddings usage ${JSON.stringify(ef.usage)}`);
const same = (a, b) => a.length === b.length && a.every((x, k) => Math.fround(x) === Math.fround(b[k]));
const ed = await client.embeddings.create({ model, input: texts });
check(ed.data.every((d, i) => same(d.embedding, ef.data[i].embedding)), "embeddings: the client's base64 decodes to the floats");
const eb = await client.embeddings.create({ model, input: texts[1], encoding_format: "base64" });
const bytes = Buffer.from(eb.data[0].embedding, "base64");
const floats = Array.from({ length: bytes.length / 4 }, (_, k) => bytes.readFloatLE(4 * k));
check(typeof eb.data[0].embedding === "string" && same(floats, ef.data[1].embedding), "embeddings: explicit base64");
try {
  await client.embeddings.create({ model, input: texts, dimensions: 3 });
  check(false, "embeddings: dimensions 3 was accepted");
} catch (e) {
  check(e.status === 400 && e.param === "dimensions", `embeddings dimensions 3: ${e.status} ${e.param}`);
}

// the models list, and errors as APIError with the server's status and message
const models = await client.models.list();
check(models.data.some(m => m.id === model), "models.list names the model");
try {
  await client.chat.completions.create({ model: "gpt-4o", messages });
  check(false, "an unknown model was accepted");
} catch (e) {
  check(e.status === 400 && /does not exist/.test(e.message), `unknown model: ${e.status} ${e.message}`);
}
try {
  await client.completions.create({ model, prompt, temperature: 7 });
  check(false, "temperature 7 was accepted");
} catch (e) {
  check(e.status === 400 && e.param === "temperature", `temperature 7: ${e.status} ${e.param}`);
}

finish("serve_openai");
