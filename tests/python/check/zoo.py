#!/usr/bin/env python3
"""A zoo of silent training errors, one small CPU PyTorch run per case.

    python zoo.py --case NAME        (python zoo.py --list: every case)

Each published class of silent training error has a BUG case, and an OK
case (`ok-<class>`) where the healthy twin is not one of the `healthy-*`
runs. The `healthy-*` cases are the false-alarm suite: `tfdump --check` must
find nothing in them. Ordinary user code: nothing here knows about tftrace.

Every optimizer step prints ``step N loss X`` (X the loss's full ``repr``),
evaluations print ``eval ...`` lines, so an untraced and a traced run can be
compared bit for bit. The wall time after ``import torch`` goes to stderr.
Deterministic: ``torch.manual_seed`` for the model, a generator of its own
for the data (so a case that draws more random numbers at initialisation
never shifts the data). Each case runs in well under 1.5 s with
OMP_NUM_THREADS=1 (healthy-compile excepted: inductor compiles first).

Language model: a GPT in the style of nanoGPT (vocab 64, d 32, 2 heads,
2 blocks, T 16, batch 4) whose forward follows Hugging Face's
*ForCausalLM: ``forward(input_ids, labels=None, attention_mask=None)``
shifts the labels itself (logits[:, :-1] against labels[:, 1:],
ignore_index -100) and returns a dict with ``logits`` and ``loss``. Its
attention holds the causal mask as a buffer ``bias`` [1, 1, T, T]. Data:
rows of an arithmetic progression mod 64 (start and stride random per row),
so the next token follows from the two before it and the loss falls.
Training: AdamW (lr 1e-2, weight decay 0.01), linear warm-up over 4 steps
then cosine decay to a tenth (LambdaLR), clip_grad_norm_(..., 1.0).

Vision: a CNN (conv 3->16, BatchNorm2d, ReLU, max-pool, dropout 0.25,
linear to 10 classes) on 8x8 RGB images: a class's fixed pattern plus noise,
standardised. SGD with momentum, the same schedule and clipping.
"""

import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

T0 = time.perf_counter()

VOCAB = 64
D_MODEL = 32
N_HEAD = 2
N_LAYER = 2
SEQ = 16
BATCH = 4
LR = 1e-2
WARMUP = 4
CLIP = 1.0
IGNORE = -100
PAD = 0


# ---------------------------------------------------------------- the LM


class Knobs:
    """What a case changes in the model and the loop (defaults: healthy)."""

    def __init__(self, **kw):
        self.steps = 12
        self.batch = BATCH
        self.lr = LR
        self.dropout = 0.0
        self.dropout_in_eval = False  # F.dropout(training=True) hard-coded
        self.mask_diagonal = 0        # tril(..., diagonal=): 1 sees t+1
        self.detach_after = None      # block index whose output is detached
        self.loss_dtype = torch.float32
        self.init_calls = 1           # times _init_weights runs per module
        self.zero_pos = False
        self.zero_fc = False
        for k, v in kw.items():
            if not hasattr(self, k):
                raise AttributeError(k)
            setattr(self, k, v)


def _init_weights(module):
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


