"""A small training script for test_procs.py: a linear model trained on a
synthetic data set through a DataLoader (--workers N, forked), and, with
--helpers, processes the training process starts that are not training
(a C++ compiler through a shell, as torch.compile's inductor does, and
a Python child that imports torch; with --compile, torch.compile itself). Prints 'step N loss X' per step."""

import argparse
import os
import subprocess
import sys
import tempfile

import torch


DIM = 8192  # a batch of 64 is 2 MiB: the workers' collation allocates above --alloc-min


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(DIM, generator=g) / 64
        return x, (x * x).sum(0, keepdim=True)


def helpers():
    """What inductor does to build a kernel: a shell that runs g++ on a C++
    file (cc1plus, as, ld below it), and a plain shell command."""
    d = tempfile.mkdtemp(prefix="tft-procs-")
    src = os.path.join(d, "k.cpp")
    with open(src, "w") as f:
        f.write("#include <vector>\nextern \"C\" int k(int n) { std::vector<float> v(n, 1.0f);"
                " float s = 0; for (float x : v) s += x; return (int)s; }\n")
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-o", os.path.join(d, "k.so"), src], check=True)
    subprocess.run("g++ -O0 -c -o %s %s && echo built" % (os.path.join(d, "k.o"), src), shell=True,
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1 << 20)"], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--helpers", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--child-trains", action="store_true", help="first run this script (2 steps) as a child")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(DIM, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # --compile: inductor compiles the loss with g++ (a function, not the
    # module: what it runs is then the same traced or not)
    mse = torch.nn.functional.mse_loss
    lossf = torch.compile(lambda out, y: ((out - y) ** 2).mean()) if a.compile else mse
    dl = torch.utils.data.DataLoader(Squares(), batch_size=64, num_workers=a.workers,
                                     multiprocessing_context="fork" if a.workers else None)
    if a.helpers:
        helpers()
    if a.child_trains:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--steps", "2"], check=True,
                       stdout=subprocess.DEVNULL)
    step = 0
    while step < a.steps:
        for x, y in dl:
            loss = lossf(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print("step %d loss %.6f" % (step, loss.item()), flush=True)
            step += 1
            if step == a.steps:
                break


if __name__ == "__main__":
    main()
