"""A small PyTorch training loop for the wheel test: a two-layer MLP, SGD,
a fixed batch per step from a seeded generator; prints each step's loss."""
import os

import torch

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(6):
    x = torch.randn(32, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, repr(loss.item()))
if os.environ.get("TFT_SHM") and os.environ.get("TFT_TEST_COUNTS"):  # traced: did the C extension record?
    from tftrace._torch import tensors
    with open(os.environ["TFT_TEST_COUNTS"], "w") as f:
        f.write("%d %d\n" % tensors.fast_module.counts() if tensors.fast_module else "none\n")