class CausalSelfAttention(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.c_attn = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.c_proj = nn.Linear(D_MODEL, D_MODEL)
        self.p = k.dropout
        mask = torch.tril(torch.ones(SEQ, SEQ), diagonal=k.mask_diagonal)
        self.register_buffer("bias", mask.view(1, 1, SEQ, SEQ))

    def forward(self, x, attention_mask=None):
        B, T, C = x.shape  # x is (B, T, C)
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // N_HEAD
        q = q.view(B, T, N_HEAD, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, N_HEAD, hs).transpose(1, 2)
        v = v.view(B, T, N_HEAD, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        if attention_mask is not None:  # (B, T): 0 at padded keys
            key_pad = attention_mask[:, None, None, :] == 0
            att = att.masked_fill(key_pad, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        y = self.c_proj(y)
        return F.dropout(y, self.p, training=self.training)


class MLP(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.fc = nn.Linear(D_MODEL, 4 * D_MODEL)
        self.c_proj = nn.Linear(4 * D_MODEL, D_MODEL)
        self.p = k.dropout
        self.dropout_in_eval = k.dropout_in_eval

    def forward(self, x):
        x = self.c_proj(F.gelu(self.fc(x)))
        if self.dropout_in_eval:
            return F.dropout(x, self.p, training=True)  # the bug
        return F.dropout(x, self.p, training=self.training)


class Block(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D_MODEL)
        self.attn = CausalSelfAttention(k)
        self.ln_2 = nn.LayerNorm(D_MODEL)
        self.mlp = MLP(k)
        if k.init_calls > 2:  # reinit-many: each block initialises itself too
            self.apply(_init_weights)

    def forward(self, x, attention_mask=None):
        x = x + self.attn(self.ln_1(x), attention_mask)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.tok_emb = nn.Embedding(VOCAB, D_MODEL)
        self.pos_emb = nn.Embedding(SEQ, D_MODEL)
        self.blocks = nn.ModuleList([Block(k) for _ in range(N_LAYER)])
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        self.apply(_init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * N_LAYER))
        if k.zero_pos:  # healthy: a learned position table may start at 0
            nn.init.zeros_(self.pos_emb.weight)
        if k.zero_fc:   # the bug: the MLP's input matrix zeroed
            for block in self.blocks:
                nn.init.zeros_(block.mlp.fc.weight)

    def forward(self, input_ids, labels=None, attention_mask=None):
        B, T = input_ids.shape  # (B, T) token ids
        pos = torch.arange(T, device=input_ids.device)
        x = self.tok_emb(input_ids) + self.pos_emb(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, attention_mask)
            if self.k.detach_after == i:
                x = x.detach()  # the bug: no gradient reaches below
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        out = {"logits": logits}
        if labels is not None:
            shift_logits = logits[:, :-1, :].to(self.k.loss_dtype)
            shift_labels = labels[:, 1:]
            out["loss"] = F.cross_entropy(
                shift_logits.reshape(-1, VOCAB), shift_labels.reshape(-1),
                ignore_index=IGNORE)
        return out


class FreezingGPT(GPT):
    """A GPT whose train()/eval() also set requires_grad (no autograd state
    kept in eval). `frozen` names the parameters' prefix that must stay
    frozen; `forget_freeze` is the bug: train() unfreezes everything."""

    def __init__(self, k, frozen, forget_freeze):
        super().__init__(k)
        self.frozen = frozen
        self.forget_freeze = forget_freeze

    def train(self, mode=True):
        super().train(mode)
        for name, p in self.named_parameters():
            keep_frozen = (not self.forget_freeze
                           and name.startswith(self.frozen))
            p.requires_grad_(mode and not keep_frozen)
        return self


# ---------------------------------------------------------------- LM data


def lm_rows(n, gen):
    """n rows of SEQ tokens: (start + stride * t) mod VOCAB, int64."""
    start = torch.randint(0, VOCAB, (n, 1), generator=gen)
    stride = torch.randint(1, 8, (n, 1), generator=gen)
    t = torch.arange(SEQ).view(1, SEQ)
    return (start + stride * t) % VOCAB


def lm_loader(batch, n=256):
    gen = torch.Generator().manual_seed(1234)
    return DataLoader(TensorDataset(lm_rows(n, gen)), batch_size=batch,
                      shuffle=False)


def padded_batches(steps, batch):
    """Rows of 9..16 real tokens, each batch padded to its own longest row:
    (input_ids, attention_mask, labels) with PAD and -100 at the padding."""
    gen = torch.Generator().manual_seed(4321)
    for _ in range(steps):
        rows = lm_rows(batch, gen)
        lens = torch.randint(9, SEQ + 1, (batch,), generator=gen)
        T = int(lens.max())
        ids = rows[:, :T].clone()
        mask = (torch.arange(T).view(1, T) < lens.view(-1, 1)).long()
        ids[mask == 0] = PAD
        labels = ids.masked_fill(mask == 0, IGNORE)
        yield ids, mask, labels


def val_batch():
    gen = torch.Generator().manual_seed(999)
    return lm_rows(8, gen)


# ---------------------------------------------------------------- schedules


def warmup_cosine(total, warmup=WARMUP, floor=0.1):
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        prog = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * prog))
    return f


def linear_no_warmup(total):
    """get_linear_schedule_with_warmup(num_warmup_steps=0): the Hugging Face
    Trainer's default."""
    return lambda step: max(0.0, (total - step) / total)


# ---------------------------------------------------------------- LM loop


def make_lm(k):
    torch.manual_seed(0)
    model = GPT(k)
    if k.init_calls > 1:  # reinit-many: the caller initialises again
        model.apply(_init_weights)
    return model


def lm_eval(model, tag):
    ids = val_batch()
    model.eval()
    with torch.no_grad():
        a = model(ids, labels=ids)
        b = model(ids, labels=ids)
    same = torch.equal(a["logits"], b["logits"])
    print(f"eval {tag} loss {a['loss'].item()!r} {b['loss'].item()!r} "
          f"same {same}")
    model.train()


def train_lm(k, model=None, opt=None, sched=None, bug=None, eval_at=None):
    """The training loop every LM case shares; `bug` names a planted loop
    bug (the model's are in `k`)."""
    model = model if model is not None else make_lm(k)
    if opt is None:
        opt = torch.optim.AdamW(model.parameters(), lr=k.lr,
                                weight_decay=0.01)
    if sched is None:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(k.steps))
    loader = lm_loader(k.batch)
    it = iter(loader)
    scaler = None
    if bug in ("clip-before-unscale", "ok-amp"):
        scaler = torch.amp.GradScaler("cpu")
    for step in range(k.steps):
        if bug == "loader-stuck":
            (ids,) = next(iter(loader))  # a fresh iterator: the first batch
        else:
            (ids,) = next(it)
        labels = ids
        if bug == "labels-preshifted":
            pad = torch.full((ids.shape[0], 1), IGNORE, dtype=ids.dtype)
            labels = torch.cat([ids[:, 1:], pad], dim=1)
        if bug == "labels-dtype-crash" and step >= 6:
            labels = labels.int()  # a collate that changed dtype
        if bug == "zeroed-inputs" and step >= 5:
            ids = torch.zeros_like(ids)  # a .to() that never copied
            labels = ids
        if bug == "lr-restart" and step == 30:
            # a second phase that builds its scheduler again
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, warmup_cosine(k.steps))
        if bug == "zeroed-params" and step == 5:
            model, opt, sched = transfer_buggy(model, k)

        if bug != "grads-not-zeroed":
            opt.zero_grad(set_to_none=True)
        if scaler is not None:
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(ids, labels=labels)["loss"]
            scaler.scale(loss).backward()
            if bug == "ok-amp":
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            if bug == "clip-before-unscale":
                scaler.unscale_(opt)  # too late: the clip saw scaled grads
            scaler.step(opt)
            scaler.update()
        else:
            if bug == "healthy-amp":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(ids, labels=labels)["loss"]
            else:
                loss = model(ids, labels=labels)["loss"]
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
        sched.step()
        print(f"step {step} loss {loss.item()!r}")
        if eval_at is not None and step == eval_at:
            lm_eval(model, f"after-step-{step}")
    return model


