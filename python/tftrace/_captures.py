"""Captured tensors (``tftrace --capture``, docs/CAPTURE.md): ``Trace.captures()``
and ``Trace.captured()`` read the CAPTURE records of a trace here; a
tensor arrives as parts (``Capture`` puts them together), and its bytes
become a numpy array of its dtype (bf16 and fp8, which numpy lacks, as
float32 or raw)."""

import ctypes as c
import numbers
from typing import Dict

import numpy as np

from ._layouts import (STEP_NONE, SEQ_NONE, REC_OP, CAPTURE_SHUFFLED, ROLE_NAMES, OP_CAPTURE_KINDS,
                       RecCapture, RecOp)
from ._reader import TraceError
from ._tables import Steps

_BF16 = 3                   # tft_dtype codes (tft_types.h)
_F8E4M3, _F8E5M2 = 13, 14
_LIST_IN_ERROR = 100        # captures a KeyError names

# numpy dtype of each tft_dtype (little-endian, as captured bytes are); bf16
# has none: its bits are widened to float32 (exact) or returned as uint16;
# nor has fp8 (f8e4m3, f8e5m2): decoded to float32 (exact) or its bytes as
# uint8.
_NP_DTYPES = {0: "<f4", 1: "<f8", 2: "<f2", 3: "<u2", 4: "<i4", 5: "<i8", 6: "|u1", 7: "|i1",
              8: "<i2", 9: "<u2", 10: "<u4", 11: "<u8", 12: "|b1", 13: "|u1", 14: "|u1"}


def _fp8_table(mbits, bias, ieee):
    """The float32 value of each of the 256 bytes of an 8-bit float format
    with mbits mantissa bits and exponent bias `bias`; ieee: the top
    exponent holds Inf and NaNs (E5M2), else only S.1111.111 is NaN (E4M3FN).
    NaNs are the quiet NaN with the byte's sign, as the C library's
    tft_f8e4m3_to_f32 / tft_f8e5m2_to_f32 and tfdump --out give them."""
    b = np.arange(256)
    e, m = (b & 0x7f) >> mbits, b & ((1 << mbits) - 1)
    emax = (1 << (7 - mbits)) - 1
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mbits),
                   np.ldexp(((1 << mbits) + m).astype(np.float64), e - bias - mbits))
    if ieee:
        mag = np.where((e == emax) & (m == 0), np.inf, mag)
        nan = (e == emax) & (m != 0)
    else:
        nan = (e == emax) & (m == (1 << mbits) - 1)
    bits = np.where(b >= 128, -mag, mag).astype(np.float32).view(np.uint32)
    bits = np.where(nan, np.where(b >= 128, 0xffc00000, 0x7fc00000), bits).astype(np.uint32)
    return bits.view(np.float32)


_FP8_TABLES: Dict[int, np.ndarray] = {}  # tft dtype -> its _fp8_table, made on first use


def _fp8_decode(dtype, a):
    t = _FP8_TABLES.get(dtype)
    if t is None:
        t = _FP8_TABLES[dtype] = _fp8_table(3, 7, False) if dtype == _F8E4M3 else _fp8_table(2, 15, True)
    return t[a]


class Capture:
    """One captured tensor being assembled from its CAPTURE parts, which
    arrive in offset order; a missing or repeated part leaves a gap (the
    capture is then incomplete). Only the capture asked for keeps bytes
    (data is a bytearray), which grow with the parts that arrived, never
    to a size a header claims."""

    def __init__(self, lib, rank, h, p, strings, op_name_id):
        self.lib = lib
        self.rank = rank
        self.step = None if h.step == STEP_NONE else h.step
        self.seq = None if h.seq == SEQ_NONE else h.seq
        self.role = p.role
        self.id = p.tensor
        self.name = strings(p.name)
        self.op = strings(op_name_id) if op_name_id else None
        self.dtype = p.dtype
        self.dtype_name = lib.tft_dtype_name(p.dtype).decode()
        self.shape = tuple(p.shape[:p.ndim])
        self._shape_raw = tuple(p.shape)
        self.ndim = p.ndim
        self.bytes = p.total
        self.esz = lib.tft_dtype_size(p.dtype)
        numel = 1
        ok = True
        for d in self.shape:
            if d < 0:
                ok = False
            numel *= max(d, 0)
        self.consistent = ok and self.esz > 0 and numel * self.esz == self.bytes
        self.next = 0
        self.present = 0
        self.parts = 0
        self.gap = False
        self.data = None

    def add(self, h, p, addr):
        self.parts += 1
        if (p.total != self.bytes or p.dtype != self.dtype or p.ndim != self.ndim
                or tuple(p.shape) != self._shape_raw):
            self.consistent = False
        if not self.consistent:
            return
        if p.offset != self.next:  # lost (dropped) or repeated parts
            self.gap = True
            return
        n = p.n
        self.next += n
        self.present += n
        if self.data is None or self.gap or not n:
            return
        src = addr + c.sizeof(RecCapture)
        if h.flags & CAPTURE_SHUFFLED:
            buf = (c.c_char * n)()
            self.lib.tft_capture_shuffle(buf, src, n, self.esz, 1)
            self.data += buf.raw
        else:
            self.data += c.string_at(src, n)

    @property
    def complete(self):
        return self.consistent and not self.gap and self.present == self.bytes

    def row(self):
        return (self.rank, self.step, self.seq, ROLE_NAMES[self.role] if self.role < 3 else "?",
                self.id, self.name, self.op, self.dtype_name, self.shape, self.bytes, self.present,
                self.parts, self.complete)

    def array(self, trace, raw_bf16, raw_fp8):
        where = "%s: captured tensor %s (%s of op %s, rank %d)" % (
            trace.path, self.name, ROLE_NAMES[self.role], self.seq, self.rank)
        if not self.consistent:
            raise TraceError("%s: its parts disagree on dtype, shape or size, or dtype %s has no "
                             "numpy equivalent" % (where, self.dtype_name), path=trace.path)
        if not self.complete:
            raise TraceError("%s is incomplete: %d of %d bytes captured (parts were dropped or lost "
                             "to damage; record with --no-drop or a larger --ring-kb)"
                             % (where, self.present, self.bytes), path=trace.path)
        npd = np.dtype(_NP_DTYPES[self.dtype])
        if self.bytes == 0:
            a = np.zeros(self.shape, dtype=npd)
        else:
            a = np.frombuffer(self.data, dtype=npd).reshape(self.shape)
        if self.dtype == _BF16 and not raw_bf16:
            a = (a.astype(np.uint32) << 16).view(np.float32)
        elif self.dtype in (_F8E4M3, _F8E5M2) and not raw_fp8:
            a = _fp8_decode(self.dtype, a)
        return a


