#!/usr/bin/env python3
"""A small GPT trained on a synthetic byte-level corpus, with planted bugs.

Ordinary PyTorch user code: nothing in it knows about tftrace (unless
--import-tftrace is given). It is what tftrace's PyTorch tests and
benchmark record:

    tftrace --torch -- python examples/pytorch/gpt_train.py --steps 6
    tftrace --torch -- python examples/pytorch/gpt_train.py --steps 6 --bug no-attn-scale@2

Every step prints ``step N loss X`` (``rank R step N loss X`` when
distributed), X being the full ``repr`` of the loss, so two runs can be
compared bit for bit. Same seed, same flags: identical output.

Model: token and position embeddings, ``--layers`` pre-norm blocks
(causal self-attention written out with matmul and softmax, a causal mask
combined with a padding mask; a GELU MLP), a final LayerNorm and an untied
LM head. Dropout is 0.

Data: made up in the script from ``--seed`` with a generator of its own
(so model initialisation never shifts it): each sequence is BOS, one of
16 short words repeated with spaces ("cat cat cat ca"), EOS, then PAD up to
the sequence length; lengths vary. The vocabulary is bytes (256) with
PAD=0, BOS=1, EOS=2. Targets are the inputs shifted by one, -100 (ignored)
at padding. The words' letters and, once a row's word has appeared, the rest
of the row are predictable, so the loss falls.

Training: AdamW (lr 3e-3, weight decay 0.1), linear warm-up over 5 steps,
gradients clipped to norm 1.0, ``--grad-accum`` backward passes per step.
``torch.manual_seed(seed)`` and ``torch.use_deterministic_algorithms(True)``.

Flags:
  --steps N            optimizer steps (default 6)
  --seed S             seeds the model initialisation and the data (default 0)
  --size tiny|bench    preset: tiny (2 layers, d 64, T 32, B 4; a few seconds)
                       or bench (4 layers, d 128, T 64, B 8; ~70 ms a step on
                       2 cores of an EPYC VM)
  --layers/--d-model/--heads/--seq/--batch
                       override the preset (--batch is per rank)
  --threads N          torch.set_num_threads(N)
  --grad-accum K       K micro-batches (forward + backward) per optimizer step;
                       the printed loss is their mean
  --device cpu|cuda    where the model runs (default cpu; under torchrun,
                       cuda uses the device LOCAL_RANK)
  --bug NAME[@STEP]    plant a bug, active from step STEP on (default 0):
      labels-not-shifted   targets are the inputs, not the next token
      causal-off-by-one    the causal mask lets position t see t+1
      zero-pos-emb         position embeddings zero-initialised (at STEP > 0:
                           zeroed at the start of step STEP)
      loss-over-padding    padding positions are not ignored by the loss
      grads-not-zeroed     optimizer.zero_grad() is skipped
      no-attn-scale        attention scores not scaled by 1/sqrt(d_head)
                           (multiplied by 1.0, so the same ops run)
      skip-allreduce       distributed only: from step STEP on rank 1 runs its
                           backward under ddp.no_sync(), skipping the gradient
                           all-reduce; rank 0 waits in step STEP's all-reduce
                           for a peer that never comes (rank 1 finishes its
                           steps and leaves): a hang, or gloo's error when
                           rank 1's connection closes
      no-param-broadcast   distributed only: each rank seeds the model with
                           seed + rank and DDP is built with init_sync=False,
                           so the replicas start different (STEP is ignored)
  --compile            train torch.compile(model) (inductor; needs a C++
                       compiler on CPU): the model's forward and backward
                       run compiled, the optimizer eagerly
  --time-out FILE      write the wall time of every step as JSON
                       ({"step_s": [...], ...}); rank 0 only
  --import-tftrace     ``import tftrace`` and call ``tftrace.step(n)`` at the
                       start of every step (when the package has it)
  --hand-hooks         what one writes without tftrace: a forward hook on every
                       module computing min/max/mean/std/any-NaN of each tensor
                       output; written as JSON lines to --hand-hooks-out
  --hand-hooks-out F   (default hand_hooks.jsonl)
  --debug-mode         run under torch.utils._debug_mode.DebugMode, every op's
                       outputs hashed (torch.hash_tensor), nn.Module calls and
                       "step N" annotations recorded; logs saved with
                       DebugMode.save_logs to --debug-mode-out
  --debug-mode-out F   (default debug_mode.json)
  --detect-anomaly     every step under torch.autograd.detect_anomaly()
  --sync-debug         with --device cuda: the steps run under
                       torch.cuda.set_sync_debug_mode("warn"), every
                       synchronising CUDA call warned about on stderr (each
                       one, not once per place); no effect on the CPU

Distributed: started by ``torchrun --nproc_per_node 2 gpt_train.py ...``
(WORLD_SIZE > 1), it uses the gloo backend (nccl with --device cuda), wraps
the model in DistributedDataParallel and gives each rank its own shard of
the global batch (--batch rows per rank). The output files of --hand-hooks
and --debug-mode get a ``.rankR`` suffix.
"""

