"""Recording one torch.Tensor: dtype mapping and where its statistics are made.

Statistics are computed by the C kernels on the tensor's own memory:

- a dense-layout CPU tensor, contiguous or not (a transposed view, a
  slice, an expanded tensor): in place, through the C extension
  ``_tftrace_rec`` (tracer/pyext/tft_pyrec.c), which reads the tensor's
  dtype, shape, strides and ``data_ptr()`` and calls ``tft_tensor`` or
  ``tft_tensor_strided`` itself — about a microsecond a record instead of
  several of Python and ctypes, and no copy of a view (the statistics are
  those of its dense copy, bit for bit);
- without the extension (it is found beside libtftrace.so; an interpreter
  older than 3.10, a build without Python's headers, ``TFT_PYREC=0``): the
  same through ctypes, a non-contiguous tensor by one ``contiguous()``
  copy, freed right after;
- a CUDA tensor: ``tft_tensor_dev`` on the tensor's current stream, behind
  the work that made it, without a host synchronisation (the CUDA plugin
  computes the statistics on the device; docs/PYTORCH.md); a non-contiguous
  one is first made contiguous on that stream;
- anything else (meta, sparse, quantized, nested tensors, complex or fp8
  dtypes other than E4M3FN and E5M2): shape and dtype only, or nothing when
  the dtype has no tftrace counterpart (complex). A nested tensor's shape
  is its number of components and its regular dimensions, 0 for a ragged
  one ([2, 0, 3] for two [n, 3] components), read without its data.

More than 8 dimensions are folded into the first (tftrace records at most
8). Nothing here keeps a reference to the tensor after the call.
"""

import ctypes
import importlib.machinery
import importlib.util
import os

import torch

from .. import _lib
from .._record import DTYPE, MAX_NDIM, STATS_SHAPE, shape_array

_DT = {
    torch.float32: DTYPE["f32"], torch.float64: DTYPE["f64"], torch.float16: DTYPE["f16"],
    torch.bfloat16: DTYPE["bf16"], torch.int32: DTYPE["i32"], torch.int64: DTYPE["i64"],
    torch.uint8: DTYPE["u8"], torch.int8: DTYPE["i8"], torch.int16: DTYPE["i16"],
    torch.bool: DTYPE["bool"],
}
for _n, _v in (("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64")):
    if hasattr(torch, _n):
        _DT[getattr(torch, _n)] = DTYPE[_v]
# 8-bit floats: E4M3FN and E5M2 exactly (tftrace 0.2, format 1.3, when the
# loaded library knows them); the other fp8 flavours (fnuz, e8m0) have no
# tftrace dtype: recorded as shape-only u8 tensors (docs/PYTORCH.md).
try:
    _fp8 = _lib.lib().tft_dtype_size(DTYPE["f8e4m3"]) == 1
except _lib.TftLibraryError:
    _fp8 = False
if _fp8:
    for _n, _v in (("float8_e4m3fn", "f8e4m3"), ("float8_e5m2", "f8e5m2")):
        if hasattr(torch, _n):
            _DT[getattr(torch, _n)] = DTYPE[_v]
_SHAPE_ONLY_AS_U8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                                       "float8_e5m2fnuz", "float8_e8m0fnu")
                          if hasattr(torch, n) and getattr(torch, n) not in _DT)

_ZERO_STATS = ctypes.create_string_buffer(160)  # a tft_stats of zeros (136 bytes) for shape-only records


def tft_dtype(t):
    """The tftrace dtype code of t (u8 for the shape-only fp8 flavours), or None."""
    d = _DT.get(t.dtype)
    if d is None and t.dtype in _SHAPE_ONLY_AS_U8:
        return DTYPE["u8"]
    return d


