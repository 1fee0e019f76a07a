#!/usr/bin/env python3
"""pad_rows.py: a data loader's view for tfdump --check (docs/CHECK.md,
pad-rows and data-repeat), recorded through tftrace's Python API and
libtftrace's tft_tensor: 3 steps of `tokens` (i32 [4,8], pad id 0) and
`loss_mask` (f32 [4,8]). Step 1's batch holds short documents, one real
token a row, and row 2 none: 3 ones for 4 rows proves a row of padding.
Step 2 repeats step 0's batch (an epoch boundary). No numpy: ctypes arrays."""
import ctypes

import tftrace
from tftrace import _lib, _record

B, T = 4, 8
lib = _lib.lib()


def rec(name, values, ctype, dtype):
    arr = (ctype * (B * T))(*values)
    lib.tft_tensor(name.encode(), dtype, ctypes.cast(arr, ctypes.c_void_p), 2, _record.shape_array((B, T)))


for s in range(3):
    tftrace.step(s)
    real = [[t < 6 for t in range(T)] for _ in range(B)]
    if s == 1:
        real = [[t == 0 and b != 2 for t in range(T)] for b in range(B)]
    tok = [7 + b if real[b][t] else 0 for b in range(B) for t in range(T)]
    lm = [1.0 if real[b][t] else 0.0 for b in range(B) for t in range(T)]
    rec("tokens", tok, ctypes.c_int32, _record.DTYPE["i32"])
    rec("loss_mask", lm, ctypes.c_float, _record.DTYPE["f32"])
tftrace.end_step()
