"""toy from Python: run and train llama-family GGUF models with libtoy (ctypes only).

    import toy
    with toy.Model("model.gguf") as m:
        ids = m.tokenize("And it came to pass")
        for piece in m.generate("And it came to pass", max_tokens=40, temperature=0):
            print(piece, end="", flush=True)
        logits = m.logits(ids)          # numpy array [len(ids), n_vocab] when numpy is present
        vec = m.embeddings("And it came to pass")  # n_embd floats, mean-pooled, norm 1
        reply = m.chat([{"role": "user", "content": "Hello"}], max_tokens=64)

    toy.train(data=["text.txt"], out="model.gguf", preset="smollm2-135m", vocab_from="vocab.gguf", steps=100)

Errors are toy.ToyError carrying the library's message. The library is libtoy.so: from
$TOY_LIBRARY, the source tree's build/, or the system's.
"""

import ctypes
import queue
import threading

from . import _lib

__all__ = ["Model", "Trainer", "ChatTemplate", "ChatReply", "ToyError", "train", "version", "kernel_isa", "FINISH_REASONS"]

_c = _lib.load_library()

FINISH_REASONS = {1: "eog", 2: "length", 3: "stop", 4: "context", 5: "caller"}
POOLINGS = {-1: None, 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}  # toy_pooling
_LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


_STATUS_NAMES = {1: "TOY_ERR_IO", 2: "TOY_ERR_FORMAT", 3: "TOY_ERR_NOMEM", 4: "TOY_ERR_INVALID",
                 5: "TOY_ERR_UNSUPPORTED", 6: "TOY_ERR_NOT_FOUND"}


class ToyError(Exception):
    """A failure inside libtoy: .status is toy_status's name ("TOY_ERR_IO", ...), str()
    the message naming the file, key, tensor or field."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _check(status):
    if status != 0:
        raise ToyError(_STATUS_NAMES.get(status, str(status)), _c.toy_last_error().decode("utf-8", "replace"))


def version():
    """(major, minor, patch) of the libtoy in use."""
    v = [ctypes.c_int() for _ in range(3)]
    _c.toy_version(*(ctypes.byref(x) for x in v))
    return tuple(x.value for x in v)


def kernel_isa():
    """The instruction set toy's kernels use here: "avx512", "avx2" or "scalar"."""
    return _c.toy_kernel_isa().decode()


def _json_arg(value):
    import json
    return None if value is None else json.dumps(value).encode()


def _taken_string(out):
    """The text of a string libtoy malloc'd, freed."""
    try:
        return ctypes.string_at(out).decode("utf-8")
    finally:
        _c.toy_free(out)


class ChatReply(str):
    """Model.chat's answer: the text of the reply's content (a str), with .reasoning_content
    (the model's thinking, or None), .tool_calls (OpenAI's list, or None), .message (the
    whole assistant message, ready to append to the conversation) and .finish_reason."""

    def __new__(cls, message, finish_reason):
        reply = super().__new__(cls, message.get("content") or "")
        reply.message = message
        reply.reasoning_content = message.get("reasoning_content")
        reply.tool_calls = message.get("tool_calls")
        reply.finish_reason = finish_reason
        return reply


