#!/usr/bin/env python3
"""An independent float64 reference for `toy grad`, written with PyTorch autograd.

Reads a GGUF model with F32/F16/BF16 tensors (quantized models are first converted to
F32 by the caller), rebuilds the forward pass of the dense architectures from the GGUF
metadata the way llama.cpp defines them, and lets autograd compute the gradient of the
next-token loss (mean over the n - 1 predicted tokens) with respect to every tensor.
Nothing here comes from toy's sources: the GGUF reader, the architecture rules and the
derivatives are all separate.

usage: grad_reference.py MODEL.gguf TOKENS_CSV TOY_GRADS.gguf [--tol T] [--lora ADAPTER.gguf]
       grad_reference.py --jobs FILE   (many comparisons: see run_jobs)
Prints the loss of both and the relative RMS difference of every tensor's gradient;
exits 1 if the loss differs by more than 0.1 % or a tensor by more than T. With --lora
the model is frozen and the gradients are those of the adapter's lora_a / lora_b
(llama.cpp's adapter format: W x + alpha / rank * B (A x)).
"""
import math
import re
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, helpers.py
from helpers import GGUF  # noqa: E402

torch.set_default_dtype(torch.float64)

# ---------------------------------------------------------------- GGUF reading

def read_gguf(path):
    """The metadata (strings decoded) and every tensor as a float64 (or int32) array,
    shaped slowest dimension first."""
    g = GGUF(path)
    kv = {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) for k, v in g.kv.items()}
    tensors = {}
    for name, (ne, typ, at) in g.tensors.items():
        n = int(np.prod(ne))
        if typ == 0:
            arr = np.frombuffer(g.data, np.float32, n, at).astype(np.float64)
        elif typ == 1:
            arr = np.frombuffer(g.data, np.float16, n, at).astype(np.float64)
        elif typ == 26:
            arr = np.frombuffer(g.data, np.int32, n, at).copy()
        elif typ == 30:
            raw = np.frombuffer(g.data, np.uint16, n, at).astype(np.uint32) << 16
            arr = raw.view(np.float32).astype(np.float64)
        else:
            raise SystemExit(f"{path}: tensor {name} has type {typ}: convert the model to F32 first")
        tensors[name] = arr.reshape(list(reversed(ne)))
    return kv, tensors


# ---------------------------------------------------------------- the model


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * w + b