import argparse
import contextlib
import json
import math
import os
import sys
import time
import warnings

# cuBLAS needs this before its first use to be deterministic (harmless on CPU).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

PAD, BOS, EOS = 0, 1, 2
VOCAB = 256           # byte-level: token id = byte value
IGNORE = -100         # cross_entropy's ignore_index

SIZES = {
    "tiny": dict(layers=2, d_model=64, heads=4, seq=32, batch=4),
    "bench": dict(layers=4, d_model=128, heads=4, seq=64, batch=8),
}

BUGS = (
    "labels-not-shifted",
    "causal-off-by-one",
    "zero-pos-emb",
    "loss-over-padding",
    "grads-not-zeroed",
    "no-attn-scale",
    "skip-allreduce",
    "no-param-broadcast",
)

LR = 3e-3
WARMUP_STEPS = 5
CLIP_NORM = 1.0


# ---------------------------------------------------------------- the model


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        # Two plain settings (the --bug switch changes them):
        self.scale = 1.0 / math.sqrt(self.d_head)  # scores are scaled by this
        self.mask_diagonal = 0  # query t may attend keys <= t + mask_diagonal

    def forward(self, x, key_is_pad):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # [B, T, C] -> [B, heads, T, d_head]
        q = q.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

        scores = (q @ k.transpose(-2, -1)) * self.scale  # [B, heads, T, T]

        # A query may see earlier keys (causal) that are not padding.
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril(self.mask_diagonal)
        allowed = causal[None, None, :, :] & ~key_is_pad[:, None, None, :]
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = F.softmax(scores, dim=-1)

        y = probs @ v  # [B, heads, T, d_head]
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x, key_is_pad):
        x = x + self.attn(self.ln1(x), key_is_pad)
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, seq, d_model, n_heads, n_layers):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        key_is_pad = idx == PAD
        for block in self.blocks:
            x = block(x, key_is_pad)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=IGNORE)


# ----------------------------------------------------------------- the data


# The words the corpus repeats (so a word's letters are learnable, and once
# a row's word has appeared the rest of the row is too).
WORDS = ("ab", "cat", "dog", "sun", "moon", "tree", "fish", "bird",
         "rain", "snow", "wind", "leaf", "rock", "star", "sea", "sky")