class ChatTemplate:
    """A Jinja chat template, run as transformers' apply_chat_template runs it:

        t = toy.ChatTemplate(open("template.jinja").read(), bos_token="<s>", eos_token="</s>")
        prompt = t.render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)

    A model's own is Model.chat_template()."""

    def __init__(self, text, bos_token="", eos_token="", _handle=None):
        self._t = ctypes.c_void_p(_handle)
        if _handle is None:
            _check(_c.toy_chat_template_new(text.encode(), bos_token.encode(), eos_token.encode(),
                                            ctypes.byref(self._t)))

    def render(self, messages, tools=None, add_generation_prompt=True, **chat_template_kwargs):
        """The prompt of messages (OpenAI's form), with tools (a list, or None) and further
        variables of the template (e.g. enable_thinking=False)."""
        out = ctypes.c_void_p()
        _check(_c.toy_chat_template_render(self._t, _json_arg(messages), _json_arg(tools),
                                           _json_arg(chat_template_kwargs) if chat_template_kwargs else None,
                                           add_generation_prompt, ctypes.byref(out)))
        return _taken_string(out)

    def prompt(self, messages, tools=None, parallel_tool_calls=True, **chat_template_kwargs):
        """The prompt Model.chat (and toy serve) answers: render's with the generation prompt,
        but where the template writes no tools of its own, the tools, calls and results
        in toy's generic form (docs/chat-templates.md)."""
        out = ctypes.c_void_p()
        _check(_c.toy_chat_template_prompt(self._t, _json_arg(messages), _json_arg(tools),
                                           _json_arg(chat_template_kwargs) if chat_template_kwargs else None,
                                           bool(parallel_tool_calls), ctypes.byref(out)))
        return _taken_string(out)

    def parse(self, prompt, reply, tools=None, reasoning=True, partial=False):
        """The reply to prompt read as the template's model writes it: OpenAI's assistant
        message, {"role", "content", "reasoning_content", "tool_calls"} (the last two only
        where present). Calls of functions not in tools stay content; reasoning=False
        keeps the thinking in the content. partial: the reply is still being written, and
        only what no later text can change is read (successive parses extend each other)."""
        import json
        out = ctypes.c_void_p()
        fn = _c.toy_chat_template_parse_partial if partial else _c.toy_chat_template_parse
        _check(fn(self._t, prompt.encode(), reply.encode(), _json_arg(tools), bool(reasoning), ctypes.byref(out)))
        return json.loads(_taken_string(out))

    def tool_grammar(self, prompt, tools, function=None, parallel=True):
        """A GBNF grammar (for Model.generate's grammar=) that makes the reply to prompt call
        tools in the model's own syntax: the function named `function` (None: any), up to 8
        calls with parallel, arguments matching the tool's parameters."""
        out = ctypes.c_void_p()
        _check(_c.toy_chat_template_tool_grammar(self._t, prompt.encode(), _json_arg(tools),
                                                 function.encode() if function else None, bool(parallel),
                                                 ctypes.byref(out)))
        return _taken_string(out)

    @classmethod
    def builtin(cls, name):
        """One of the built-in families (chatml, llama3, gemma, ...), as --chat-template NAME."""
        t = ctypes.c_void_p()
        _check(_c.toy_chat_template_builtin(name.encode(), ctypes.byref(t)))
        return cls(None, _handle=t.value)

    def reads(self, variable):
        """Whether the template reads the variable ("tools", "enable_thinking", ...)."""
        return bool(_c.toy_chat_template_reads(self._t, variable.encode()))

    @property
    def bos_token(self):
        return _c.toy_chat_template_bos(self._t).decode()

    def close(self):
        if self._t:
            _c.toy_chat_template_free(self._t)
            self._t = ctypes.c_void_p()

    def __del__(self):
        self.close()


def _init(cls, init_fn):
    p = cls()
    init_fn(ctypes.byref(p), ctypes.sizeof(p))
    return p


def _ids_array(ids):
    ids = list(ids)
    return (ctypes.c_int32 * max(len(ids), 1))(*ids), len(ids)



def _decode_chunks(ctx, ids, step, logits):
    """Evaluates ids as one sequence from position 0, step tokens a batch (with or without
    the logits of every token), yielding each batch's size once it is decoded."""
    for start in range(0, len(ids), step):
        chunk = ids[start:start + step]
        k = len(chunk)
        tok = (ctypes.c_int32 * k)(*chunk)
        pos = (ctypes.c_int32 * k)(*range(start, start + k))
        seq = (ctypes.c_int32 * k)()
        want = (ctypes.c_int8 * k)(*([1 if logits else 0] * k))
        _check(_c.toy_decode(ctx, ctypes.byref(_lib.Batch(k, tok, pos, seq, want))))
        yield k

