"""torch_train.py — a small PyTorch training loop for the GPU checks
(tests/gpu/run-gpu-checks.sh): a two-layer MLP plus a batched matmul on
the GPU, SGD, STEPS steps, each an NVTX range named "step" (with "fwd"
and "bwd" ranges inside), deterministic (fixed seeds, no TF32,
deterministic algorithms). --change S adds 0.5 to one weight at the start
of step S: the difference tfdiff must find at step S. --dist also
all-reduces the gradients through torch.distributed (NCCL, one rank).
Prints one loss per step; nothing else on stdout.
"""
import argparse
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--change", type=int, default=-1)
p.add_argument("--dist", action="store_true")
a = p.parse_args()

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.use_deterministic_algorithms(True)
dev = torch.device("cuda:0")
if a.dist:
    import torch.distributed as dist
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29531", rank=0, world_size=1)

model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).to(dev)
mix = torch.randn(4, 128, 16, generator=torch.Generator().manual_seed(1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(2)
xs = [torch.randn(32, 64, generator=g).to(dev) for _ in range(a.steps)]
ys = [torch.randint(0, 10, (32,), generator=g).to(dev) for _ in range(a.steps)]
nvtx = torch.cuda.nvtx
for step in range(a.steps):
    nvtx.range_push("step")
    if step == a.change:
        with torch.no_grad():
            model[0].weight[0, 0] += 0.5
    nvtx.range_push("fwd")
    h = model[1](model[0](xs[step]))                # (32, 128)
    hb = torch.bmm(h.view(4, 8, 128), mix)           # (4, 8, 16): strided-batched GEMMs
    logits = model[2](h) + 0.01 * hb.mean()
    loss = torch.nn.functional.cross_entropy(logits, ys[step])
    nvtx.range_pop()
    nvtx.range_push("bwd")
    opt.zero_grad()
    loss.backward()
    nvtx.range_pop()
    if a.dist:
        for prm in model.parameters():
            dist.all_reduce(prm.grad)
    opt.step()
    print("step %d loss %.9f" % (step, loss.item()))
    nvtx.range_pop()
if a.dist:
    dist.destroy_process_group()
