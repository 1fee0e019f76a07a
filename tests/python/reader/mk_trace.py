"""A small program recording through libtftrace.so's API (ctypes), run
under tftrace by the reader tests: every kind of record the reader
decodes (op, tensor in every dtype, shape- and health-mode tensors,
scope, a tensor outside any step, alloc/free, a communicator and a
point-to-point send with a tag, a checkpoint) in two steps.

Usage: python3 mk_trace.py LIBTFTRACE  (under tftrace -o X.trace [--capture 'name=dt'])
"""

import ctypes as c
import sys

import numpy as np

import dtdata

lib = c.CDLL(sys.argv[1])
I64P = c.POINTER(c.c_int64)
lib.tft_op_begin.restype = c.c_int64
lib.tft_op_begin.argtypes = [c.c_char_p, c.c_int, c.c_int, c.c_void_p]
lib.tft_tensor.argtypes = [c.c_char_p, c.c_int, c.c_void_p, c.c_int, I64P]
lib.tft_tensor_stats.argtypes = [c.c_char_p, c.c_int, c.c_int, I64P, c.c_void_p, c.c_int, c.c_int]
lib.tft_alloc.argtypes = [c.c_void_p, c.c_size_t, c.c_char_p]
lib.tft_free.argtypes = [c.c_void_p]
lib.tft_scope_push.argtypes = [c.c_char_p]
lib.tft_checkpoint.argtypes = [c.c_int, c.c_int64, c.c_char_p, c.c_char_p]
lib.tft_coll_enter.restype = c.c_int64
lib.tft_coll_enter.argtypes = [c.c_void_p]
lib.tft_coll_exit.argtypes = [c.c_int64, c.c_void_p, c.c_void_p]
lib.tft_comm_define.argtypes = [c.c_void_p]
lib.tft_step_begin.argtypes = [c.c_int64]
lib.tft_step_end.argtypes = [c.c_int64]
lib.tft_last_tensor_id.restype = c.c_uint64
assert lib.tft_enabled() == 1, "not traced: run under tftrace"


class CollInfo(c.Structure):  # tft_coll_info (tft.h)
    _fields_ = [("sz", c.c_size_t), ("name", c.c_char_p), ("comm", c.c_uint64), ("type", c.c_int),
                ("dtype", c.c_int), ("count", c.c_uint64), ("redop", c.c_int), ("root", c.c_int),
                ("rank", c.c_int), ("nranks", c.c_int), ("tag", c.c_int), ("t_enter", c.c_uint64)]


class CommInfo(c.Structure):  # tft_comm_info (tft.h)
    _fields_ = [("sz", c.c_size_t), ("comm", c.c_uint64), ("name", c.c_char_p), ("parent", c.c_uint64),
                ("rank", c.c_int), ("size", c.c_int), ("order", c.c_uint), ("n_members", c.c_int),
                ("members", c.POINTER(c.c_int32)), ("flags", c.c_uint)]


class Stats(c.Structure):  # tft_stats (tft_types.h)
    _fields_ = [(n, c.c_uint64) for n in ("numel", "nan", "pinf", "ninf", "zero", "over_fp16",
                                          "over_bf16", "under_fp16", "fingerprint")] + \
               [(n, c.c_double) for n in ("min", "max", "mean", "std", "l1", "l2", "absmax")]


def shape_of(a):
    return (c.c_int64 * max(a.ndim, 1))(*a.shape) if a.ndim else (c.c_int64 * 1)(0)


def tensor(name, code, a):
    a = np.require(a, requirements="C")  # (ascontiguousarray makes a 0-d array 1-d)
    rc = lib.tft_tensor(name.encode(), code, a.ctypes.data_as(c.c_void_p), a.ndim,
                        c.cast(shape_of(a), I64P))
    assert rc == 0, (name, rc)


COMM = 0x1234abcd5678ef01
members = (c.c_int32 * 2)(0, 1)
comm = CommInfo(c.sizeof(CommInfo), COMM, b"test_comm", 0, 0, 2, 0, 2, members, 0)
assert lib.tft_comm_define(c.byref(comm)) == 0

tensor("pre.x", dtdata.F32, np.arange(4, dtype=np.float32))  # outside any step
buf = np.zeros(1 << 18, dtype=np.float32)
assert lib.tft_alloc(buf.ctypes.data_as(c.c_void_p), buf.nbytes, b"mk:buf") == 0

for step in range(2):
    lib.tft_step_begin(step)
    lib.tft_scope_push(b"blk")
    lib.tft_op_begin(b"dt", 5, 0, None)
    for name, (code, a) in dtdata.arrays(step).items():
        tensor(name, code, a.view(np.uint8) if a.dtype == bool else a)
    lib.tft_op_end()
    lib.tft_scope_pop()
    shp = (c.c_int64 * 2)(4, 8)
    st = Stats(numel=32, nan=1, pinf=2, ninf=3, zero=4, fingerprint=0xfeedface12345678,
               min=-1.5, max=2.5, mean=0.25, std=1.0, l1=9.0, l2=3.0, absmax=2.5)
    assert lib.tft_tensor_stats(b"st.shape", dtdata.F32, 2, c.cast(shp, I64P), c.byref(st), 0, -1) == 0
    assert lib.tft_tensor_stats(b"st.health", dtdata.F32, 2, c.cast(shp, I64P), c.byref(st), 1, -1) == 0
    ids = (c.c_uint64 * 1)(lib.tft_last_tensor_id())
    lib.tft_op_begin(b"consume", 0, 1, ids)
    tensor("consume.out", dtdata.F32, np.full(3, step, dtype=np.float32))
    lib.tft_op_end()
    msg = np.arange(16, dtype=np.float32) * (step + 1)
    ci = CollInfo(c.sizeof(CollInfo), b"MPI_Send", COMM, 7, dtdata.F32, 16, 0, 1, 0, 2, 7 + step, 0)
    tok = lib.tft_coll_enter(c.byref(ci))
    assert tok >= 0
    assert lib.tft_coll_exit(tok, c.byref(ci), msg.ctypes.data_as(c.c_void_p)) == 0
    lib.tft_checkpoint(0, step, ("ckpt/step%d.bin" % step).encode(), b"--resume ckpt")
    lib.tft_step_end(step)

assert lib.tft_free(buf.ctypes.data_as(c.c_void_p)) == 0
print("recorded")