class Model:
    """A GGUF model and a context to run it in (n_ctx tokens; 0: the model's own).
    Model.create makes one in memory; model.trainer() / model.train_step() train it."""

    def __init__(self, path, n_ctx=0, n_threads=None, use_mmap=True, n_batch=512, _handle=None):
        self._ctx = None
        self._trainer = None
        if _handle is None:
            mp = _init(_lib.ModelParams, _c.toy_model_params_init)
            mp.use_mmap = bool(use_mmap)
            self._model = ctypes.c_void_p()
            _check(_c.toy_model_load_with(str(path).encode(), ctypes.byref(mp), ctypes.byref(self._model)))
        else:
            self._model = _handle
        self.path = str(path)
        self.n_threads = n_threads or _default_threads()
        self.n_batch = n_batch
        self._vocab = _c.toy_model_vocab(self._model)
        try:
            self._ctx = self._new_context(n_ctx, n_batch)
        except ToyError:
            self.close()
            raise
        self.n_ctx = _c.toy_n_ctx(self._ctx)

    def _new_context(self, n_ctx, n_batch, n_outputs=0):
        cp = _init(_lib.ContextParams, _c.toy_context_params_init)
        cp.n_ctx, cp.n_batch, cp.n_outputs, cp.n_threads = n_ctx, n_batch, n_outputs, self.n_threads
        ctx = ctypes.c_void_p()
        _check(_c.toy_context_new(self._model, ctypes.byref(cp), ctypes.byref(ctx)))
        return ctx

    @classmethod
    def create(cls, vocab_from=None, arch="llama", preset=None, n_embd=0, n_layer=0, n_head=0, n_head_kv=0, n_ff=0,
               ctx=0, untied=False, name=None, type="f32", seed=42, n_ctx=0, n_threads=None, n_batch=512):
        """A new model of random weights made in memory, no file written: a preset
        and/or the dimensions as `toy init` takes them, the tokenizer of vocab_from (any
        GGUF with one; None: a byte-level one of 259 tokens, no file read at all).
        model.save(path) writes it."""
        keep = []

        def cstr(x):
            if x is None:
                return None
            keep.append(str(x).encode())
            return keep[-1]
        ip = _init(_lib.InitParams, _c.toy_init_params_init)
        ip.arch, ip.preset, ip.name, ip.vocab_path = cstr(arch), cstr(preset), cstr(name), cstr(vocab_from)
        ip.n_embd, ip.n_layer, ip.n_head, ip.n_head_kv, ip.n_ff, ip.n_ctx = n_embd, n_layer, n_head, n_head_kv, n_ff, ctx
        ip.tied = -1 if untied else 0
        ip.seed = seed
        ip.ftype = _c.toy_ftype_from_name(str(type).encode())
        if ip.ftype < 0:
            raise ToyError("TOY_ERR_INVALID", f"type: unknown type '{type}'")
        ip.n_threads = n_threads or _default_threads()
        handle = ctypes.c_void_p()
        _check(_c.toy_model_new(ctypes.byref(ip), ctypes.byref(handle)))
        return cls(f"(a new {arch} model)", n_ctx=n_ctx, n_threads=n_threads, n_batch=n_batch, _handle=handle)

    def trainer(self, batch=8, seq=256, lr=1e-3, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8,
                clip=1.0, taps=None, lora_rank=0, lora_alpha=0.0, lora_targets=None, lora_per_head=False,
                lora_init_scale=0.0, compute=None, seed=42):
        """The model's trainer (toy_trainer), made anew with these settings: batches of up
        to `batch` sequences of seq + 1 tokens, AdamW at rate lr (trainer.lr changes it),
        the taps to keep ("L*.out,L0.attn_norm"), LoRA as toy.train takes it."""
        self._close_trainer()
        self._trainer = Trainer(self, batch, seq, lr, weight_decay, adam_beta1, adam_beta2, adam_eps, clip, taps,
                                lora_rank, lora_alpha, lora_targets, lora_per_head, lora_init_scale, compute, seed)
        return self._trainer

    def train_step(self, batch, update=True):
        """One training step on `batch`, rows of token ids ([n_seq][n_tokens], a list of
        lists or an integer array): each position predicts the next. Returns the mean
        loss. Makes a trainer of the default settings, sized for this batch, if
        model.trainer() was not called."""
        if self._trainer is None:
            rows = [list(r) for r in batch]
            self.trainer(batch=len(rows), seq=max(len(r) for r in rows) - 1)
        return self._trainer.step(batch, update)

    def save(self, path, type=None):
        """Writes the model: the trained one (in `type`, default f32; LoRA: the
        adapter) once a trainer exists, else the model as it is."""
        if self._trainer is not None:
            self._trainer.save(path, type or "f32")
        elif type is not None:
            raise ToyError("TOY_ERR_INVALID", "save: a type applies to a trained model (toy quantize converts one)")
        else:
            _check(_c.toy_model_save(self._model, str(path).encode()))

    def _close_trainer(self):
        if self._trainer is not None:
            self._trainer.close()
            self._trainer = None

    def close(self):
        self._close_trainer()
        if self._ctx:
            _c.toy_context_free(self._ctx)
            self._ctx = None
        if self._model:
            _c.toy_model_free(self._model)
            self._model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def n_vocab(self):
        return _c.toy_model_n_vocab(self._model)

    @property
    def n_ctx_train(self):
        return _c.toy_model_n_ctx_train(self._model)

    @property
    def n_embd(self):
        return _c.toy_model_n_embd(self._model)

    @property
    def n_layer(self):
        return _c.toy_model_n_layer(self._model)

    @property
    def pooling(self):
        """The file's pooling_type ("none", "mean", "cls", "last", "rank"), None if it has none."""
        return POOLINGS.get(_c.toy_model_pooling(self._model))

    # ------------------------------------------------------------ tokenizer

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids of text (str or bytes), as llama_tokenize(add_special, parse_special)."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        ids, n = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_int32()
        _check(_c.toy_tokenize_alloc(self._vocab, data, len(data), add_special, parse_special, ctypes.byref(ids),
                                     ctypes.byref(n)))
        try:
            return ids[:n.value]
        finally:
            _c.toy_free(ids)

    def detokenize(self, ids, special=False):
        """The text of token ids, exact to the byte (invalid UTF-8 shown as U+FFFD)."""
        return self.detokenize_bytes(ids, special).decode("utf-8", "replace")

    def detokenize_bytes(self, ids, special=False):
        arr, n = _ids_array(ids)
        out, length = ctypes.c_void_p(), ctypes.c_size_t()
        _check(_c.toy_detokenize(self._vocab, arr, n, special, ctypes.byref(out), ctypes.byref(length)))
        try:
            return ctypes.string_at(out, length.value)
        finally:
            _c.toy_free(out)

    # ------------------------------------------------------------ logits

    def logits(self, ids):
        """The logits of every position of ids, evaluated as one sequence from position 0:
        a numpy float32 array [len(ids), n_vocab] (a list of lists without numpy)."""
        ids = list(ids)
        if not ids:
            raise ToyError("TOY_ERR_INVALID", "logits: no tokens")
        n_vocab, step = self.n_vocab, min(len(ids), self.n_batch)
        ctx = self._new_context(len(ids), step, step)
        rows = []
        try:
            for k in _decode_chunks(ctx, ids, step, logits=True):
                rows += [ctypes.string_at(_c.toy_get_logits(ctx, i), 4 * n_vocab) for i in range(k)]
        finally:
            _c.toy_context_free(ctx)
        try:
            import numpy
        except ImportError:
            return [list((ctypes.c_float * n_vocab).from_buffer_copy(r)) for r in rows]
        return numpy.frombuffer(b"".join(rows), dtype=numpy.float32).reshape(len(ids), n_vocab).copy()

    # ------------------------------------------------------------ embeddings

    def embeddings(self, text, pooling=None, normalize=True, add_special=True, parse_special=True):
        """The final-norm hidden states of text (str, bytes or token ids, tokenized as
        llama-server tokenizes an embedding's input), evaluated as one sequence from
        position 0 and pooled: "mean" (pooling None: the file's pooling_type, else mean),
        "cls" (the first token's), "last", or "none" (one row per token). normalize: each
        vector scaled to norm 1, as llama-server's /v1/embeddings gives them (pooled only).
        A numpy float32 array when numpy is present, else lists."""
        ids = list(text) if isinstance(text, (list, tuple)) else self.tokenize(text, add_special, parse_special)
        if not ids:
            raise ToyError("TOY_ERR_INVALID", "embeddings: no tokens")
        pooling = pooling or self.pooling or "mean"
        if pooling not in ("none", "mean", "cls", "last"):
            raise ToyError("TOY_ERR_INVALID", f"embeddings: pooling '{pooling}' is not none, mean, cls or last")
        n_embd, step = self.n_embd, min(len(ids), self.n_batch)
        cp = _init(_lib.ContextParams, _c.toy_context_params_init)
        cp.n_ctx, cp.n_batch, cp.n_outputs, cp.n_threads, cp.embeddings = len(ids), step, 1, self.n_threads, True
        ctx = ctypes.c_void_p()
        _check(_c.toy_context_new(self._model, ctypes.byref(cp), ctypes.byref(ctx)))
        rows = []
        try:
            for k in _decode_chunks(ctx, ids, step, logits=False):  # states only: no output projection
                rows += [list(_c.toy_get_embeddings(ctx, i)[:n_embd]) for i in range(k)]
        finally:
            _c.toy_context_free(ctx)
        if pooling == "mean":
            out = [[sum(col) / len(rows) for col in zip(*rows)]]
        elif pooling == "cls":
            out = [rows[0]]
        elif pooling == "last":
            out = [rows[-1]]
        else:
            out = rows
        if normalize and pooling != "none":
            for v in out:
                norm = sum(x * x for x in v) ** 0.5
                v[:] = [x / norm if norm > 0 else 0.0 for x in v]
        try:
            import numpy
        except ImportError:
            return out if pooling == "none" else out[0]
        a = numpy.array(out, dtype=numpy.float32)
        return a if pooling == "none" else a[0]

    # ------------------------------------------------------------ generation

    def generate(self, prompt, max_tokens=128, temperature=0.8, seed=0, stop=None, stream=True,
                 top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, repeat_last_n=64,
                 frequency_penalty=0.0, presence_penalty=0.0, add_special=True, parse_special=False,
                 grammar=None, json_schema=None, json_schema_strict=False, logit_bias=None):
        """A continuation of prompt (text, or a list of token ids), with toy run's sampling
        defaults. stream=True: an iterator of text pieces as they are generated; False:
        the whole text. The last finish reason is in .last_finish ("eog", "length", ...).

        grammar (GBNF text) or json_schema (a dict, or its JSON text) limits the text to
        that language (docs/grammars.md); with json_schema_strict, schema keywords toy
        does not support are errors. logit_bias ({token id: bias}) is added to the
        logits; a bias of -100 or less bans the token. A grammar that allows no token
        raises ToyError."""
        ids = prompt if isinstance(prompt, (list, tuple)) else self.tokenize(prompt, add_special, parse_special)
        sp = _init(_lib.SamplerParams, _c.toy_sampler_params_init)
        sp.temperature, sp.top_k, sp.top_p, sp.min_p = temperature, top_k, top_p, min_p
        sp.repeat_penalty, sp.repeat_last_n = repeat_penalty, repeat_last_n
        sp.frequency_penalty, sp.presence_penalty, sp.seed = frequency_penalty, presence_penalty, seed
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if grammar is not None and json_schema is not None:
            raise ToyError("TOY_ERR_INVALID", "grammar and json_schema cannot be combined: one grammar at most")
        if json_schema is not None and not isinstance(json_schema, (str, bytes)):
            import json
            json_schema = json.dumps(json_schema)
        constraint = None
        if grammar is not None:
            constraint = ("grammar", grammar.encode() if isinstance(grammar, str) else bytes(grammar))
        elif json_schema is not None:
            constraint = ("json_schema", json_schema.encode() if isinstance(json_schema, str) else bytes(json_schema))
        bias = [(int(t), float(b)) for t, b in (logit_bias or {}).items()]
        pieces = self._generate(ids, sp, max_tokens, stops, constraint, json_schema_strict, bias)
        return pieces if stream else "".join(pieces)

    def _compile(self, constraint, strict):
        """A toy_grammar for ("grammar", GBNF) or ("json_schema", JSON), or None."""
        if constraint is None:
            return None
        kind, text = constraint
        if b"\0" in text:
            raise ToyError("TOY_ERR_INVALID", f"{kind}: holds a NUL byte")
        g = ctypes.c_void_p()
        if kind == "grammar":
            st = _c.toy_grammar_new(self._vocab, text, ctypes.byref(g))
        else:
            st = _c.toy_grammar_from_json_schema(self._vocab, text, bool(strict), ctypes.byref(g))
        if st != 0:
            raise ToyError(_STATUS_NAMES.get(st, str(st)), f"{kind}: " + _c.toy_last_error().decode("utf-8", "replace"))
        return g

    def _generate(self, ids, sp, max_tokens, stops, constraint=None, strict=False, bias=()):
        grammar = self._compile(constraint, strict)
        bias_arr = (_lib.LogitBias * max(len(bias), 1))(*[_lib.LogitBias(t, b) for t, b in bias])
        sp.grammar, sp.logit_bias, sp.n_logit_bias = grammar.value if grammar else None, bias_arr, len(bias)
        sampler = ctypes.c_void_p()
        try:
            _check(_c.toy_sampler_new(ctypes.byref(sp), self.n_vocab, ctypes.byref(sampler)))
        except ToyError:
            _c.toy_grammar_free(grammar)
            raise
        _c.toy_kv_seq_rm(self._ctx, 0, 0, -1)
        out = queue.Queue()
        cancel = threading.Event()

        def on_text(user, token, text, length):
            out.put(ctypes.string_at(text, length))
            return not cancel.is_set()

        callback = _lib.TEXT_FN(on_text)
        stop_arr = (ctypes.c_char_p * max(len(stops), 1))(*[s.encode() for s in stops])
        gp = _init(_lib.GenerateParams, _c.toy_generate_params_init)
        gp.max_tokens, gp.stops, gp.n_stops, gp.on_text = max_tokens, stop_arr, len(stops), callback
        result = _lib.GenerateResult(size=ctypes.sizeof(_lib.GenerateResult))
        arr, n = _ids_array(ids)
        status = []

        def run():
            st = _c.toy_generate(self._ctx, sampler, arr, n, ctypes.byref(gp), ctypes.byref(result))
            # toy_last_error is per thread: read it on this one
            status.append((st, _c.toy_last_error().decode("utf-8", "replace")))
            out.put(None)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        try:
            while True:
                piece = out.get()
                if piece is None:
                    break
                if piece:  # whole UTF-8 characters: toy_generate holds back a split one
                    yield piece.decode("utf-8", "replace")
            if status and status[0][0] != 0:
                raise ToyError(_STATUS_NAMES.get(status[0][0], str(status[0][0])), status[0][1])
            self.last_finish = FINISH_REASONS.get(result.finish)
        finally:
            cancel.set()
            worker.join()
            _c.toy_sampler_free(sampler)
            _c.toy_grammar_free(grammar)  # after the sampler, which reads it

    def chat_template(self, name=None):
        """The model's own chat template (tokenizer.chat_template, or its variant
        tokenizer.chat_template.NAME), or None when the file has none."""
        t = ctypes.c_void_p()
        status = _c.toy_model_chat_template(self._model, name.encode() if name else None, ctypes.byref(t))
        if status == 6:  # TOY_ERR_NOT_FOUND
            return None
        _check(status)
        return ChatTemplate(None, _handle=t.value)

    def apply_template(self, messages, tools=None, add_generation_prompt=True, chat_template_kwargs=None):
        """The prompt the model's own chat template makes of messages, as transformers'
        apply_chat_template renders it (toy serve's /apply-template answers the chat's prompt,
        ChatTemplate.prompt); ToyError TOY_ERR_NOT_FOUND when the file has no template."""
        t = self.chat_template()
        if t is None:
            raise ToyError("TOY_ERR_NOT_FOUND", "the model has no tokenizer.chat_template")
        try:
            return t.render(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                            **(chat_template_kwargs or {}))
        finally:
            t.close()

    def chat(self, messages, max_tokens=256, stream=False, tools=None, tool_choice="auto", parallel_tool_calls=True,
             reasoning=True, chat_template_kwargs=None, **sampling):
        """The assistant's reply to messages (OpenAI's form) with the model's own chat
        template (tokenizer.chat_template; ChatML when it has none).

        tools: OpenAI's list of tools, shown to the template. tool_choice "auto" reads the
        calls the model writes in its own syntax; "none" leaves them as text; "required"
        or {"type": "function", "function": {"name": ...}} makes the model call (one call
        unless parallel_tool_calls), its arguments matching the tool's schema.
        reasoning=False keeps the model's thinking in the content. chat_template_kwargs:
        further variables of the template (e.g. {"enable_thinking": False}).

        stream=False: a ChatReply, the content as a str carrying .tool_calls,
        .reasoning_content and .message. stream=True: the raw text as it is generated;
        .last_message then holds the message read from it."""
        import json
        t = self.chat_template() or ChatTemplate.builtin("chatml")
        try:
            prompt = t.prompt(messages, tools=tools if tool_choice != "none" else None,
                              parallel_tool_calls=parallel_tool_calls, **(chat_template_kwargs or {}))
            # the template's text holds the special tokens, and BOS where it wants one
            add_bos = not (t.bos_token and prompt.startswith(t.bos_token))
            forced = None
            if tool_choice == "required":
                forced = t.tool_grammar(prompt, tools or [], None, parallel_tool_calls)
            elif isinstance(tool_choice, dict):
                name = (tool_choice.get("function") or {}).get("name")
                if tool_choice.get("type") != "function" or not isinstance(name, str):
                    raise ToyError("TOY_ERR_INVALID", "tool_choice: expected \"auto\", \"none\", \"required\" or "
                                                      "{\"type\": \"function\", \"function\": {\"name\": ...}}")
                forced = t.tool_grammar(prompt, tools or [], name, parallel_tool_calls)
            elif tool_choice not in ("auto", "none"):
                raise ToyError("TOY_ERR_INVALID", f"tool_choice: unknown value {json.dumps(tool_choice)}")
            if forced is not None:
                if "grammar" in sampling or "json_schema" in sampling:
                    raise ToyError("TOY_ERR_INVALID", "tool_choice forces a grammar: it cannot be combined with "
                                                      "grammar or json_schema")
                sampling["grammar"] = forced
            read_tools = tools if tool_choice != "none" else None
            ids = self.tokenize(prompt, add_special=add_bos, parse_special=True)
            pieces = self.generate(ids, max_tokens=max_tokens, stream=True, **sampling)
        except BaseException:
            t.close()
            raise

        def read(text):
            try:
                return t.parse(prompt, text, tools=read_tools, reasoning=reasoning)
            finally:
                t.close()

        if not stream:
            try:
                text = "".join(pieces)
            except BaseException:
                t.close()
                raise
            message = read(text)
            self.last_message = message
            return ChatReply(message, self.last_finish)

        def streamed():
            text = []
            try:
                for piece in pieces:
                    text.append(piece)
                    yield piece
            except BaseException:
                t.close()
                raise
            self.last_message = read("".join(text))
        return streamed()


