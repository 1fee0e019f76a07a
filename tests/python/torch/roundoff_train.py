#!/usr/bin/env python3
"""A tiny pre-norm transformer language model whose runs differ by round-off, or by a planted bug.

Ordinary PyTorch user code: nothing in it knows about tftrace. The round-off
tests (test_roundoff.py) record it under ``tftrace --torch`` in layouts that
compute the same thing in a different order (another thread count, one
process or two DDP ranks, bf16 autocast) and with bugs planted late:

    python roundoff_train.py --steps 200 --threads 1
    python roundoff_train.py --steps 200 --threads 2 --bug attn-scale@150
    python -m torch.distributed.run --nproc_per_node 2 roundoff_train.py --steps 30

Every step prints ``step N loss X`` (``rank R step N loss X`` when
distributed), X the full ``repr`` of the loss backward was called on, so
two runs can be compared bit for bit. Same flags, same thread count, same
layout: identical output.

Model: token and position embeddings, ``--layers`` pre-norm blocks (causal
self-attention written out with matmul and softmax; a GELU MLP), a final
LayerNorm and an untied LM head, GPT-2 style but with PyTorch's default
initialisation (its attention scores are of order 1 from the start, so
leaving out their scale changes its output by some 40% at any step, where
bf16 autocast changes it by 0.5%). No dropout. The keys' part of the
attention's qkv bias has a zero gradient (softmax ignores a constant
added to all of a query's scores), so what AdamW gives it is round-off noise
scaled to the learning rate: that is where two layouts' round-off first
grows beyond tfdiff's fixed rtol 1e-4 (by step ~75 with 1 vs 2 threads,
~30 with one process vs 2 DDP ranks).

Data: made up from ``--seed`` with a generator of its own (model
initialisation never shifts it): each row is a pattern of 2 to 6 random
tokens repeated over the whole row from a random phase, so once a row's
pattern has appeared the rest of it is predictable. No padding, nothing
ignored: every token of every row counts the same, and the loss is the plain
mean of the per-token cross entropy over the batch.

Layouts: every process draws the whole global batch (``--global-batch``
rows) each step, and rank R of W keeps rows [R*B/W, (R+1)*B/W). DDP averages
the ranks' gradients, which is the gradient of the global mean, so one
process and W ranks train the same model on the same data; only the order
of the floating-point sums differs.

Training: AdamW (``--lr``, weight decay 0.1), no warm-up, no clipping.
``torch.manual_seed(seed)`` and ``torch.use_deterministic_algorithms(True)``.

Flags:
  --steps N            optimizer steps (default 200)
  --seed S             seeds the model initialisation and the data (default 0)
  --global-batch B     rows per step over all ranks (default 8; W must divide it)
  --layers/--d-model/--heads/--seq/--vocab
                       the model (default 2, 64, 4, 32, 64)
  --lr X               AdamW's learning rate (default 3e-3)
  --no-qkv-bias        the attention's qkv projection without a bias
  --threads N          torch.set_num_threads(N)
  --autocast bf16      the forward (loss included) under
                       torch.autocast("cpu", dtype=torch.bfloat16)
  --bug NAME@STEP      plant a bug, active from step STEP on (default 0):
      attn-scale       attention scores not scaled by 1/sqrt(d_head)
                       (multiplied by 1.0, so the same ops run)
      ln-bias          the first LayerNorm (blocks.0.ln1) computes with its
                       bias + LN_BIAS_SHIFT (0.01), its parameter unchanged
                       (the shift is added every step, 0.0 before STEP)
      rank-loss-scale  distributed only: rank 1 multiplies its loss by 2
      grad-sum         distributed only: every rank multiplies its loss by
                       the world size, so DDP's average is the sum of the
                       ranks' gradients

Distributed: started by ``python -m torch.distributed.run --nproc_per_node 2
roundoff_train.py ...`` (WORLD_SIZE > 1), gloo backend,
DistributedDataParallel.
"""

import argparse
import contextlib
import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

BUGS = ("attn-scale", "ln-bias", "rank-loss-scale", "grad-sum")
DISTRIBUTED_BUGS = ("rank-loss-scale", "grad-sum")

# What ln-bias adds to blocks.0.ln1's bias: the LayerNorm's outputs have a
# spread of about 1.1, so this moves their mean by under 1% of it -- small
# beside a real change, a hundred times the round-off between thread counts
# (tfdiff names it at its step down to 0.002).
LN_BIAS_SHIFT = 0.01


# ---------------------------------------------------------------- the model