def transfer_buggy(model, k):
    """Rebuild the model for a second stage and move the weights over
    through a staging buffer that is never filled: every weight is zero."""
    torch.manual_seed(1)
    new = GPT(k)
    with torch.no_grad():
        for p, q in zip(new.parameters(), model.parameters()):
            staged = torch.zeros_like(q)  # staged.copy_(q) forgotten
            p.copy_(staged)
    opt = torch.optim.AdamW(new.parameters(), lr=k.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(k.steps))
    new.train()
    return new, opt, sched


# ---------------------------------------------------------------- LM cases


def case_healthy_lm():
    train_lm(Knobs(steps=40))


def case_healthy_lm_noisy():
    train_lm(Knobs(steps=60, batch=2))


def case_healthy_pad():
    k = Knobs(steps=12)
    model = make_lm(k)
    opt = torch.optim.AdamW(model.parameters(), lr=k.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(k.steps))
    model.train()
    for step, (ids, mask, labels) in enumerate(padded_batches(k.steps,
                                                              k.batch)):
        opt.zero_grad(set_to_none=True)
        loss = model(ids, labels=labels, attention_mask=mask)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        sched.step()
        print(f"step {step} loss {loss.item()!r} T {ids.shape[1]}")


def case_healthy_hfsched():
    # A lower peak than the warmed-up runs, as one picks without warm-up
    # (at 1e-2 Adam's first steps double the small c_proj matrices).
    k = Knobs(steps=40, lr=3e-3)
    model = make_lm(k)
    opt = torch.optim.AdamW(model.parameters(), lr=k.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_no_warmup(k.steps))
    train_lm(k, model, opt, sched)


