"""The Python bindings against the command line: the same token ids, the same logits bit
for bit, the same generated text; errors as ToyError with toy's message; training.

Run by tests/cli/cli_python.sh with TOY (the toy binary) and TOY_MODEL (a model) set."""

import ctypes
import os
import struct
import subprocess
import tempfile
import unittest

import toy

TOY = os.environ["TOY"]
MODEL = os.environ["TOY_MODEL_PATH"]
PROMPT = "And it came to pass"


def read(path):
    with open(path, "rb") as f:
        return f.read()


try:
    import numpy  # noqa: F401
    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False


def gguf_f32(path, name):
    """An F32 tensor of a GGUF file, flat (enough of the format for toy grad's files)."""
    import numpy as np
    data = read(path)
    pos = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16

    def string(pos):
        n, = struct.unpack_from("<Q", data, pos)
        return data[pos + 8:pos + 8 + n].decode(), pos + 8 + n
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    for _ in range(n_kv):  # toy grad writes scalars only
        _, pos = string(pos)
        t, = struct.unpack_from("<I", data, pos)
        pos += 4 + sizes[t]
    infos = {}
    for _ in range(n_tensors):
        tname, pos = string(pos)
        n_dims, = struct.unpack_from("<I", data, pos)
        ne = struct.unpack_from("<%dQ" % n_dims, data, pos + 4)
        pos += 4 + 8 * n_dims
        _, off = struct.unpack_from("<IQ", data, pos)
        pos += 12
        infos[tname] = (ne, off)
    start = (pos + 31) // 32 * 32
    ne, off = infos[name]
    return np.frombuffer(data, np.float32, int(np.prod(ne)), start + off)


def run(*args):
    return subprocess.run([TOY, *args], check=True, capture_output=True).stdout