def _numpy():
    try:
        import numpy
    except ImportError:
        raise ToyError("TOY_ERR_UNSUPPORTED", "tensors and taps are numpy arrays: install numpy") from None
    return numpy


class Trainer:
    """A model trained step by step (model.trainer()). param(), grad() and tap() are
    numpy views of the trainer's memory, valid while it lives: params are writable (set
    weights from memory), grads are those of the last step, taps its activations."""

    def __init__(self, model, batch, seq, lr, weight_decay, beta1, beta2, eps, clip, taps, lora_rank, lora_alpha,
                 lora_targets, lora_per_head, lora_init_scale, compute, seed):
        p = _init(_lib.TrainerParams, _c.toy_trainer_params_init)
        p.batch, p.seq, p.lr, p.weight_decay = batch, seq, lr, weight_decay
        p.beta1, p.beta2, p.eps, p.clip, p.seed = beta1, beta2, eps, clip, seed
        p.lora_rank, p.lora_alpha, p.lora_per_head, p.lora_init_scale = lora_rank, lora_alpha, lora_per_head, \
            lora_init_scale
        if lora_targets is not None:
            p.lora_targets = _lora_targets(lora_targets)
        if compute is not None and compute != "f32":
            if compute not in ("bf16", "f16"):
                raise ToyError("TOY_ERR_INVALID", f"compute must be f32, bf16 or f16, got '{compute}'")
            p.compute_type = _c.toy_type_from_name(compute.encode())
        self._taps = taps.encode() if taps else None
        p.taps = self._taps
        p.n_threads = model.n_threads
        self.model = model  # the model must outlive the trainer
        self._t = ctypes.c_void_p()
        _check(_c.toy_trainer_new(model._model, ctypes.byref(p), ctypes.byref(self._t)))
        self.batch, self.seq, self._lr = batch, seq, float(lr)

    def close(self):
        if self._t:
            _c.toy_trainer_free(self._t)
            self._t = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def step(self, batch, update=True):
        """One step on rows of token ids; returns the mean loss (see Model.train_step)."""
        rows = [list(map(int, r)) for r in batch]
        n_tokens = len(rows[0]) if rows else 0
        if any(len(r) != n_tokens for r in rows):
            raise ToyError("TOY_ERR_INVALID", "train_step: every sequence of a batch has the same length")
        ids = (ctypes.c_int32 * max(1, len(rows) * n_tokens))(*[t for r in rows for t in r])
        loss = ctypes.c_double()
        _check(_c.toy_trainer_step(self._t, ids, len(rows), n_tokens, bool(update), ctypes.byref(loss)))
        return loss.value

    @property
    def steps(self):
        return _c.toy_trainer_n_steps(self._t)

    @property
    def lr(self):
        return self._lr

    @lr.setter
    def lr(self, value):
        if not value > 0:
            raise ToyError("TOY_ERR_INVALID", f"lr {value} must be > 0")
        self._lr = float(value)
        _c.toy_trainer_set_lr(self._t, self._lr)

    def tensor_names(self):
        return [_c.toy_trainer_tensor_name(self._t, i).decode() for i in range(_c.toy_trainer_n_tensors(self._t))]

    def _view(self, fn, name):
        np = _numpy()
        ne = (ctypes.c_int64 * 4)()
        ptr = fn(self._t, name.encode(), ne)
        if not ptr:
            _check(6)
        shape = tuple(int(n) for n in reversed(ne[:4]))
        while len(shape) > 1 and shape[0] == 1:  # the unused outer dimensions
            shape = shape[1:]
        return np.ctypeslib.as_array(ptr, shape=shape)

    def param(self, name):
        """Tensor `name`'s trained values, a writable float32 view (rows of ne[0])."""
        return self._view(_c.toy_trainer_param, name)

    def grad(self, name):
        """The last step's gradient of tensor `name` (read it before the next step)."""
        v = self._view(_c.toy_trainer_grad, name)
        v.flags.writeable = False
        return v

    def tap(self, name):
        """A kept tap of the last step ("L3.out"): [n_seq * (n_tokens - 1), n_embd]."""
        np = _numpy()
        rows, cols = ctypes.c_int64(), ctypes.c_int64()
        ptr = _c.toy_trainer_tap(self._t, name.encode(), ctypes.byref(rows), ctypes.byref(cols))
        if not ptr:
            _check(6)
        v = np.ctypeslib.as_array(ptr, shape=(rows.value, cols.value))
        v.flags.writeable = False
        return v

    def save(self, path, type="f32"):
        ftype = _c.toy_ftype_from_name(str(type).encode())
        if ftype < 0:
            raise ToyError("TOY_ERR_INVALID", f"type: unknown type '{type}'")
        _check(_c.toy_trainer_save(self._t, str(path).encode(), ftype))