def case_healthy_zero_pos():
    train_lm(Knobs(steps=40, zero_pos=True))


def case_healthy_amp():
    train_lm(Knobs(), bug="healthy-amp")


def case_healthy_compile():
    k = Knobs(steps=8)
    model = make_lm(k)
    opt = torch.optim.AdamW(model.parameters(), lr=k.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(k.steps))
    cmodel = torch.compile(model)
    loader = lm_loader(k.batch)
    it = iter(loader)
    cmodel.train()
    for step in range(k.steps):
        (ids,) = next(it)
        opt.zero_grad(set_to_none=True)
        loss = cmodel(ids, labels=ids)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        sched.step()
        print(f"step {step} loss {loss.item()!r}")


def case_opt_frozen_only():
    # A linear probe gone wrong: the head frozen instead of the backbone,
    # and the optimizer over the head alone. Nothing ever changes.
    k = Knobs()
    model = make_lm(k)
    model.lm_head.requires_grad_(False)
    opt = torch.optim.AdamW(model.lm_head.parameters(), lr=k.lr,
                            weight_decay=0.01)
    train_lm(k, model, opt)


def case_opt_wrong_group():
    # Layer-wise learning rates: the blocks' group takes its lr from a
    # setting whose default is 0.
    k = Knobs()
    model = make_lm(k)
    block_lr = 0.0
    head = [p for n, p in model.named_parameters() if not n.startswith(
        ("blocks.", "ln_f."))]
    body = [p for n, p in model.named_parameters() if n.startswith(
        ("blocks.", "ln_f."))]
    opt = torch.optim.AdamW([{"params": head, "lr": k.lr},
                             {"params": body, "lr": block_lr}],
                            weight_decay=0.01)
    train_lm(k, model, opt)


def frozen_run(forget_freeze):
    # Fine-tuning with the first block frozen; a validation pass after step
    # 5 calls eval() and train(), and the model's train() sets
    # requires_grad.
    k = Knobs()
    torch.manual_seed(0)
    model = FreezingGPT(k, frozen="blocks.0.", forget_freeze=forget_freeze)
    model.train()
    for p in model.blocks[0].parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=k.lr, weight_decay=0.01)
    train_lm(k, model, opt, eval_at=5)


def case_frozen_trains():
    frozen_run(forget_freeze=True)


def case_ok_frozen():
    frozen_run(forget_freeze=False)


def case_reinit_many():
    train_lm(Knobs(init_calls=3))


def case_init_zero():
    train_lm(Knobs(zero_fc=True))


def case_eval_dropout():
    train_lm(Knobs(dropout=0.1, dropout_in_eval=True), eval_at=5)


def case_ok_eval():
    train_lm(Knobs(dropout=0.1), eval_at=5)