class TestBindings(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = toy.Model(MODEL, n_threads=2)

    @classmethod
    def tearDownClass(cls):
        cls.m.close()

    def test_version(self):
        out = run("--version").decode()
        self.assertTrue(out.startswith("toy %d.%d.%d " % toy.version()), out)
        self.assertIn(toy.kernel_isa(), ("amx", "avx512", "avxvnni", "avx2", "scalar"))

    def test_structs_match_the_header(self):
        # the library's own defaults, read through these structs: a field out of place
        # would read another field's bytes
        cp = toy._init(toy._lib.ContextParams, toy._c.toy_context_params_init)
        self.assertEqual((cp.size, cp.n_batch, cp.n_seq_max, cp.n_threads), (ctypes.sizeof(cp), 512, 1, 1))
        sp = toy._init(toy._lib.SamplerParams, toy._c.toy_sampler_params_init)
        self.assertEqual((sp.top_k, sp.repeat_last_n, sp.seed), (40, 64, 0))
        self.assertAlmostEqual(sp.temperature, 0.8, places=6)
        self.assertAlmostEqual(sp.min_p, 0.05, places=6)
        tp = toy._init(toy._lib.TrainParams, toy._c.toy_train_params_init)
        self.assertEqual((tp.batch, tp.seq, tp.grad_accum, tp.epochs, tp.warmup, tp.seed, tp.out_ftype,
                          tp.lora_targets), (8, 256, 1, 1, 100, 42, -1, 0x7F))
        self.assertAlmostEqual(tp.beta2, 0.95, places=6)
        self.assertAlmostEqual(tp.clip, 1.0, places=6)
        gp = toy._init(toy._lib.GenerateParams, toy._c.toy_generate_params_init)
        self.assertEqual(gp.max_tokens, -1)
        ip = toy._init(toy._lib.InitParams, toy._c.toy_init_params_init)
        self.assertEqual(ip.seed, 42)
        # and the sizes, where the C compiler says them (tests/cli/cli_python.sh)
        sizes = os.environ.get("TOY_STRUCT_SIZES")
        if sizes:
            for item in sizes.split():
                name, size = item.split("=")
                self.assertEqual(ctypes.sizeof(getattr(toy._lib, name)), int(size), name)

    def test_tokenize_as_the_command(self):
        for text in (PROMPT, "In the beginning God created the heaven and the earth.", " spaces  and\ttabs\n",
                     "Ünïcödé — ✓"):
            want = [int(x) for x in run("tokenize", "-m", MODEL, text).split()]
            self.assertEqual(self.m.tokenize(text), want, text)
            want = [int(x) for x in run("tokenize", "-m", MODEL, "--no-special", text).split()]
            self.assertEqual(self.m.tokenize(text, add_special=False), want, text)
            self.assertEqual(self.m.detokenize(self.m.tokenize(text, add_special=False)), text)

    def test_logits_as_the_command(self):
        ids = self.m.tokenize(PROMPT + " unto the LORD")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "logits.bin")
            run("eval", "-m", MODEL, "--tokens", ",".join(map(str, ids)), "--dump-logits", path, "-t", "2")
            want = read(path)
        got = self.m.logits(ids)
        try:
            import numpy
            self.assertIsInstance(got, numpy.ndarray)
            self.assertEqual(got.shape, (len(ids), self.m.n_vocab))
            self.assertEqual(got.dtype, numpy.float32)
            data = got.tobytes()
        except ImportError:
            data = b"".join(struct.pack(f"<{len(row)}f", *row) for row in got)
        self.assertEqual(data, want, "the logits differ from toy eval's")
        # and with the file read into memory instead of mapped
        with toy.Model(MODEL, n_threads=1, use_mmap=False) as m2:
            got2 = m2.logits(ids)
            data2 = got2.tobytes() if hasattr(got2, "tobytes") else data
            self.assertEqual(data2, want)

    def test_generate_as_toy_run(self):
        for args, kw in ((["--temp", "0"], dict(temperature=0)),
                         (["--seed", "7"], dict(seed=7)),
                         (["--seed", "3", "--top-k", "5", "--repeat-penalty", "1.3"],
                          dict(seed=3, top_k=5, repeat_penalty=1.3))):
            want = run("run", "-m", MODEL, "-p", PROMPT, "-n", "40", *args).decode()
            pieces = list(self.m.generate(PROMPT, max_tokens=40, **kw))
            self.assertGreater(len(pieces), 5)  # streamed, piece by piece
            self.assertEqual(PROMPT + "".join(pieces) + "\n", want, args)
            self.assertEqual(self.m.generate(PROMPT, max_tokens=40, stream=False, **kw), "".join(pieces))
            self.assertEqual(self.m.last_finish, "length")

    def test_stop_and_early_exit(self):
        want = run("run", "-m", MODEL, "-p", PROMPT, "-n", "60", "--temp", "0", "--stop", "the").decode()
        got = self.m.generate(PROMPT, max_tokens=60, temperature=0, stop=["the"], stream=False)
        self.assertEqual(PROMPT + got + "\n", want)
        self.assertEqual(self.m.last_finish, "stop")
        # leaving the iterator early stops the generation; the model is usable after
        it = self.m.generate(PROMPT, max_tokens=1000, temperature=0)
        first = next(it)
        it.close()
        self.assertTrue(first)
        self.assertEqual(self.m.generate(PROMPT, max_tokens=40, temperature=0, stream=False) + "\n",
                         run("run", "-m", MODEL, "-p", PROMPT, "-n", "40", "--temp", "0").decode()[len(PROMPT):])

    def test_embeddings_as_toy_serve(self):
        """The same vectors as toy serve's /v1/embeddings, pooling by pooling."""
        import json
        import re
        import urllib.request
        texts = [PROMPT, "In the beginning God created the heaven and the earth."]
        self.assertIsNone(self.m.pooling)  # the file has no pooling_type
        rows = self.m.embeddings(texts[1], pooling="none")
        self.assertEqual(len(rows), len(self.m.tokenize(texts[1], parse_special=True)))
        self.assertEqual(len(rows[0]), self.m.n_embd)
        for pooling in ("mean", "cls", "last"):
            srv = subprocess.Popen([TOY, "serve", "-m", MODEL, "--port", "0", "-t", "1", "--pooling", pooling],
                                   stderr=subprocess.PIPE, text=True)
            try:
                port = next(m.group(1) for m in map(re.compile(r"http://127\.0\.0\.1:(\d+)/").search, srv.stderr)
                            if m)
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", json.dumps({"input": texts}).encode(),
                                             {"Content-Type": "application/json"})
                served = [d["embedding"] for d in json.load(urllib.request.urlopen(req, timeout=300))["data"]]
            finally:
                srv.terminate()
                srv.wait()
            for text, want in zip(texts, served):
                got = [float(x) for x in self.m.embeddings(text, pooling=pooling)]
                self.assertAlmostEqual(sum(x * x for x in got), 1.0, places=5)
                # pooled in double both ways; the last digit of a float may round apart
                self.assertLess(max(abs(a - b) for a, b in zip(got, want)), 1e-6, (pooling, text))
        first = [float(x) for x in rows[0]]
        norm = sum(x * x for x in first) ** 0.5
        cls = [float(x) for x in self.m.embeddings(texts[1], pooling="cls")]
        self.assertLess(max(abs(a / norm - b) for a, b in zip(first, cls)), 1e-6)
        with self.assertRaises(toy.ToyError) as e:
            self.m.embeddings(PROMPT, pooling="rank")
        self.assertIn("pooling 'rank'", str(e.exception))

    def test_chat(self):
        reply = self.m.chat([{"role": "user", "content": "Who made the heaven?"}], max_tokens=16, temperature=0)
        self.assertIsInstance(reply, str)
        self.assertIn(self.m.last_finish, ("eog", "length"))

    def test_chat_template(self):
        msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
        want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        self.assertEqual(self.m.apply_template(msgs), want)
        t = self.m.chat_template()
        self.assertEqual(t.render(msgs, add_generation_prompt=False), want[:-len("<|im_start|>assistant\n")])
        self.assertFalse(t.reads("tools"))
        # a template of one's own: bos_token, tools, chat_template_kwargs, arguments as objects
        t = toy.ChatTemplate("{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}"
                             "{% for c in m.tool_calls or [] %}[{{ c.function.arguments.city }}]{% endfor %};"
                             "{% endfor %}{{ tools|length if tools else 'no tools' }}|{{ flag }}", bos_token="<s>")
        self.assertTrue(t.reads("tools") and t.reads("flag") and not t.reads("enable_thinking"))
        calls = [{"type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Paris\"}"}}]
        got = t.render([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": calls}],
                       tools=[{"type": "function", "function": {"name": "w"}}], flag=True)
        self.assertEqual(got, "<s>user:x;assistant:[Paris];1|True")
        with self.assertRaises(toy.ToyError) as e:
            toy.ChatTemplate("ok\n{% for m in messages %}")
        self.assertIn("2:", str(e.exception))
        with self.assertRaises(toy.ToyError) as e:
            toy.ChatTemplate("{{ raise_exception('roles must alternate') }}").render([])
        self.assertIn("the chat template refused the conversation: roles must alternate", str(e.exception))

    def test_chat_tools_and_reasoning(self):
        """Model.chat with tools. The bundled model's template (ChatML) writes no tools, so
        they are shown in toy's generic form, and forced calls are written in it, their
        arguments matching the schema. ChatTemplate.parse reads each syntax's replies."""
        import json
        weather = {"type": "function", "function": {
            "name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                 "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                "required": ["city", "days"]}}}
        clock = {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {}, "additionalProperties": False}}}
        msgs = [{"role": "user", "content": "Weather in Paris?"}]
        m = toy.Model(MODEL, n_threads=2, n_ctx=1024)  # the tools take 500 of the KJV tokenizer's tokens
        self.addCleanup(m.close)
        t = m.chat_template()
        self.assertFalse(t.reads("tools"))
        self.assertIn("You can call functions (tools).", t.prompt(msgs, tools=[weather]))
        self.assertEqual(t.prompt(msgs), m.apply_template(msgs))
        for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
            reply = m.chat(msgs, tools=[weather, clock], tool_choice=choice, parallel_tool_calls=False,
                                max_tokens=300, temperature=1, seed=3)
            self.assertEqual(reply, "")
            self.assertEqual(len(reply.tool_calls), 1, reply.message)
            call = reply.tool_calls[0]["function"]
            if isinstance(choice, dict):
                self.assertEqual(call["name"], "get_weather")
            if call["name"] == "get_weather":
                args = json.loads(call["arguments"])
                self.assertEqual(sorted(args), ["city", "days"])
                self.assertTrue(isinstance(args["city"], str) and len(args["city"]) <= 20)
                self.assertTrue(isinstance(args["days"], int) and 1 <= args["days"] <= 7)
            self.assertEqual(reply.message["role"], "assistant")
            self.assertIsNone(reply.message["content"])
            self.assertEqual(reply.finish_reason, "eog")
            # the message goes back into the conversation as it is, in the same form
            self.assertIn('{"tool_calls": [{"name": "' + call["name"],
                          t.prompt(msgs + [reply.message], tools=[weather, clock]))
        streamed = "".join(m.chat(msgs, tools=[weather], tool_choice="required", parallel_tool_calls=False,
                                  max_tokens=400, seed=3, stream=True))
        self.assertTrue(streamed.startswith('{"tool_calls": [{"name": "get_weather"'), streamed)
        self.assertEqual(m.last_message["tool_calls"][0]["function"]["name"], "get_weather")
        with self.assertRaises(toy.ToyError) as e:
            m.chat(msgs, tools=[weather], tool_choice={"type": "function", "function": {"name": "nope"}})
        self.assertIn("no function named 'nope'", str(e.exception))
        t.close()
        # Hermes' syntax (the built-in chatml family), and <think> reasoning
        t = toy.ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}<think></think>")
        got = t.parse("", "<think>Paris is in France.</think>Sunny.")
        self.assertEqual(got, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Paris is in France."})
        self.assertEqual(t.parse("", "<think>a</think>b", reasoning=False)["content"], "<think>a</think>b")
        self.assertEqual(t.parse("<think>\n", "a</think>b"), {"role": "assistant", "content": "b",
                                                              "reasoning_content": "a"})
        # while it streams: a marker's beginning is held back
        self.assertEqual(t.parse("", "<think>Paris is</thi", partial=True),
                         {"role": "assistant", "content": None, "reasoning_content": "Paris is"})
        t = toy.ChatTemplate.builtin("chatml")
        call = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
        got = t.parse("", call, tools=[clock])
        self.assertEqual(got["tool_calls"][0]["function"], {"name": "get_time", "arguments": "{}"})
        self.assertNotIn("tool_calls", t.parse("", call, tools=[weather]))  # not a tool it was given
        self.assertIn("<tool_call>", t.tool_grammar("", [weather]))
        self.assertIn("<tools>", t.prompt(msgs, tools=[weather]))

    def test_errors(self):
        with self.assertRaises(toy.ToyError) as e:
            toy.Model("/nonexistent/model.gguf")
        self.assertIn("/nonexistent/model.gguf: cannot open", str(e.exception))
        self.assertEqual(e.exception.status, "TOY_ERR_IO")
        with self.assertRaises(toy.ToyError) as e:
            list(self.m.generate(PROMPT, repeat_penalty=-1))
        self.assertIn("repeat_penalty", str(e.exception))
        with self.assertRaises(toy.ToyError) as e:
            self.m.generate("x" * 3000, max_tokens=1, stream=False)
        self.assertIn("context holds", str(e.exception))


FIXTURES = os.environ.get("TOY_FIXTURES") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                          "..", "shared", "fixtures")
NUMBERS = 'root ::= "[" num ("," " "? num){0,7} "]"\nnum ::= "-"? [1-9] [0-9]{0,3} | "0"\n'
NUMBERS_RE = r"\[(-?[1-9][0-9]{0,3}|0)(, ?(-?[1-9][0-9]{0,3}|0)){0,7}\]"
PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 150},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}},
          "required": ["name", "age", "tags"]}


