"""Captured tensors: assembling a capture from its parts, and numpy dtypes."""

import ctypes as c

import numpy as np

from ._layouts import (STEP_NONE, SEQ_NONE, _BF16, _F8E4M3, _F8E5M2, _CAPTURE_SHUFFLED, _ROLE_NAMES,
                       _RecCapture)
from ._reader import TraceError

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


_FP8_TABLES = {}  # tft dtype -> its _fp8_table, made on first use


def _fp8_decode(dtype, a):
    t = _FP8_TABLES.get(dtype)
    if t is None:
        t = _FP8_TABLES[dtype] = _fp8_table(3, 7, False) if dtype == _F8E4M3 else _fp8_table(2, 15, True)
    return t[a]


class _Capture:
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
        src = addr + c.sizeof(_RecCapture)
        if h.flags & _CAPTURE_SHUFFLED:
            buf = (c.c_char * n)()
            self.lib.tft_capture_shuffle(buf, src, n, self.esz, 1)
            self.data += buf.raw
        else:
            self.data += c.string_at(src, n)

    @property
    def complete(self):
        return self.consistent and not self.gap and self.present == self.bytes

    def row(self):
        return (self.rank, self.step, self.seq, _ROLE_NAMES[self.role] if self.role < 3 else "?",
                self.id, self.name, self.op, self.dtype_name, self.shape, self.bytes, self.present,
                self.parts, self.complete)

    def array(self, trace, raw_bf16, raw_fp8):
        where = "%s: captured tensor %s (%s of op %s, rank %d)" % (
            trace.path, self.name, _ROLE_NAMES[self.role], self.seq, self.rank)
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