def make_rows(gen, n_rows, seq):
    """n_rows token rows of length seq + 1: BOS, a word repeated, EOS, PAD..."""
    rows = torch.full((n_rows, seq + 1), PAD, dtype=torch.long)
    for r in range(n_rows):
        word = WORDS[int(torch.randint(len(WORDS), (1,), generator=gen))]
        # Tokens in the row, BOS and EOS included: at least half the length.
        length = int(torch.randint((seq + 1) // 2, seq + 2, (1,), generator=gen))
        unit = torch.tensor(list((word + " ").encode()))
        body = unit.repeat(seq // len(unit) + 1)[: length - 2]
        rows[r, 0] = BOS
        rows[r, 1 : length - 1] = body
        rows[r, length - 1] = EOS
    return rows


def split_inputs_targets(rows, shift=True, ignore_padding=True):
    """Inputs and next-token targets from rows of seq + 1 tokens."""
    inputs = rows[:, :-1]
    targets = rows[:, 1:].clone() if shift else inputs.clone()
    if ignore_padding:
        targets[targets == PAD] = IGNORE
    return inputs, targets


# ---------------------------------------------------------------- the bugs


class BugSwitch:
    """--bug NAME[@STEP]: which planted bug, and from which step it is on."""

    def __init__(self, spec):
        self.name, self.start = None, 0
        if spec:
            name, _, start = spec.partition("@")
            if name not in BUGS:
                sys.exit(f"gpt_train.py: unknown bug {name!r} (known: {', '.join(BUGS)})")
            self.name, self.start = name, int(start or 0)

    def on(self, name, step):
        return self.name == name and step >= self.start


# ------------------------------------------------------------- hand hooks


class HandHooks:
    """Per-module output statistics, the way one instruments a model by hand."""

    def __init__(self, model):
        self.records = []
        self.step = 0
        self.micro = 0
        for name, module in model.named_modules():
            module.register_forward_hook(self._hook(name or "model"))

    def _hook(self, name):
        def hook(module, inputs, output):
            outputs = output if isinstance(output, (tuple, list)) else (output,)
            for i, t in enumerate(outputs):
                if not isinstance(t, torch.Tensor):
                    continue
                with torch.no_grad():
                    f = t.detach().float()
                    self.records.append({
                        "step": self.step, "micro": self.micro, "module": name,
                        "output": i, "shape": list(t.shape),
                        "min": f.min().item(), "max": f.max().item(),
                        "mean": f.mean().item(),
                        "std": f.std().item() if f.numel() > 1 else 0.0,
                        "nan": bool(f.isnan().any().item()),
                    })
        return hook

    def write(self, path):
        with open(path, "w") as out:
            for rec in self.records:
                out.write(json.dumps(rec) + "\n")


# ----------------------------------------------------------------- training


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=LR, help="peak learning rate (default %(default)s)")
    p.add_argument("--size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--layers", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--threads", type=int)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--bug", metavar="NAME[@STEP]")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--time-out", metavar="FILE")
    p.add_argument("--import-tftrace", action="store_true")
    p.add_argument("--hand-hooks", action="store_true")
    p.add_argument("--hand-hooks-out", default="hand_hooks.jsonl")
    p.add_argument("--debug-mode", action="store_true")
    p.add_argument("--debug-mode-out", default="debug_mode.json")
    p.add_argument("--detect-anomaly", action="store_true")
    p.add_argument("--sync-debug", action="store_true")
    args = p.parse_args()
    for key, value in SIZES[args.size].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.grad_accum < 1 or args.steps < 0:
        p.error("--grad-accum must be >= 1 and --steps >= 0")
    return args


def per_rank(path, rank, world):
    return f"{path}.rank{rank}" if world > 1 else path


def main():
    args = parse_args()
    bug = BugSwitch(args.bug)

    tftrace_step = None
    if args.import_tftrace:
        try:
            import tftrace
        except ImportError:  # not installed: use the copy in this repository
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "..", "..", "python"))
            import tftrace
        tftrace_step = getattr(tftrace, "step", None)

    # Distributed when started by torchrun with more than one process.
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = 0
    if world > 1:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        rank = dist.get_rank()
    elif bug.name in ("skip-allreduce", "no-param-broadcast"):
        sys.exit(f"gpt_train.py: --bug {bug.name} needs torchrun with 2 or more processes")

    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.use_deterministic_algorithms(True)
    # Every rank builds the same initial model (DDP would broadcast rank 0's
    # anyway), unless the replicas are meant to start different.
    broadcast_params = bug.name != "no-param-broadcast"  # an init-time bug: STEP ignored
    torch.manual_seed(args.seed if broadcast_params else args.seed + rank)
    model = GPT(VOCAB, args.seq, args.d_model, args.heads, args.layers).to(device)
    if bug.on("zero-pos-emb", 0):
        nn.init.zeros_(model.pos_emb.weight)  # after the normal init: same RNG stream

    hooks = HandHooks(model) if args.hand_hooks else None

    ddp = None
    if world > 1:
        ddp = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            init_sync=broadcast_params)
    train_model = ddp if ddp is not None else model
    if args.compile:
        train_model = torch.compile(train_model)

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    data_gen = torch.Generator().manual_seed(args.seed)  # the data's own RNG

    debug_mode = None
    outer = contextlib.ExitStack()
    if args.debug_mode:
        try:
            from torch.utils._debug_mode import DebugMode
        except ImportError:
            sys.exit(f"gpt_train.py: --debug-mode: torch {torch.__version__} has no "
                     "torch.utils._debug_mode.DebugMode")
        debug_mode = outer.enter_context(DebugMode(record_nn_module=True))
        if hasattr(DebugMode, "log_tensor_hashes"):  # bitwise hashes of every op's outputs
            outer.enter_context(DebugMode.log_tensor_hashes(hash_fn="hash_tensor"))
        else:
            print("gpt_train.py: this DebugMode cannot hash tensors; logging ops only",
                  file=sys.stderr)

    if args.sync_debug and device.type == "cuda":
        # Warn at every synchronising call of the steps, each time.
        warnings.simplefilter("always")
        outer.callback(torch.cuda.set_sync_debug_mode, 0)
        torch.cuda.set_sync_debug_mode("warn")

    step_times = []
    with outer:
        for step in range(args.steps):
            if tftrace_step is not None:
                tftrace_step(step)
            if debug_mode is not None:
                DebugMode._annotate(f"step {step}")

            # This step's micro-batches: every rank draws the whole global
            # batch (so the generator stays in step) and keeps its rows.
            micro_batches = []
            for _ in range(args.grad_accum):
                rows = make_rows(data_gen, args.batch * world, args.seq)
                rows = rows[rank * args.batch : (rank + 1) * args.batch]
                x, y = split_inputs_targets(
                    rows, shift=not bug.on("labels-not-shifted", step),
                    ignore_padding=not bug.on("loss-over-padding", step))
                micro_batches.append((x.to(device), y.to(device)))

            # Planted bugs in the model turn on at their step.
            for block in model.blocks:
                block.attn.mask_diagonal = 1 if bug.on("causal-off-by-one", step) else 0
                block.attn.scale = (1.0 if bug.on("no-attn-scale", step)
                                    else 1.0 / math.sqrt(block.attn.d_head))
            if bug.name == "zero-pos-emb" and step == bug.start and step > 0:
                with torch.no_grad():
                    model.pos_emb.weight.zero_()

            t0 = time.perf_counter()
            lr = args.lr * min(1.0, (step + 1) / WARMUP_STEPS)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if not bug.on("grads-not-zeroed", step):
                optimizer.zero_grad(set_to_none=True)

            anomaly = (torch.autograd.detect_anomaly() if args.detect_anomaly
                       else contextlib.nullcontext())
            loss_sum = 0.0
            with anomaly:
                for micro, (x, y) in enumerate(micro_batches):
                    if hooks is not None:
                        hooks.step, hooks.micro = step, micro
                    # DDP all-reduces the gradients in the last backward only.
                    sync = micro == args.grad_accum - 1
                    if bug.on("skip-allreduce", step) and rank == 1:
                        sync = False
                    no_sync = (ddp.no_sync() if ddp is not None and not sync
                               else contextlib.nullcontext())
                    with no_sync:
                        loss = train_model(x, y)
                        (loss / args.grad_accum).backward()
                    loss_sum += loss.item()

            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
            optimizer.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            step_times.append(time.perf_counter() - t0)

            mean_loss = loss_sum / args.grad_accum
            prefix = f"rank {rank} " if world > 1 else ""
            # One write per line, so two ranks sharing a terminal don't interleave.
            sys.stdout.write(f"{prefix}step {step} loss {mean_loss!r}\n")
            sys.stdout.flush()

    if hooks is not None:
        hooks.write(per_rank(args.hand_hooks_out, rank, world))
    if debug_mode is not None:
        path = per_rank(args.debug_mode_out, rank, world)
        if hasattr(DebugMode, "save_logs"):
            DebugMode.save_logs(debug_mode.logs, path)  # JSON; DebugMode.load_logs reads it
        else:
            with open(path, "w") as out:
                out.write(debug_mode.debug_string() + "\n")
    if args.time_out and rank == 0:
        with open(args.time_out, "w") as out:
            json.dump({"step_s": step_times, "size": args.size, "layers": args.layers,
                       "d_model": args.d_model, "seq": args.seq, "batch": args.batch,
                       "grad_accum": args.grad_accum, "threads": torch.get_num_threads(),
                       "world": world}, out)
            out.write("\n")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