class TestConstraints(unittest.TestCase):
    """grammar=, json_schema= and logit_bias= on a random-weight fixture model at
    temperature 1: whatever the noise, the text is in the language."""

    @classmethod
    def setUpClass(cls):
        path = os.path.join(FIXTURES, "models", "qwen2-f16.gguf")
        if not os.path.exists(path):
            raise unittest.SkipTest(f"fixtures not found at {FIXTURES} (set TOY_FIXTURES)")
        cls.m = toy.Model(path, n_threads=2)

    @classmethod
    def tearDownClass(cls):
        cls.m.close()

    def test_grammar(self):
        import re
        for seed in range(4):
            pieces = list(self.m.generate("Numbers:", max_tokens=400, temperature=1, seed=seed, grammar=NUMBERS))
            self.assertRegex("".join(pieces), "^" + NUMBERS_RE + "$")
            self.assertEqual(self.m.last_finish, "eog")
        text = self.m.chat([{"role": "user", "content": "a list"}], max_tokens=400, temperature=1, grammar=NUMBERS)
        self.assertTrue(re.fullmatch(NUMBERS_RE, text), text)

    def test_json_schema(self):
        import json
        try:
            import jsonschema
        except ImportError:
            jsonschema = None
        for seed in range(4):
            # a dict, or its JSON text
            schema = PERSON if seed % 2 else json.dumps(PERSON)
            text = self.m.generate("JSON:", max_tokens=400, temperature=1, seed=seed, json_schema=schema,
                                   stream=False)
            value = json.loads(text)
            if jsonschema:
                jsonschema.validate(value, PERSON)
            else:
                self.assertEqual(set(value) - {"name", "age", "tags"}, set(), text)

    def test_logit_bias(self):
        ids = self.m.tokenize("Once upon a time")  # its top two tokens are whole characters
        row = list(self.m.logits(ids)[-1])
        order = sorted(range(len(row)), key=lambda i: -row[i])
        first = [self.m.generate(ids, max_tokens=1, temperature=0, stream=False, logit_bias=bias)
                 for bias in (None, {order[0]: -100}, {order[0]: float("-inf")}, {order[1]: 1000})]
        self.assertEqual(first[0], self.m.detokenize([order[0]]))
        self.assertEqual(first[1:], [self.m.detokenize([order[1]])] * 3)

    def test_errors(self):
        with self.assertRaises(toy.ToyError) as e:
            self.m.generate("x", grammar='root ::= "a" | (', stream=False)
        self.assertIn("grammar: line 1, column 16: '(' is not closed", str(e.exception))
        with self.assertRaises(toy.ToyError) as e:
            self.m.generate("x", json_schema='{"type": "object",}', stream=False)
        self.assertIn("json_schema: JSON schema: invalid JSON at line 1, column 19", str(e.exception))
        with self.assertRaises(toy.ToyError) as e:
            self.m.generate("x", json_schema={"type": "array", "uniqueItems": True}, json_schema_strict=True,
                            stream=False)
        self.assertIn('#/uniqueItems: unsupported keyword "uniqueItems"', str(e.exception))
        self.assertEqual(e.exception.status, "TOY_ERR_UNSUPPORTED")
        with self.assertRaises(toy.ToyError) as e:
            self.m.generate("x", grammar=NUMBERS, json_schema=PERSON)
        self.assertIn("cannot be combined", str(e.exception))
        with self.assertRaises(toy.ToyError) as e:
            self.m.generate("x", logit_bias={10 ** 6: 1.0}, stream=False)
        self.assertIn("logit_bias[0]: token 1000000 is out of range", str(e.exception))
        # complete after "a", the end of text banned: nothing is left
        eog = [t for t in range(self.m.n_vocab) if self.m.detokenize([t], special=True) in ("<|endoftext|>", "<|im_end|>")]
        self.assertTrue(eog)
        with self.assertRaises(toy.ToyError) as e:
            self.m.generate("x", grammar='root ::= "a"', logit_bias={t: -100 for t in eog}, stream=False)
        self.assertIn("generated token 2: every token the grammar allows here is banned", str(e.exception))


