#!/usr/bin/env python3
"""The peer of `toy train --bench`: the same training step in PyTorch on the CPU.

A llama-architecture model (by default SmolLM2-135M's shape with GPT-2's 50257-token
vocabulary, as `toy init --preset smollm2-135m --vocab-from ggml-vocab-gpt-2.gguf`
writes it), random weights, random tokens, batch x seq tokens per step: forward,
cross-entropy, backward, AdamW. Prints the median tokens/s, the utilisation against a
given peak, and the peak RSS, as `toy train --bench` does, so the two can be run side
by side on one machine.

--matmul onednn (default) sends every matrix product (the linear layers and the
attention products, forward and backward) through oneDNN, which Debian's PyTorch
contains; --matmul blas uses torch's BLAS (Debian's stock build: the reference BLAS).

--compute bf16, the peer of `toy train --compute bf16`, runs the step under PyTorch's CPU
autocast (torch.autocast("cpu", dtype=torch.bfloat16)): the matrix products take BF16
operands, the master weights, their gradients and AdamW stay F32. Autocast casts the
operands of torch's own products (--matmul blas) but not those of oneDNN's linear, so
with --matmul onednn the script casts them itself, as autocast would, before each
product; its result is BF16, as autocast's is. oneDNN's BF16 products in PyTorch 1.13
need AVX-512 BW, VL and DQ; on a CPU without them the products fall back to torch's own
BF16 matmul, and the output says so ("matmul": "blas"). "product_dtypes" lists the
dtypes of the operands that oneDNN's products saw, forward and backward (with --matmul
blas, of the forward products' results), so a run shows that they were BF16.

usage: bench-train-torch.py [--batch 8] [--seq 512] [--steps 3] [--threads 2]
                            [--matmul onednn|blas] [--compute f32|bf16]
                            [--peak-gflops G] [--json]
"""
import argparse
import contextlib
import json
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

PRODUCT_DTYPES = set()  # oneDNN's products' operand dtypes, or torch's products' result dtypes


def mm_nt(a, b):
    """a @ b.T for 2-D float32 or bfloat16 tensors (both the same), through oneDNN."""
    PRODUCT_DTYPES.add(str(a.dtype).replace("torch.", ""))
    PRODUCT_DTYPES.add(str(b.dtype).replace("torch.", ""))
    return torch._C._nn.mkldnn_linear(a.contiguous().to_mkldnn(), b.contiguous().to_mkldnn(), None).to_dense()


def onednn_bf16_works():
    """Whether this PyTorch's oneDNN takes BF16 products on this CPU (1.13 refuses without
    AVX-512 BW/VL/DQ: "mkldnn_linear: bf16 path needs the cpu support ...")."""
    try:
        x = torch.ones(2, 2, dtype=torch.bfloat16)
        torch._C._nn.mkldnn_linear(x.to_mkldnn(), x.to_mkldnn(), None)
        return True
    except RuntimeError:
        return False


class LinearNT(torch.autograd.Function):
    """y = x W^T and its two backward products, all through oneDNN."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return mm_nt(x, w)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        return mm_nt(gy, w.t()), mm_nt(gy.t(), x.t())


class BatchedNT(torch.autograd.Function):
    """c[i] = a[i] @ b[i]^T over the leading dimension, through oneDNN."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.stack([mm_nt(a[i], b[i]) for i in range(a.shape[0])])

    @staticmethod
    def backward(ctx, gc):
        a, b = ctx.saved_tensors
        ga = torch.stack([mm_nt(gc[i], b[i].t()) for i in range(a.shape[0])])
        gb = torch.stack([mm_nt(gc[i].t(), a[i].t()) for i in range(a.shape[0])])
        return ga, gb