def case_zeroed_params():
    train_lm(Knobs(), bug="zeroed-params")


def case_zeroed_inputs():
    train_lm(Knobs(), bug="zeroed-inputs")


def case_labels_preshifted():
    train_lm(Knobs(), bug="labels-preshifted")


def case_labels_dtype_crash():
    train_lm(Knobs(), bug="labels-dtype-crash")


def case_lr_restart():
    train_lm(Knobs(steps=40), bug="lr-restart")


def case_loader_stuck():
    train_lm(Knobs(), bug="loader-stuck")


def case_mask_future():
    train_lm(Knobs(mask_diagonal=1))


def case_detached_hidden():
    train_lm(Knobs(detach_after=0))


def case_loss_bf16():
    train_lm(Knobs(loss_dtype=torch.bfloat16))


def case_clip_before_unscale():
    train_lm(Knobs(), bug="clip-before-unscale")


def case_ok_amp():
    train_lm(Knobs(), bug="ok-amp")


def case_grads_not_zeroed():
    # 24 steps: a curve of gradient zero counts needs 20 (min-steps)
    train_lm(Knobs(steps=24), bug="grads-not-zeroed")


# ---------------------------------------------------------------- vision


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, pixel_values, labels=None):
        h = F.relu(self.bn(self.conv(pixel_values)))  # (B, 16, 8, 8)
        h = self.drop(F.max_pool2d(h, 2))             # (B, 16, 4, 4)
        logits = self.fc(h.flatten(1))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        return out


def images(n, gen, raw):
    """n images (n, 3, 8, 8) and labels: a class pattern plus noise;
    standardised, or (raw) 0..255 pixel values as a decoder gives them."""
    protos = torch.randn(10, 3, 8, 8, generator=torch.Generator()
                         .manual_seed(77))
    y = torch.randint(0, 10, (n,), generator=gen)
    x = protos[y] + 0.8 * torch.randn(n, 3, 8, 8, generator=gen)
    if raw:
        x = ((x * 0.25 + 0.5).clamp(0, 1) * 255).round()
    return x, y


# the loss as a module of its own (pytorch/examples' criterion): it stays in
# training mode through model.eval() and sees the eval batch's size
CRITERION = torch.nn.CrossEntropyLoss()


def vision_eval(model, x, y, tag):
    model.eval()
    with torch.no_grad():
        out = model(x)
        loss = CRITERION(out["logits"], y)
    acc = (out["logits"].argmax(1) == y).float().mean().item()
    print(f"eval {tag} loss {loss.item()!r} acc {acc!r} "
          f"absmax {out['logits'].abs().max().item()!r}")
    model.train()


def train_vision(steps, raw, eval_first, eval_every):
    torch.manual_seed(0)
    model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(steps))
    gen = torch.Generator().manual_seed(55)
    vx, vy = images(32, gen, raw)
    if eval_first:  # a baseline before training: BN's stats are 0 and 1
        vision_eval(model, vx, vy, "baseline")
    model.train()
    for step in range(steps):
        x, y = images(16, gen, raw)
        opt.zero_grad(set_to_none=True)
        loss = CRITERION(model(x)["logits"], y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        sched.step()
        print(f"step {step} loss {loss.item()!r}")
        if eval_every and (step + 1) % eval_every == 0:
            vision_eval(model, vx, vy, f"after-step-{step}")


def case_healthy_vision():
    train_vision(20, raw=False, eval_first=False, eval_every=5)


def case_eval_first():
    train_vision(12, raw=True, eval_first=True, eval_every=0)


# ---------------------------------------------------------------- main


CASES = {name[len("case_"):].replace("_", "-"): fn
         for name, fn in sorted(globals().items())
         if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--list", action="store_true", help="print the cases")
    args = ap.parse_args()
    if args.list or not args.case:
        print("\n".join(sorted(CASES)))
        return
    try:
        CASES[args.case]()
    finally:
        print(f"time {time.perf_counter() - T0:.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
