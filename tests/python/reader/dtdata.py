"""The tensors mk_trace.py records and the reader tests expect back:
one per tft dtype, deterministic per step (numpy's default_rng). Shared
by both, so a test compares a captured tensor with the bytes that were
recorded, not only with what tfdump says."""

import math
import struct

import numpy as np

# tft_dtype codes (tft_types.h)
F32, F64, F16, BF16, I32, I64, U8, I8, I16, U16, U32, U64, BOOL, F8E4M3, F8E5M2 = range(15)


def arrays(step):
    """name -> (tft dtype code, numpy array of the bytes recorded). bf16 is
    given as its raw bits (uint16), fp8 as its bytes (uint8: every one of
    the 256, shuffled); the reader returns them as float32."""
    rng = np.random.default_rng(100 + step)
    f32 = rng.standard_normal((3, 50, 200)).astype(np.float32)  # 120000 bytes: 2 capture parts
    f32[0, 0, 0] = np.nan
    f32[1, 2, 3] = f32[1, 2, 5] = np.inf  # (+inf twice, -inf once: the counts differ)
    f32[2, 3, 4] = -np.inf
    f16 = (rng.standard_normal(70000) * 100).astype(np.float16)  # 3 parts
    bf16 = (rng.standard_normal((2, 40000)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    u64 = rng.integers(0, 2**63, 20, dtype=np.uint64)
    u64[0] = np.uint64(2**64 - 1)
    return {
        "dt.f32": (F32, f32),
        "dt.f64": (F64, rng.standard_normal((7, 5))),
        "dt.f16": (F16, f16),
        "dt.bf16": (BF16, bf16),
        "dt.i32": (I32, rng.integers(-2**31, 2**31, 100, dtype=np.int32)),
        "dt.i64": (I64, rng.integers(-2**62, 2**62, (3, 3), dtype=np.int64)),
        "dt.u8": (U8, rng.integers(0, 256, 300, dtype=np.uint8)),
        "dt.i8": (I8, rng.integers(-128, 128, 300, dtype=np.int8)),
        "dt.i16": (I16, rng.integers(-2**15, 2**15, (10, 10), dtype=np.int16)),
        "dt.u16": (U16, rng.integers(0, 2**16, 50, dtype=np.uint16)),
        "dt.u32": (U32, rng.integers(0, 2**32, 50, dtype=np.uint32)),
        "dt.u64": (U64, u64),
        "dt.bool": (BOOL, rng.integers(0, 2, 33, dtype=np.uint8).astype(bool)),
        "dt.f8e4m3": (F8E4M3, rng.permutation(256).astype(np.uint8).reshape(2, 128)),
        "dt.f8e5m2": (F8E5M2, rng.permutation(256).astype(np.uint8).reshape(4, 64)),
        "dt.scalar": (F64, np.array(3.25 + step)),
        "dt.empty": (F32, np.zeros((0, 5), dtype=np.float32)),
    }


def expected(step, name):
    """The array tftrace.captured() must return for `name` at `step`."""
    code, a = arrays(step)[name]
    if code == BF16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    if code in (F8E4M3, F8E5M2):
        return np.array([fp8_value(code, int(b)) for b in a.flat], dtype=np.float32).reshape(a.shape)
    return a


def fp8_value(code, b):
    """Byte b of an fp8 format as a float32, one element at a time from the
    bit fields (E4M3FN: bias 7, only S.1111.111 NaN; E5M2: bias 15, exponent
    31 Inf or NaN); a NaN is the quiet NaN with the byte's sign."""
    e5 = code == F8E5M2
    mb, bias = (2, 15) if e5 else (3, 7)
    e, m = (b & 0x7f) >> mb, b & ((1 << mb) - 1)
    top = (1 << (7 - mb)) - 1
    if (e5 and e == top and m) or (not e5 and e == top and m == (1 << mb) - 1):
        return struct.unpack("<f", struct.pack("<I", 0xffc00000 if b & 0x80 else 0x7fc00000))[0]
    if e5 and e == top:
        v = math.inf
    elif e == 0:
        v = math.ldexp(m, 1 - bias - mb)
    else:
        v = math.ldexp((1 << mb) + m, e - bias - mb)
    return -v if b & 0x80 else v