class Model(torch.nn.Module):
    def __init__(s, vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, onednn, bf16):
        super().__init__()
        # autocast does not see oneDNN's linear, so its operands are cast here, as autocast
        # casts those of torch's own products; the casts' backward returns F32 gradients
        s.cast = (lambda t: t.to(torch.bfloat16)) if bf16 else (lambda t: t)
        s.onednn, s.n_head, s.n_head_kv, s.hd = onednn, n_head, n_head_kv, n_embd // n_head
        P = lambda *shape: torch.nn.Parameter(torch.randn(*shape) * 0.02)
        s.emb = P(vocab, n_embd)
        s.layers = torch.nn.ModuleList()
        for _ in range(n_layer):
            l = torch.nn.Module()
            l.n1, l.n2 = torch.nn.Parameter(torch.ones(n_embd)), torch.nn.Parameter(torch.ones(n_embd))
            l.wq, l.wk, l.wv = P(n_embd, n_embd), P(n_head_kv * s.hd, n_embd), P(n_head_kv * s.hd, n_embd)
            l.wo, l.wg, l.wu, l.wd = P(n_embd, n_embd), P(n_ff, n_embd), P(n_ff, n_embd), P(n_embd, n_ff)
            s.layers.append(l)
        s.nf = torch.nn.Parameter(torch.ones(n_embd))

    def lin(s, x, w):
        if not s.onednn:
            y = x @ w.t()
            PRODUCT_DTYPES.add(str(y.dtype).replace("torch.", ""))
            return y
        shape = x.shape
        return LinearNT.apply(s.cast(x.reshape(-1, shape[-1])), s.cast(w)).reshape(*shape[:-1], w.shape[0])

    def bmm_nt(s, a, b):
        if not s.onednn:
            y = a @ b.transpose(-1, -2)
            PRODUCT_DTYPES.add(str(y.dtype).replace("torch.", ""))
            return y
        lead = a.shape[:-2]
        out = BatchedNT.apply(s.cast(a.reshape(-1, *a.shape[-2:])), s.cast(b.reshape(-1, *b.shape[-2:])))
        return out.reshape(*lead, *out.shape[-2:])

    @staticmethod
    def norm(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w

    def forward(s, tok, tgt):
        B, T = tok.shape
        x = s.emb[tok]
        pos = torch.arange(T, dtype=torch.float32)[:, None]
        inv = 100000.0 ** (-torch.arange(0, s.hd, 2, dtype=torch.float32) / s.hd)
        cos, sin = torch.cos(pos * inv), torch.sin(pos * inv)

        def rope(q):
            a, b = q[..., 0::2], q[..., 1::2]
            return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)

        mask = torch.full((T, T), float("-inf")).triu(1)
        g = s.n_head // s.n_head_kv
        for l in s.layers:
            h = s.norm(x, l.n1)
            q = rope(s.lin(h, l.wq).view(B, T, s.n_head, s.hd).transpose(1, 2))
            k = rope(s.lin(h, l.wk).view(B, T, s.n_head_kv, s.hd).transpose(1, 2)).repeat_interleave(g, 1)
            v = s.lin(h, l.wv).view(B, T, s.n_head_kv, s.hd).transpose(1, 2).repeat_interleave(g, 1)
            p = torch.softmax(s.bmm_nt(q, k) / math.sqrt(s.hd) + mask, -1)
            att = s.bmm_nt(p, v.transpose(-1, -2)).transpose(1, 2).reshape(B, T, -1)
            x = x + s.lin(att, l.wo)
            h = s.norm(x, l.n2)
            x = x + s.lin(F.silu(s.lin(h, l.wg)) * s.lin(h, l.wu), l.wd)
        logits = s.lin(s.norm(x, s.nf), s.emb)
        return F.cross_entropy(logits.view(B * T, -1), tgt.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--matmul", choices=["onednn", "blas"], default="onednn")
    ap.add_argument("--compute", choices=["f32", "bf16"], default="f32",
                    help="the operands of the matrix products (bf16: under CPU autocast)")
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--dims", default="576,30,9,3,1536", help="n_embd,n_layer,n_head,n_head_kv,n_ff")
    ap.add_argument("--peak-gflops", type=float, default=0.0, help="the peak to divide by (toy train --bench measures it)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    e, nl, nh, nkv, ff = (int(x) for x in a.dims.split(","))
    bf16 = a.compute == "bf16"
    if bf16 and a.matmul == "onednn" and not onednn_bf16_works():
        print("bench-train-torch: this CPU lacks the AVX-512 BW/VL/DQ that PyTorch's oneDNN BF16 "
              "products need; torch's own BF16 matmul instead (--matmul blas)", file=sys.stderr)
        a.matmul = "blas"
    m = Model(a.vocab, e, nl, nh, nkv, ff, a.matmul == "onednn", bf16)
    n_params = sum(p.numel() for p in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    tok = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    times = []
    for step in range(a.steps + 1):  # the first warms up
        t0 = time.time()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            loss = m(tok[:, :-1], tok[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if step:
            times.append(time.time() - t0)
    step_s = statistics.median(times)
    tps = a.batch * a.seq / step_s
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    util = 6 * n_params * tps / (a.peak_gflops * 1e9) if a.peak_gflops > 0 else float("nan")
    r = {"tokens_per_s": tps, "step_s": step_s, "n_params": n_params, "threads": a.threads,
         "matmul": a.matmul, "compute": a.compute, "product_dtypes": sorted(PRODUCT_DTYPES),
         "loss": loss.item(), "peak_rss_mb": rss, "utilisation": util, "torch": torch.__version__}
    if a.json:
        print(json.dumps(r))
    else:
        print(f"PyTorch {torch.__version__} ({a.matmul} matmuls, {a.compute} compute: operands "
              f"{', '.join(sorted(PRODUCT_DTYPES))}), {n_params / 1e6:.1f} M parameters, "
              f"{a.batch} x {a.seq} tokens per step, {a.threads} threads")
        print(f"step {step_s:.3f} s (median of {a.steps}), {tps:.1f} tokens/s, utilisation "
              f"{100 * util:.1f} %, peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