def scan(trace, ranks, step, want):
    """Reads the CAPTURE records of ``trace`` (a Trace, its lock held);
    returns (the captures seen, the first one ``want`` accepts, with its
    bytes, or None). With want, stops as soon as that capture is complete
    or has a gap."""
    sel = Steps(step) if step is not None else None
    caps, hit = [], None
    for i, rank in trace._each_rank(ranks):
        with trace._opened(i, sel) as (r, strings):
            ops = {}
            cur = {}  # (seq, tensor id, role) -> the capture its parts continue
            for kind, h, addr in trace._walk(i, r, OP_CAPTURE_KINDS, sel):
                if kind == REC_OP:
                    ops[h.seq] = RecOp.from_address(addr).name
                    continue
                p = RecCapture.from_address(addr)
                key = (h.seq, p.tensor, p.role)
                cp = cur.get(key)
                if cp is None or (cp.next == cp.bytes and p.offset == 0 and cp.bytes):
                    # a new capture (or the same key again after a complete one)
                    cp = cur[key] = Capture(trace._l, rank, h, p, strings, ops.get(h.seq))
                    caps.append(cp)
                    if hit is None and want is not None and want(cp):
                        hit = cp
                        cp.data = bytearray()
                cp.add(h, p, addr)
                if hit is not None and (hit.gap or not hit.consistent or hit.next == hit.bytes):
                    return caps, hit
    return caps, hit


def captured(trace, name, step, rank, role, bf16, fp8):
    """Trace.captured(): the arguments checked, the capture found and assembled."""
    if role is not None and role not in ROLE_NAMES:
        raise ValueError("tftrace: role= is 'output', 'input', 'prior' or None, not %r" % (role,))
    if bf16 not in ("float32", "raw"):
        raise ValueError("tftrace: bf16= is 'float32' or 'raw', not %r" % (bf16,))
    if fp8 not in ("float32", "raw"):
        raise ValueError("tftrace: fp8= is 'float32' or 'raw', not %r" % (fp8,))
    if step is not None and (isinstance(step, bool) or not isinstance(step, numbers.Integral)):
        raise TypeError("tftrace: step= is an int or None")
    by_id = isinstance(name, numbers.Integral) and not isinstance(name, bool)
    if not by_id and not isinstance(name, str):
        raise TypeError("tftrace: name is a tensor name (str) or a tensor id (int)")

    def want(cp):
        if (cp.id != name) if by_id else (cp.name != name):
            return False
        if role is None:
            if cp.role == 2:
                return False
        elif cp.role >= 3 or ROLE_NAMES[cp.role] != role:
            return False
        return step is None or cp.step == step

    with trace._lock:
        caps, hit = scan(trace, rank, step, want)
        if hit is None and (rank is not None or step is not None):
            caps, _ = scan(trace, None, None, None)  # to say what the trace holds
    if hit is None:
        what = "%r%s%s%s" % (name, "" if role is None else " (%s)" % role,
                             "" if step is None else " at step %d" % step,
                             "" if rank is None else " on rank %s" % (rank,))
        if not caps:
            raise KeyError("%s: no captured tensor %s: the trace has no captures (record with "
                           "tftrace --capture SPEC)" % (trace.path, what))
        listed = sorted({"%s@%s (%s)" % (cp.name, "-" if cp.step is None else cp.step,
                                         ROLE_NAMES[cp.role] if cp.role < 3 else "?")
                         for cp in caps})
        more = ""
        if len(listed) > _LIST_IN_ERROR:
            more = ", ... (%d more; Trace.captures() lists them all)" % (len(listed) - _LIST_IN_ERROR)
        raise KeyError("%s: no captured tensor %s; captured: %s%s"
                       % (trace.path, what, ", ".join(listed[:_LIST_IN_ERROR]), more))
    return hit.array(trace, bf16 == "raw", fp8 == "raw")
