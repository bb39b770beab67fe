"""Trains a small model from Python with no file on disk until it saves.

    python3 examples/train_in_memory.py OUT.gguf [STEPS]

The model is made in memory from its dimensions (the bundled model's tokenizer), trained
on examples/psalm23.txt one batch at a time, its activations and gradients read as numpy
arrays along the way, then written to OUT.gguf, which toy run, llama.cpp or toy.Model load.
"""
import os
import sys

import numpy as np

import toy

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else "psalm.gguf"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
seq, batch = 32, 4

model = toy.Model.create(vocab_from=os.path.join(here, "..", "models", "toy-kjv.gguf"),
                         n_embd=64, n_layer=2, n_head=4, n_ff=192, ctx=seq, seed=1)
ids = np.array(model.tokenize(open(os.path.join(here, "psalm23.txt")).read()), dtype=np.int32)
windows = np.lib.stride_tricks.sliding_window_view(ids, seq + 1)[::seq // 2]
print(f"{len(ids)} tokens, {len(windows)} windows of {seq + 1}")

trainer = model.trainer(batch=batch, seq=seq, lr=3e-3, taps="L1.out")
rng = np.random.default_rng(0)
for step in range(steps):
    trainer.lr = 3e-3 * min(1.0, (step + 1) / 10)  # a short warmup: the caller schedules the rate
    loss = model.train_step(windows[rng.choice(len(windows), batch, replace=False)])
    if step % 10 == 0 or step == steps - 1:
        resid = trainer.tap("L1.out")  # [batch * seq, n_embd]: the residual stream after layer 1
        g = trainer.grad("blk.0.attn_q.weight")
        print(f"step {step:3d}  loss {loss:.3f}  |resid| {np.linalg.norm(resid, axis=1).mean():.2f}  "
              f"|grad q0| {np.linalg.norm(g):.4f}")

model.save(out)  # the first file written
print(f"wrote {out}")
with toy.Model(out) as trained:
    print("".join(trained.generate("The LORD is my shepherd", max_tokens=16, temperature=0)))