class ShiftedLayerNorm(nn.LayerNorm):
    """nn.LayerNorm computing with bias + bias_shift (0.0 unless ln-bias is on)."""

    def __init__(self, d_model):
        super().__init__(d_model)
        self.bias_shift = 0.0

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias + self.bias_shift, self.eps)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, qkv_bias):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=qkv_bias)
        self.proj = nn.Linear(d_model, d_model)
        self.scale = 1.0 / math.sqrt(self.d_head)  # attn-scale sets 1.0

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # [B, T, C] -> [B, heads, T, d_head]
        q = q.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * self.scale  # [B, heads, T, T]
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v  # [B, heads, T, d_head]
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    def __init__(self, d_model, n_heads, qkv_bias):
        super().__init__()
        self.ln1 = ShiftedLayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, qkv_bias)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class LM(nn.Module):
    def __init__(self, vocab, seq, d_model, n_heads, n_layers, qkv_bias=True):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, qkv_bias) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx, targets):
        # idx, targets: [B, T] token ids; the loss is the mean over all B*T tokens
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


# ----------------------------------------------------------------- the data


def make_rows(gen, n_rows, seq, vocab):
    """n_rows rows of seq + 1 tokens, each a random 2..6-token pattern repeated."""
    rows = torch.empty((n_rows, seq + 1), dtype=torch.long)
    for r in range(n_rows):
        period = int(torch.randint(2, 7, (1,), generator=gen))
        pattern = torch.randint(vocab, (period,), generator=gen)
        phase = int(torch.randint(period, (1,), generator=gen))
        rows[r] = pattern[(torch.arange(seq + 1) + phase) % period]
    return rows


# ----------------------------------------------------------------- training


class BugSwitch:
    """--bug NAME@STEP: which planted bug, and from which step it is on."""

    def __init__(self, spec):
        self.name, self.start = None, 0
        if spec:
            name, _, start = spec.partition("@")
            if name not in BUGS:
                sys.exit(f"roundoff_train.py: unknown bug {name!r} (known: {', '.join(BUGS)})")
            self.name, self.start = name, int(start or 0)

    def on(self, name, step):
        return self.name == name and step >= self.start


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--no-qkv-bias", dest="qkv_bias", action="store_false")
    p.add_argument("--threads", type=int)
    p.add_argument("--autocast", choices=("bf16",))
    p.add_argument("--bug", metavar="NAME@STEP")
    args = p.parse_args()
    if args.steps < 0 or args.global_batch < 1:
        p.error("--steps must be >= 0 and --global-batch >= 1")
    return args


def main():
    args = parse_args()
    bug = BugSwitch(args.bug)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = 0
    if world > 1:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    elif bug.name in DISTRIBUTED_BUGS:
        sys.exit(f"roundoff_train.py: --bug {bug.name} needs torch.distributed.run with 2 or more processes")
    if args.global_batch % world:
        sys.exit(f"roundoff_train.py: --global-batch {args.global_batch} is not a multiple of {world} ranks")
    rows_per_rank = args.global_batch // world

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    model = LM(args.vocab, args.seq, args.d_model, args.heads, args.layers, args.qkv_bias)
    train_model = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    data_gen = torch.Generator().manual_seed(args.seed)  # the data's own RNG

    for step in range(args.steps):
        # Every rank draws the whole global batch (the generator stays in
        # step across layouts) and keeps its rows.
        rows = make_rows(data_gen, args.global_batch, args.seq, args.vocab)
        rows = rows[rank * rows_per_rank : (rank + 1) * rows_per_rank]
        x, y = rows[:, :-1], rows[:, 1:]

        for block in model.blocks:
            block.attn.scale = 1.0 if bug.on("attn-scale", step) else 1.0 / math.sqrt(block.attn.d_head)
        model.blocks[0].ln1.bias_shift = LN_BIAS_SHIFT if bug.on("ln-bias", step) else 0.0
        loss_factor = 1.0
        if bug.on("rank-loss-scale", step) and rank == 1:
            loss_factor = 2.0
        if bug.on("grad-sum", step):
            loss_factor = float(world)

        optimizer.zero_grad(set_to_none=True)
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if args.autocast == "bf16"
                    else contextlib.nullcontext())
        with autocast:
            loss = train_model(x, y)
        if loss_factor != 1.0:
            loss = loss * loss_factor
        loss.backward()
        optimizer.step()

        prefix = f"rank {rank} " if world > 1 else ""
        # One write per line, so two ranks sharing a terminal don't interleave.
        sys.stdout.write(f"{prefix}step {step} loss {loss.item()!r}\n")
        sys.stdout.flush()

    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