def _lora_targets(lora_targets):
    names = lora_targets.split(",") if isinstance(lora_targets, str) else list(lora_targets)
    bad = [t for t in names if t not in _LORA_TARGETS]
    if bad or not names:
        raise ToyError("TOY_ERR_INVALID", f"lora_targets: {bad or names} not among {', '.join(_LORA_TARGETS)}")
    return sum(1 << _LORA_TARGETS.index(t) for t in set(names))


def _default_threads():
    import os
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


def train(data, out, model=None, eval_data=None, steps=0, epochs=1, batch=8, seq=256, grad_accum=1,
          lr=1e-3, min_lr=1e-4, warmup=None, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, clip=1.0,
          seed=42, threads=None, out_type=None, save_every=0, eval_every=0, resume=False, lora_rank=0,
          lora_alpha=0.0, lora_targets=None, lora_dropout=0.0, lora_per_head=False, lora_init_scale=0.0,
          lora_from=None, compute=None, no_mmap=False, arch="llama",
          preset=None, n_embd=0, n_layer=0, n_head=0, n_head_kv=0, n_ff=0, ctx=0, untied=False, name=None,
          vocab_from=None, progress=None):
    """Trains as `toy train` / `toy finetune` do, with the same options (their flags with
    _ for -): a new model from preset/dimensions and vocab_from, or model= to fine-tune
    (with lora_rank: LoRA adapters). warmup defaults, as there, to 100 steps but at most
    a tenth of `steps`. progress(dict) is called after each step. Returns the result as
    a dict (steps, n_params, loss, eval_loss, ...)."""
    keep = []  # what the C structs point to, alive for the call

    def cstr(s):
        if s is None:
            return None
        b = str(s).encode()
        keep.append(b)
        return b

    def cstrs(items):
        items = [str(x) for x in ([items] if isinstance(items, str) else (items or []))]
        arr = (ctypes.c_char_p * max(len(items), 1))(*[cstr(x) for x in items])
        keep.append(arr)
        return arr, len(items)

    init = _init(_lib.InitParams, _c.toy_init_params_init)
    init.arch, init.preset, init.name, init.vocab_path = cstr(arch), cstr(preset), cstr(name), cstr(vocab_from)
    init.n_embd, init.n_layer, init.n_head, init.n_head_kv, init.n_ff, init.n_ctx = \
        n_embd, n_layer, n_head, n_head_kv, n_ff, ctx
    init.tied = -1 if untied else 0
    init.seed = seed

    p = _init(_lib.TrainParams, _c.toy_train_params_init)
    p.model_path, p.init, p.out_path = cstr(model), ctypes.pointer(init), cstr(out)
    p.data, p.n_data = cstrs(data)
    p.eval_data, p.n_eval_data = cstrs(eval_data)
    p.steps, p.epochs, p.batch, p.seq, p.grad_accum = steps, epochs, batch, seq, grad_accum
    if warmup is None:
        warmup = min(100, steps // 10) if steps > 0 else 100
    p.lr, p.min_lr, p.warmup, p.weight_decay = lr, min_lr, warmup, weight_decay
    p.beta1, p.beta2, p.eps, p.clip, p.seed = adam_beta1, adam_beta2, adam_eps, clip, seed
    p.n_threads = threads or _default_threads()
    p.save_every, p.eval_every, p.resume, p.no_mmap = save_every, eval_every, resume, no_mmap
    p.lora_rank, p.lora_alpha, p.lora_dropout = lora_rank, lora_alpha, lora_dropout
    p.lora_per_head, p.lora_init_scale, p.lora_from = lora_per_head, lora_init_scale, cstr(lora_from)
    if lora_targets is not None:
        p.lora_targets = _lora_targets(lora_targets)
    if out_type is not None:
        p.out_ftype = _c.toy_ftype_from_name(out_type.encode())
        if p.out_ftype < 0:
            raise ToyError("TOY_ERR_INVALID", f"out_type: unknown type '{out_type}'")
    if compute is not None and compute != "f32":
        if compute not in ("bf16", "f16"):
            raise ToyError("TOY_ERR_INVALID", f"compute must be f32, bf16 or f16, got '{compute}'")
        p.compute_type = _c.toy_type_from_name(compute.encode())
    errors = []
    if progress is not None:
        def on_progress(user, pr):
            try:
                progress({f: getattr(pr.contents, f) for f, _ in _lib.TrainProgress._fields_})
            except Exception as e:  # an exception cannot cross the C frames: kept for later
                errors.append(e)
        p.progress = _lib.TRAIN_PROGRESS_FN(on_progress)
    r = _lib.TrainResult(size=ctypes.sizeof(_lib.TrainResult))
    _check(_c.toy_train(ctypes.byref(p), ctypes.byref(r)))
    if errors:
        raise errors[0]
    return {f: getattr(r, f) for f, _ in _lib.TrainResult._fields_ if f != "size"}