class TestTrain(unittest.TestCase):
    @unittest.skipUnless(HAVE_NUMPY, "numpy is not installed")
    def test_model_in_memory(self):
        """Model.create makes toy init's model with no file; a trainer's steps lower the
        loss, its gradients are toy grad's, its taps and tensors are numpy views; save
        writes the trained model, which gives the trainer's loss."""
        import numpy as np
        shape = dict(n_embd=64, n_layer=2, n_head=4, n_ff=128, ctx=64)
        with tempfile.TemporaryDirectory() as d:
            init, saved, grads = (os.path.join(d, n) for n in ("init.gguf", "saved.gguf", "grads.gguf"))
            m = toy.Model.create(vocab_from=MODEL, seed=7, n_threads=2, **shape)
            m.save(saved)
            run("init", "--arch", "llama", "--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-ff", "128",
                "--ctx", "64", "--vocab-from", MODEL, "--seed", "7", "--out", init)
            self.assertEqual(read(init), read(saved), "Model.create is not toy init's model")
            ids = m.tokenize("In the beginning God created the heaven and the earth. And the earth was without "
                             "form, and void; and darkness was upon the face of the deep.")
            batch = np.array([ids[:17], ids[5:22]], dtype=np.int32)
            t = m.trainer(batch=2, seq=16, lr=3e-3, taps="L*.out")
            m.train_step(batch[:1], update=False)
            run("grad", "-m", init, "--tokens", ",".join(map(str, batch[0])), "--out", grads)
            g = m._trainer.grad("blk.1.ffn_down.weight")
            self.assertEqual(g.shape, (64, 128))
            ref = gguf_f32(grads, "blk.1.ffn_down.weight").reshape(g.shape)
            self.assertTrue(np.array_equal(g, ref), "the step's gradient is not toy grad's")
            losses = [m.train_step(batch) for _ in range(20)]
            self.assertEqual(t.steps, 20)
            self.assertLess(losses[-1], 0.7 * losses[0])
            self.assertEqual(t.tap("L1.out").shape, (32, 64))
            embd = t.param("token_embd.weight")
            self.assertEqual(embd.shape, (m.n_vocab, 64))
            with self.assertRaises(toy.ToyError) as e:
                t.tap("L0.attn_norm")
            self.assertIn("tap L0.attn_norm is not kept", str(e.exception))
            m.save(saved)
            after = m.train_step(batch, update=False)
            m.close()
            with toy.Model(saved, n_threads=2) as m2:
                self.assertEqual(m2.train_step(batch, update=False), after)

    def test_train_as_the_command(self):
        """toy.train and toy train with the same options write the same model."""
        with tempfile.TemporaryDirectory() as d:
            text = os.path.join(d, "text.txt")
            with open(text, "w") as f:
                f.write("In the beginning God created the heaven and the earth. " * 40)
            shape = ["--n-embd", "32", "--n-layer", "1", "--n-head", "2", "--n-ff", "64", "--ctx", "64"]
            # no --warmup: the default, 100 steps but at most a tenth of the run, is the same
            common = ["--vocab-from", MODEL, "--data", text, "--steps", "20", "--batch", "2", "--seq", "16",
                      "--lr", "3e-3", "--adam-beta2", "0.99", "-t", "2"]
            a, b = os.path.join(d, "a.gguf"), os.path.join(d, "b.gguf")
            run("train", *shape, *common, "--out", a)
            steps = []
            r = toy.train(data=[text], out=b, vocab_from=MODEL, n_embd=32, n_layer=1, n_head=2, n_ff=64, ctx=64,
                          steps=20, batch=2, seq=16, lr=3e-3, adam_beta2=0.99, threads=2, progress=steps.append)
            self.assertEqual(r["steps"], 20)
            self.assertEqual([s["step"] for s in steps], list(range(1, 21)))
            self.assertLess(steps[-1]["loss"], steps[0]["loss"])
            self.assertGreater(r["n_params"], 0)
            self.assertEqual(read(a), read(b), "toy.train and toy train differ")
            with self.assertRaises(toy.ToyError) as e:
                toy.train(data=[os.path.join(d, "missing.txt")], out=b, vocab_from=MODEL, preset="smollm2-135m",
                          steps=1)
            self.assertIn("missing.txt", str(e.exception))


if __name__ == "__main__":
    unittest.main()
