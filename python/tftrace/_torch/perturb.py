"""``tftrace --perturb`` (TFTRACE_PERTURB=1): a run apart by round-off only.

At the first forward of each root module, before anything of that forward
is computed or recorded (``param.P`` then records the flipped values), the
least significant mantissa bit of every floating-point parameter is
flipped in place: each value moves by one unit in the last place of its
own dtype (the storage viewed as the integer of its width, XOR 1). A
parameter is flipped once, however many roots hold it. The same bits flip
on every rank, so DDP replicas that start equal stay equal. Such a run is
the GOLDEN2 that ``tfdiff --noise GOLDEN2 GOLDEN BAD`` calibrates its
round-off envelope with, where the runs are deterministic.

Left as they are: parameters that are not floating point, complex, meta,
empty or not strided, and elements that are not finite or would not be once
flipped (float8_e4m3fn's largest, 448, would become NaN). Under
``torch.jit.trace`` nothing is flipped (the flip would be traced into the
graph): the first forward outside it flips. A run in which no module
forward runs eagerly before the first optimizer step (``torch.compile`` of
the whole training step) flips nothing, and stderr says so.

docs/PYTORCH.md, "--perturb".
"""

import os
import sys

import torch

_INT_OF_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def requested():
    """Whether TFTRACE_PERTURB asks for it (unset, empty and "0": no)."""
    return os.environ.get("TFTRACE_PERTURB", "") not in ("", "0")


def flip_lsb(t):
    """Flips the last mantissa bit of every element of the floating tensor
    t in place, on its device and stream, where the result is finite (a
    non-finite element stays as it is). Whether t is one it flips (False:
    not floating point, complex, meta, empty, not strided). No host
    synchronisation."""
    if (not t.is_floating_point() or t.is_meta or t.layout is not torch.strided or t.numel() == 0):
        return False
    it = _INT_OF_WIDTH.get(t.element_size())
    if it is None:
        return False
    with torch.no_grad():
        x = t.detach().view(it)
        ok = torch.isfinite((x ^ 1).view(t.dtype))
        x.bitwise_xor_(ok.to(it))
    return True


class Perturber:
    """The parameters flipped so far, by weak identity (weak_map), and the
    roots whose first forward was seen."""

    def __init__(self, weak_map):
        self.on = requested()
        self.flipped = weak_map()   # parameter -> True
        self.roots = weak_map()     # root module -> True
        self.count = 0              # parameters flipped in this process
        self.warned = False
        rank = next((os.environ[k] for k in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK") if k in os.environ), "0")
        self.loud = rank == "0"       # (one line for a job, not one a rank)

    def first_forward(self, root, name):
        """At a root's forward: its parameters not flipped yet, the first
        time this root is seen."""
        if not self.on or root in self.roots:
            return
        self.roots[root] = True
        n = v = 0
        for p in root.parameters():
            if p in self.flipped:
                continue
            self.flipped[p] = True
            if flip_lsb(p):
                n, v = n + 1, v + p.numel()
        self.count += n
        if n and self.loud:
            sys.stderr.write("tftrace: --perturb: the last mantissa bit of %d parameters (%d values) of %s "
                             "flipped (its first forward)\n" % (n, v, name))

    def after_step(self):
        """After an optimizer step: says once when nothing was flipped."""
        if self.on and not self.count and not self.warned:
            self.warned = True
            sys.stderr.write("tftrace: --perturb: no parameter was flipped before the first optimizer step (no "
                             "module forward ran outside compiled or traced code, or the model has no floating "
                             "parameters); this run is not perturbed (docs/PYTORCH.md, \"--perturb\")\n")