def _nested_shape(t):
    """A nested tensor's shape without touching its data: the number of
    components, then each dimension that is regular, 0 for a ragged one
    (a jagged tensor's nested int, a strided one's varying size)."""
    s = [int(t.size(0))]
    for d in range(1, t.dim()):
        try:
            s.append(int(t.size(d)))
        except Exception:  # a ragged dimension: no single size
            s.append(0)
    return tuple(s)


def _shape(t):
    s = _nested_shape(t) if getattr(t, "is_nested", False) else tuple(t.shape)
    if len(s) > MAX_NDIM:
        lead = 1
        for x in s[:len(s) - MAX_NDIM + 1]:
            lead *= x
        s = (lead,) + s[len(s) - MAX_NDIM + 1:]
    return s


def _load_fast():
    """The extension's record function, set up with the loaded library's
    entry points; None when it is not there or not wanted (TFT_PYREC=0)."""
    if os.environ.get("TFT_PYREC", "") == "0":
        return None
    try:
        lib = _lib.lib()
        libdir = os.path.dirname(os.path.realpath(_lib.library_path()))
    except (_lib.TftLibraryError, TypeError):
        return None
    for d in (libdir, os.path.join(libdir, "tftrace")):
        path = os.path.join(d, "_tftrace_rec.abi3.so")
        if not os.path.exists(path):
            continue
        try:
            loader = importlib.machinery.ExtensionFileLoader("_tftrace_rec", path)
            spec = importlib.util.spec_from_file_location("_tftrace_rec", path, loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            addrs = {}
            for fn in ("tft_tensor", "tft_tensor_strided", "tft_last_tensor_id", "tft_scope_push",
                       "tft_scope_pop", "tft_tensor_context", "tft_op_begin", "tft_op_end"):
                f = getattr(lib, fn, None)
                if f is not None:
                    addrs[fn] = ctypes.cast(f, ctypes.c_void_p).value or 0
            mod.setup(addrs, _DT, torch.strided)
            global fast_module
            fast_module = mod
            return mod.record
        except (ImportError, OSError, AttributeError, TypeError, ValueError):
            return None
    return None


fast_module = None   # the loaded _tftrace_rec (its counts() say what took which path)
_fast = _load_fast()


class _HotLib:
    """The ctypes library, with the calls the hooks make for every module
    call (scope push and pop, the tensor context, an op's end) taken by the
    extension: each about 50 ns instead of ~300 through ctypes."""

    def __init__(self, lib, mod):
        self._lib = lib
        self.tft_scope_push = mod.scope_push
        self.tft_scope_pop = mod.scope_pop
        self.tft_op_end = mod.op_end
        if hasattr(lib, "tft_tensor_context"):
            self.tft_tensor_context = mod.tensor_context

    def __getattr__(self, name):
        return getattr(self._lib, name)


def hot_lib():
    """What the hooks call the recorder through: the library with its hot
    calls in C when the extension is loaded, else the ctypes library."""
    lib = _lib.lib()
    return _HotLib(lib, fast_module) if fast_module is not None else lib


def op_begin(name, kind, ids):
    """tft_op_begin(name, kind, ids): ids a list of recorded tensor ids."""
    if fast_module is not None:
        return fast_module.op_begin(name, kind, ids)
    lib = _lib.lib()
    return lib.tft_op_begin(name, kind, len(ids), (ctypes.c_uint64 * max(1, len(ids)))(*ids))


_SHAPE_T = [ctypes.c_int64 * max(1, n) for n in range(MAX_NDIM + 1)]
_STRIDED = torch.strided
_lib_handle = None


def record(name, t, shape_only=False):
    """Records tensor t under name; returns its tensor id (0 when not recorded).

    name: str or bytes. shape_only: write shape and dtype but no statistics
    (views in ops mode). Never raises for an odd tensor: it is skipped.
    The common case (a dense-layout CPU tensor of a mapped dtype) goes to
    the C extension when it is loaded, else it is kept short here: this
    runs for every module output.
    """
    if _fast is not None and not shape_only:
        i = _fast(name, t)
        if i is not None:
            return i
    global _lib_handle
    lib = _lib_handle or _lib.lib()
    _lib_handle = lib
    dt = _DT.get(t.dtype)
    if isinstance(name, str):
        name = name.encode()
    if t.is_nested:   # no dense shape: its shape only (_nested_shape)
        return _record_slow(lib, name, t, True, dt)
    shape = t.shape
    nd = len(shape)
    if dt is not None and not shape_only and nd <= MAX_NDIM and t.layout is _STRIDED and t.is_cpu:
        arr = _SHAPE_T[nd](*shape)
        if t.is_contiguous():
            rc = lib.tft_tensor(name, dt, t.data_ptr() if t.numel() else None, nd, arr)
        else:
            with torch.no_grad():
                c = t.contiguous()
            rc = lib.tft_tensor(name, dt, c.data_ptr() if c.numel() else None, nd, arr)
        return lib.tft_last_tensor_id() if rc == 0 else 0
    return _record_slow(lib, name, t, shape_only, dt)


def record_scalar(name, x):
    """Records the Python number x as a 0-d f64 tensor, from a ctypes double
    (no torch tensor: no op the program's dispatch modes would see); returns
    its tensor id (0 when not recorded)."""
    if fast_module is not None:
        return fast_module.scalar(name, float(x))
    lib = _lib_handle or _lib.lib()
    v = ctypes.c_double(float(x))
    rc = lib.tft_tensor(name.encode() if isinstance(name, str) else name, DTYPE["f64"], ctypes.addressof(v), 0,
                        _SHAPE_T[0]())
    return lib.tft_last_tensor_id() if rc == 0 else 0


def _record_slow(lib, name, t, shape_only, dt):
    """record() for everything but a dense CPU tensor: CUDA, shape-only,
    folded dimensions, other layouts and dtypes."""
    if dt is None:
        if t.dtype not in _SHAPE_ONLY_AS_U8:
            return 0
        dt = DTYPE["u8"]
    shape = _shape(t)
    arr = shape_array(shape)
    layout_ok = t.layout == torch.strided and not t.is_quantized and not getattr(t, "is_nested", False)
    dev = t.device.type
    if shape_only or not layout_ok or t.dtype in _SHAPE_ONLY_AS_U8 or dev not in ("cpu", "cuda"):
        idx = t.device.index if dev == "cuda" and t.device.index is not None else -1
        rc = lib.tft_tensor_stats(name, dt, len(shape), arr, _ZERO_STATS, STATS_SHAPE, idx)
        return lib.tft_last_tensor_id() if rc == 0 else 0
    with torch.no_grad():
        if not t.is_contiguous():
            t = t.contiguous()
        if dev == "cpu":
            rc = lib.tft_tensor(name, dt, t.data_ptr() if t.numel() else None, len(shape), arr)
        else:
            stream = torch.cuda.current_stream(t.device).cuda_stream
            rc = lib.tft_tensor_dev(name, dt, t.data_ptr(), len(shape), arr, t.device.index or 0,
                                    ctypes.c_void_p(stream))
    return lib.tft_last_tensor_id() if rc == 0 else 0


def leaves(obj, path, out, depth=0):
    """Appends (name, tensor) for every tensor leaf of obj, named by its path:
    a tensor is ``path``; a tuple/list element ``path[i]``; a dict entry
    ``path.key``; a dataclass / namedtuple / ModelOutput field ``path.field``."""
    if depth > 8:
        return out
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            leaves(v, "%s.%s" % (path, k), out, depth + 1)
    elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
        for k in obj._fields:
            leaves(getattr(obj, k), "%s.%s" % (path, k), out, depth + 1)
    elif isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            leaves(v, "%s[%d]" % (path, i), out, depth + 1)
    elif hasattr(obj, "__dataclass_fields__"):
        for k in obj.__dataclass_fields__:
            leaves(getattr(obj, k, None), "%s.%s" % (path, k), out, depth + 1)
    return out