def rope_angles(n_tok, n_rot, base, freq_scale, factors, yarn, n_ctx_orig):
    i = torch.arange(0, n_rot // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / n_rot)
    pos = torch.arange(n_tok, dtype=torch.float64)[:, None]
    extrap = pos * inv[None, :]
    if factors is not None:
        extrap = extrap / factors[None, :]
    theta = extrap * freq_scale
    mscale = 1.0
    if yarn:
        def corr(n_turns):
            return n_rot * math.log(n_ctx_orig / (n_turns * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = max(0.0, math.floor(corr(32.0))), min(n_rot - 1.0, math.ceil(corr(1.0)))
        ramp = 1.0 - torch.clamp((i - lo) / max(hi - lo, 0.001), 0.0, 1.0)
        theta = theta * (1 - ramp) + extrap * ramp
        mscale = 1.0 + 0.1 * math.log(1.0 / freq_scale)
    return theta, mscale


def apply_rope(x, theta, mscale, attn_factor, n_rot, neox):
    # x [T, heads, head_dim]
    c = (torch.cos(theta) * mscale * attn_factor)[:, None, :]
    s = (torch.sin(theta) * mscale * attn_factor)[:, None, :]
    rot, rest = x[..., :n_rot], x[..., n_rot:]
    if neox:
        a, b = rot[..., : n_rot // 2], rot[..., n_rot // 2:]
        out = torch.cat([a * c - b * s, a * s + b * c], -1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)
    return torch.cat([out, rest], -1)


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def loss_and_grads(kv, np_tensors, tokens, lora=None):
    """lora: (alpha, {tensor name: [(A [rank][n_in], B [n_out][rank], A's name, B's name)]});
    then only the adapters have gradients, as W x + alpha / rank * B (A x), or with one
    pair per query head (toy's design), head H's rows of W x gaining alpha / rank B_H (A_H x)."""
    arch = kv["general.architecture"]

    def hp(key, default=None):
        v = kv.get(f"{arch}.{key}", default)
        return v[0] if isinstance(v, list) else v

    W = {k: torch.tensor(v, requires_grad=lora is None) for k, v in np_tensors.items()}
    L = {}  # adapted matrix: (scale, [(A, B, A's name, B's name)]), one pair or one per query head
    if lora is not None:
        alpha, pairs = lora
        for name, ps in pairs.items():
            r = ps[0][0].shape[0]
            L[name] = ((alpha or r) / r, [(torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True),
                                           na, nb) for a, b, na, nb in ps])

    def mm(h, name):
        y = h @ W[name].T
        if name in L:
            s, ps = L[name]
            y = y + s * torch.cat([(h @ a.T) @ b.T for a, b, _, _ in ps], dim=-1)
        return y
    n_embd, n_layer = hp("embedding_length"), hp("block_count")
    n_head = hp("attention.head_count")
    n_head_kv = hp("attention.head_count_kv", n_head)
    head_dim = hp("attention.key_length", n_embd // n_head)
    gpt2 = arch == "gpt2"  # LayerNorm with biases, learned positions, no RoPE, a plain GELU MLP
    n_rot = hp("rope.dimension_count", 0 if gpt2 else head_dim)
    eps = hp("attention.layer_norm_epsilon" if gpt2 else "attention.layer_norm_rms_epsilon", 1e-5)
    base = hp("rope.freq_base", 10000.0)
    factor = hp("rope.scaling.factor", 1.0)
    scaling = kv.get(f"{arch}.rope.scaling.type", "linear" if factor != 1.0 else "none")
    freq_scale = 1.0 / factor if scaling in ("linear", "yarn") and factor > 0 else 1.0
    n_ctx_train = hp("context_length", 2048)
    n_ctx_orig = hp("rope.scaling.original_context_length", n_ctx_train)
    attn_factor = hp("rope.scaling.attn_factor", 1.0)
    n_swa = hp("attention.sliding_window", 0)
    attn_softcap = hp("attn_logit_softcapping", 0.0)
    final_softcap = hp("final_logit_softcapping", 0.0)
    embd_scale = hp("embedding_scale", 1.0)
    residual_scale = hp("residual_scale", 1.0)
    logit_scale = hp("logit_scale", 1.0)
    attn_scale = hp("attention.scale", 0.0) or 1.0 / math.sqrt(head_dim)
    neox = arch not in ("llama", "granite")
    gemma = arch in ("gemma2", "gemma3")
    if gemma:
        embd_scale = math.sqrt(n_embd)
        attn_scale = 1.0 / math.sqrt(head_dim)
    if arch == "phi3":
        n_swa = 0  # llama.cpp ignores phi3's sliding window

    T = len(tokens)
    factors = W.get("rope_freqs.weight")
    if "rope_factors_long.weight" in W:
        factors = W["rope_factors_long.weight"] if T > n_ctx_orig else W["rope_factors_short.weight"]

    def layer_swa(il):
        if n_swa <= 0:
            return 0
        if arch == "gemma2":
            return n_swa if il % 2 == 0 else 0
        if arch == "gemma3":
            return n_swa if il % 6 < 5 else 0
        return n_swa

    def norm(x, prefix):  # prefix: "output_norm" or "blk.N.attn_norm" ...
        if gpt2:
            return layer_norm(x, W[prefix + ".weight"], W[prefix + ".bias"], eps)
        return rms_norm(x, W[prefix + ".weight"], eps)

    def bias(y, name):
        return y + W[name] if name in W else y

    x = W["token_embd.weight"][torch.tensor(tokens)] * embd_scale
    if gpt2:
        x = x + W["position_embd.weight"][:T]
    qd, kvd = n_head * head_dim, n_head_kv * head_dim
    idx = torch.arange(T)
    for il in range(n_layer):
        def w(name):
            return W.get(f"blk.{il}.{name}")
        h = norm(x, f"blk.{il}.attn_norm")
        if w("attn_qkv.weight") is not None:
            qkv = bias(mm(h, f"blk.{il}.attn_qkv.weight"), f"blk.{il}.attn_qkv.bias")
            q, k, v = qkv[:, :qd], qkv[:, qd:qd + kvd], qkv[:, qd + kvd:]
        else:
            q, k, v = (mm(h, f"blk.{il}.attn_{t}.weight") for t in "qkv")
        if w("attn_q.bias") is not None:
            q, k, v = q + w("attn_q.bias"), k + w("attn_k.bias"), v + w("attn_v.bias")
        q = q.reshape(T, n_head, head_dim)
        k = k.reshape(T, n_head_kv, head_dim)
        v = v.reshape(T, n_head_kv, head_dim)
        if w("attn_q_norm.weight") is not None:
            if w("attn_q_norm.weight").shape[0] == head_dim:
                q, k = rms_norm(q, w("attn_q_norm.weight"), eps), rms_norm(k, w("attn_k_norm.weight"), eps)
            else:
                q = rms_norm(q.reshape(T, qd), w("attn_q_norm.weight"), eps).reshape(T, n_head, head_dim)
                k = rms_norm(k.reshape(T, kvd), w("attn_k_norm.weight"), eps).reshape(T, n_head_kv, head_dim)
        swa = layer_swa(il)
        lbase, lscale, lyarn = base, freq_scale, scaling == "yarn"
        if arch == "gemma3" and swa:
            lbase, lscale, lyarn = 10000.0, 1.0, False
        theta, mscale = rope_angles(T, n_rot, lbase, lscale, factors, lyarn, n_ctx_orig)
        if n_rot:
            q = apply_rope(q, theta, mscale, attn_factor, n_rot, neox)
            k = apply_rope(k, theta, mscale, attn_factor, n_rot, neox)
        group = n_head // n_head_kv
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("thd,uhd->htu", q, k)
        if gemma or arch == "phi3":  # Q scaled before QK^T (same result for the scale)
            scores = scores * attn_scale
            if attn_softcap:
                scores = attn_softcap * torch.tanh(scores / attn_softcap)
        else:
            if attn_softcap:
                scores = attn_softcap * torch.tanh(scores / attn_softcap)
            scores = scores * attn_scale
        mask = idx[None, :] > idx[:, None]
        if swa:
            mask = mask | (idx[:, None] - idx[None, :] >= swa)
        scores = scores.masked_fill(mask[None], float("-inf"))
        att = torch.einsum("htu,uhd->thd", torch.softmax(scores, -1), v).reshape(T, qd)
        o = bias(mm(att, f"blk.{il}.attn_output.weight"), f"blk.{il}.attn_output.bias")
        if w("post_attention_norm.weight") is not None:
            o = rms_norm(o, w("post_attention_norm.weight"), eps)
        x = x + residual_scale * o
        h = norm(x, f"blk.{il}.ffn_norm")
        if gpt2:  # down(gelu(up h + b) ) + b
            up = bias(mm(h, f"blk.{il}.ffn_up.weight"), f"blk.{il}.ffn_up.bias")
            f = bias(mm(gelu_tanh(up), f"blk.{il}.ffn_down.weight"), f"blk.{il}.ffn_down.bias")
            x = x + f
            continue
        if w("ffn_gate.weight") is not None:
            gate, up = mm(h, f"blk.{il}.ffn_gate.weight"), mm(h, f"blk.{il}.ffn_up.weight")
        else:  # phi3: gate rows, then up rows
            gu = mm(h, f"blk.{il}.ffn_up.weight")
            gate, up = gu[:, : gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        act = gelu_tanh(gate) if gemma else torch.nn.functional.silu(gate)
        f = mm(act * up, f"blk.{il}.ffn_down.weight")
        if w("post_ffw_norm.weight") is not None:
            f = rms_norm(f, w("post_ffw_norm.weight"), eps)
        x = x + residual_scale * f
    h = norm(x, "output_norm")
    z = mm(h, "output.weight" if "output.weight" in W else "token_embd.weight") / logit_scale
    if final_softcap:
        z = final_softcap * torch.tanh(z / final_softcap)
    loss = torch.nn.functional.cross_entropy(z[:-1], torch.tensor(tokens[1:]))
    loss.backward()
    if L:
        grads = {}
        for _, ps in L.values():
            for a, b, na, nb in ps:
                grads[na], grads[nb] = a.grad.numpy(), b.grad.numpy()
        return loss.item(), grads
    return loss.item(), {k: (t.grad.numpy() if t.grad is not None else np.zeros(t.shape)) for k, t in W.items()}


def compare(args, out=sys.stdout):
    """One comparison (the command line's arguments); True when it passes."""
    args = list(args)
    tol = 1e-3
    if "--tol" in args:
        i = args.index("--tol")
        tol = float(args[i + 1])
        del args[i:i + 2]
    lora = None
    if "--lora" in args:
        i = args.index("--lora")
        akv, at = read_gguf(args[i + 1])
        del args[i:i + 2]
        pairs = {n[:-len(".lora_a")]: [(t, at[n[:-1] + "b"], n, n[:-1] + "b")]
                 for n, t in at.items() if n.endswith(".lora_a")}
        # toy's design's LoRA-Q: blk.N.attn_q.head_H.lora_a.weight / lora_b.weight, one pair per head
        heads = sorted((int(m.group(1)), int(m.group(2)), n) for n in at
                       for m in [re.fullmatch(r"blk\.(\d+)\.attn_q\.head_(\d+)\.lora_a\.weight", n)] if m)
        for il, h, n in heads:
            nb = n.replace(".lora_a.", ".lora_b.")
            pairs.setdefault(f"blk.{il}.attn_q.weight", []).append((at[n], at[nb], n, nb))
        lora = (akv.get("adapter.lora.alpha", 0.0), pairs)
    model, tokens_csv, toy_grads = args
    tokens = [int(t) for t in tokens_csv.split(",")]
    kv, tensors = read_gguf(model)
    loss, grads = loss_and_grads(kv, tensors, tokens, lora)
    gkv, toy = read_gguf(toy_grads)
    toy_loss = gkv["toy.loss"]
    ok = abs(toy_loss - loss) <= 1e-3 * abs(loss)
    print(f"loss: toy {toy_loss:.7f}, reference {loss:.7f} (relative {abs(toy_loss - loss) / loss:.1e})", file=out)
    worst = 0.0
    for name, ref in grads.items():
        got = toy.get(name)
        if got is None or got.shape != ref.shape:
            print(f"  {name}: missing or mis-shaped in {toy_grads}", file=out)
            ok = False
            continue
        norm = np.linalg.norm(ref)
        rel = np.linalg.norm(got - ref) / norm if norm > 0 else np.linalg.norm(got)
        worst = max(worst, rel)
        flag = "" if rel <= tol else "   <-- over the tolerance"
        print(f"  {name:36s} relRMS {rel:.2e}  |grad| {norm:.3e}{flag}", file=out)
        ok &= rel <= tol
    print(f"worst relRMS {worst:.2e} (tolerance {tol:g}): {'ok' if ok else 'FAILED'}", file=out)
    return ok


def run_jobs(path):
    """--jobs FILE: one comparison per line, "OUTPUT ARGS..." (no spaces within an argument);
    each one's report goes to its OUTPUT, an error included. One process for all of them:
    PyTorch's import costs more than a comparison."""
    ok = True
    with open(path) as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            with open(words[0], "w") as out:
                try:
                    ok &= compare(words[1:], out)
                except Exception as e:  # noqa: BLE001 - reported in the job's output, the rest go on
                    print(f"error: {type(e).__name__}: {e}", file=out)
                    ok = False
    return ok


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--jobs":
        sys.exit(0 if run_jobs(args[1]) else 1)
    sys.exit(0 if compare(args) else 1)


if __name__ == "__main__":
    main()
