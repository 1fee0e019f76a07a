"""The records of a trace as Python sees them: each record kind of
tft_format.h (FORMAT.md section 5), its ctypes Structure, and how it
becomes a table row or an ``events()`` dict.

The library's table of record kinds (``tft_rec_kind``, formats/src/record.c)
says what each kind is called, its size and which of its fields are string
ids; this module adds the ctypes Structure of each kind it decodes
(``LAYOUTS``) and the decoders below. ``check_layouts`` compares the two
when the first trace opens and fills ``KINDS`` (number -> name, Structure,
string fields) from the library, so a kind the library knows and this
package does not decode still reads, by name, with its header fields.

A record is decoded in place, from the reader's buffer at the address
``tft_reader_next`` hands out; the reader has checked its structure
(length, counts) first, so decoding reads only inside the record.
"""

import ctypes as c
from typing import Dict, List, NamedTuple, Optional, Tuple

from . import _lib
from ._reader import TraceError

# ---- constants of tft_format.h / tft_types.h ---------------------------------

STEP_NONE = -(1 << 63)  # TFT_STEP_NONE
SEQ_NONE = -(1 << 63)   # TFT_SEQ_NONE
MAX_NDIM = 8            # TFT_MAX_NDIM

REC_STRING, REC_STEP, REC_OP, REC_TENSOR, REC_ALLOC, REC_FREE = 1, 2, 3, 4, 5, 6
REC_COLLECTIVE, REC_KERNEL, REC_CHECKPOINT, REC_PROCESS, REC_DROPPED = 7, 8, 9, 10, 11
REC_CAPTURE, REC_THREAD, REC_SYNC, REC_COMM = 12, 13, 14, 15
REC_STACK = 16
REC_CLOCK = 17
REC_EXCEPTION = 18

_TENSOR_HAS_DATA = 0x1
_TENSOR_TRAIN, _TENSOR_EVAL, _TENSOR_NO_GRAD = 0x2, 0x4, 0x8  # format 1.7 (FORMAT.md §5.4)
_COLL_FLAG_ENTER, _COLL_FLAG_EXIT = 0x1, 0x2
CAPTURE_SHUFFLED = 0x1
_COMM_FLAG_INTER = 0x1
_COLL_SEND, _COLL_RECV = 7, 8
_STACK_FLAG_MAIN = 0x1
_STACK_SOURCES = {1: "on-cpu", 2: "off-cpu"}  # else "running" (FORMAT.md §5.16)
_TAG_NONE = -1
_MODE_NAMES = ("shape", "health", "full")
ROLE_NAMES = ("output", "input", "prior")
_PROC_EVENTS = ("start", "exit", "rss")
_DROP_REASONS = ("ring_full", "too_big", "other")
_NTP_STATES = ("unknown", "synced", "unsynced")

# ---- record layouts (tft_format.h, FORMAT.md section 5) ----------------------

_u8, _u16, _u32, _u64 = c.c_uint8, c.c_uint16, c.c_uint32, c.c_uint64
_i16, _i32, _i64 = c.c_int16, c.c_int32, c.c_int64


class Rec(c.Structure):
    _fields_ = [("kind", _u16), ("flags", _u16), ("len", _u32), ("ts", _u64), ("step", _i64),
                ("seq", _i64)]


class Stats(c.Structure):
    _fields_ = [("numel", _u64), ("nan", _u64), ("pinf", _u64), ("ninf", _u64), ("zero", _u64),
                ("over_fp16", _u64), ("over_bf16", _u64), ("under_fp16", _u64),
                ("fingerprint", _u64), ("min", c.c_double), ("max", c.c_double),
                ("mean", c.c_double), ("std", c.c_double), ("l1", c.c_double), ("l2", c.c_double),
                ("absmax", c.c_double)]


class RecString(c.Structure):
    _fields_ = [("h", Rec), ("id", _u64), ("n", _u32), ("pad", _u32)]


class RecStep(c.Structure):
    _fields_ = [("h", Rec), ("phase", _u32), ("pad", _u32)]


class RecOp(c.Structure):
    _fields_ = [("h", Rec), ("name", _u64), ("scope", _u64), ("op_kind", _u16), ("n_in", _u8),
                ("n_out", _u8), ("n_attr", _u8), ("pad", _u8 * 3)]  # then u64 ids[]


class RecTensor(c.Structure):
    _fields_ = [("h", Rec), ("id", _u64), ("name", _u64), ("dtype", _u8), ("device_kind", _u8),
                ("device", _i16), ("mode", _u8), ("ndim", _u8), ("pad", _u8 * 2),
                ("shape", _i64 * MAX_NDIM), ("stats", Stats)]


class RecAlloc(c.Structure):
    _fields_ = [("h", Rec), ("ptr", _u64), ("bytes", _u64), ("site", _u64), ("device_kind", _u8),
                ("pad", _u8), ("device", _i16), ("pad2", _u32), ("stream", _u64)]


class RecFree(c.Structure):
    _fields_ = [("h", Rec), ("ptr", _u64), ("bytes", _u64), ("device_kind", _u8), ("pad", _u8),
                ("device", _i16), ("pad2", _u32)]


class RecCollective(c.Structure):
    # tag and pad3 since format 1.2: read only when h.len covers them
    _fields_ = [("h", Rec), ("comm", _u64), ("coll_seq", _u64), ("count", _u64),
                ("t_enter", _u64), ("t_exit", _u64), ("result", _u64), ("name", _u64),
                ("type", _u16), ("dtype", _u8), ("redop", _u8), ("root", _i32), ("rank", _i32),
                ("nranks", _i32), ("tag", _i32), ("pad3", _u32)]


class RecKernel(c.Structure):
    _fields_ = [("h", Rec), ("name", _u64), ("start", _u64), ("end", _u64), ("stream", _u64),
                ("corr", _u64), ("grid", _u32 * 3), ("block", _u32 * 3), ("device", _i32),
                ("kind", _u32)]


class RecCheckpoint(c.Structure):
    _fields_ = [("h", Rec), ("path", _u64), ("recipe", _u64), ("action", _u32), ("pad", _u32)]


class RecProcess(c.Structure):
    _fields_ = [("h", Rec), ("event", _u32), ("pid", _i32), ("exit_code", _i32), ("signal", _i32),
                ("rss", _u64)]


class RecDropped(c.Structure):
    _fields_ = [("h", Rec), ("count", _u64), ("reason", _u32), ("pad", _u32)]


class RecThread(c.Structure):
    _fields_ = [("h", Rec), ("event", _u32), ("tid", _i32), ("index", _u32), ("pad", _u32),
                ("name", _u64)]


class RecException(c.Structure):  # format 1.7 (FORMAT.md 5.18)
    _fields_ = [("h", Rec), ("type", _u64), ("message", _u64), ("where", _u64), ("frames", _u64)]


class RecClock(c.Structure):  # format 1.6 (FORMAT.md 5.17)
    _fields_ = [("h", Rec), ("realtime_ns", _u64), ("window_ns", _u32), ("ntp", _u32),
                ("maxerror_ns", _u64), ("esterror_ns", _u64)]


class RecSync(c.Structure):
    _fields_ = [("h", Rec), ("reserved", _u64)]


class RecComm(c.Structure):
    _fields_ = [("h", Rec), ("comm", _u64), ("name", _u64), ("parent", _u64), ("rank", _i32),
                ("size", _i32), ("order", _u32), ("n_members", _u32)]  # then i32 members[]


class RecStack(c.Structure):  # FORMAT.md §5.16 (since 1.5)
    _fields_ = [("h", Rec), ("pid", _i32), ("tid", _i32), ("source", _u32), ("nframes", _u32),
                ("comm", _u64), ("summary", _u64), ("frames", _u64), ("note", _u64)]


class RecCapture(c.Structure):
    _fields_ = [("h", Rec), ("tensor", _u64), ("total", _u64), ("offset", _u64), ("n", _u32),
                ("role", _u32), ("name", _u64), ("dtype", _u8), ("ndim", _u8), ("pad", _u16),
                ("pad2", _u32), ("shape", _i64 * MAX_NDIM)]  # then u8 data[]


# ---- the record kinds --------------------------------------------------------------


class RecKindInfo(c.Structure):  # tft_rec_kind_info (tft_format.h): the library's row of a kind
    _fields_ = [("name", c.c_char_p), ("min_size", _u32), ("flags", _u32), ("n_strings", _i32),
                ("label", _i32), ("string_offset", _u32 * 4), ("string_field", c.c_char_p * 4)]


class Kind(NamedTuple):
    name: str                 # the library's name of it (events()' "kind", tfdump's)
    layout: Optional[type]    # the Structure of its fixed part here; None: a kind the
                              # library knows and this package does not decode
    strings: Tuple[str, ...]  # its fields that are string ids, as the library lists them
    offsets: Tuple[int, ...]  # ... and their offsets in the record
    label: int                # the index of the one naming the record, -1 none


# The Structure of each kind this package decodes. Everything else about a
# kind — its name, its size, which fields are string ids — is the library's
# table of kinds (tft_rec_kind, formats/src/record.c), read by load_kinds
# when the first trace opens; check_layouts compares the two.
LAYOUTS = {
    REC_STRING: RecString, REC_STEP: RecStep, REC_OP: RecOp, REC_TENSOR: RecTensor,
    REC_ALLOC: RecAlloc, REC_FREE: RecFree, REC_COLLECTIVE: RecCollective, REC_KERNEL: RecKernel,
    REC_CHECKPOINT: RecCheckpoint, REC_PROCESS: RecProcess, REC_DROPPED: RecDropped,
    REC_CAPTURE: RecCapture, REC_THREAD: RecThread, REC_SYNC: RecSync, REC_COMM: RecComm,
    REC_STACK: RecStack, REC_CLOCK: RecClock, REC_EXCEPTION: RecException,
}

# Every kind the loaded library knows, number -> Kind; and the kinds a reader
# hands out (STRING records are its own) by number and by name. Filled by
# load_kinds (empty until a trace is opened).
KINDS: Dict[int, Kind] = {}
KIND_NAMES: Dict[int, str] = {}
KIND_BY_NAME: Dict[str, int] = {}

_KIND_SCAN = 256  # kind numbers asked of the library (u16 in the format; the table is far smaller)

# tft_rec_min_size(COLLECTIVE): a format 1.0/1.1 record ends before tag, which
# RecCollective (112 bytes) has
_COLLECTIVE_MIN_BYTES = 104  # TFT_REC_COLLECTIVE_MIN_BYTES
_COLLECTIVE_BYTES = 112

_checked = False


def load_kinds(lib) -> None:
    """Fills KINDS, KIND_NAMES and KIND_BY_NAME from the library's table of kinds."""
    if KINDS:
        return
    for kind in range(1, _KIND_SCAN):
        p = lib.tft_rec_kind(kind)
        if not p:
            continue
        row = RecKindInfo.from_address(p)
        n = max(0, min(row.n_strings, 4))
        strings = tuple(row.string_field[i].decode() for i in range(n))
        offsets = tuple(row.string_offset[i] for i in range(n))
        KINDS[kind] = Kind(row.name.decode(), LAYOUTS.get(kind), strings, offsets, row.label)
    KIND_NAMES.update({kind: k.name for kind, k in KINDS.items() if kind != REC_STRING})
    KIND_BY_NAME.update({v: k for k, v in KIND_NAMES.items()})


def _layout_problems(lib, kind, layout) -> List[str]:
    """What the Structure of kind gets wrong against the library's row (its size, its string fields)."""
    p = lib.tft_rec_kind(kind)
    if not p:
        return ["%s: unknown to the library" % layout.__name__]
    row = RecKindInfo.from_address(p)
    name, bad = row.name.decode(), []
    size = _COLLECTIVE_BYTES if kind == REC_COLLECTIVE else row.min_size
    if c.sizeof(layout) != size or (kind == REC_COLLECTIVE and row.min_size != _COLLECTIVE_MIN_BYTES):
        bad.append("%s: %d here, %d in the library" % (name, c.sizeof(layout), row.min_size))
    fields = dict(layout._fields_)
    for i in range(max(0, min(row.n_strings, 4))):
        f = row.string_field[i].decode()
        if fields.get(f) is not _u64 or getattr(layout, f).offset != row.string_offset[i]:
            bad.append("%s: string field %s" % (name, f))
    return bad


def check_layouts(lib) -> None:
    """Raises TraceError when a Structure here disagrees with the loaded library's
    table of kinds (sizes, string fields); fills KINDS."""
    global _checked
    if _checked:
        return
    bad = []
    if c.sizeof(Rec) != 32 or c.sizeof(Stats) != 128:
        bad.append("tft_rec/tft_stats")
    for kind, layout in LAYOUTS.items():
        bad += _layout_problems(lib, kind, layout)
    if bad:
        raise TraceError("tftrace: this Python package and %s disagree on record layouts (%s); "
                         "install both from one tftrace release" % (_lib.library_path(), ", ".join(bad)))
    load_kinds(lib)
    _checked = True


# the kinds each table method reads
OP_TENSOR_KINDS = frozenset((REC_OP, REC_TENSOR))
COLLECTIVE_KINDS = frozenset((REC_COLLECTIVE,))
ALLOC_FREE_KINDS = frozenset((REC_ALLOC, REC_FREE))
STEP_KINDS = frozenset((REC_STEP,))
OP_CAPTURE_KINDS = frozenset((REC_OP, REC_CAPTURE))


class _AllKinds:
    """Every record kind (the reader never hands out STRING records)."""

    def __contains__(self, kind):
        return True


ALL_KINDS = _AllKinds()


# ---- names of enumerations, cached ---------------------------------------------

class Names:
    """Text of the C library's enumeration names (tft_dtype_name, ...), cached per value."""

    def __init__(self, lib):
        self._lib = lib
        self.dtype = {}
        self.coll = {}
        self.redop = {}
        self.op_kind = {}

    def _get(self, cache, fn, v):
        s = cache.get(v)
        if s is None:
            s = cache[v] = fn(v).decode()
        return s

    def dtype_name(self, v):
        return self._get(self.dtype, self._lib.tft_dtype_name, v)

    def coll_name(self, v):
        return self._get(self.coll, self._lib.tft_coll_type_name, v)

    def redop_name(self, v):
        return self._get(self.redop, self._lib.tft_redop_name, v)

    def op_kind_name(self, v):
        return self._get(self.op_kind, self._lib.tft_op_kind_name, v)


def _device(kind, dev):
    if kind == 0:
        return "cpu"
    if kind == 1:
        return "cuda:%d" % dev
    return "dev%d:%d" % (kind, dev)


def _mode_name(mode):
    return _MODE_NAMES[mode] if mode < 3 else "?"


# ---- records as table rows and events() dicts ----------------------------------------

# column kinds: i = int64, u = uint64, f = float64, o = object (str/None/tuple),
# I / U = int64 / uint64 that may be missing (None)
TENSOR_COLS = (("step", "I"), ("rank", "i"), ("seq", "I"), ("ts", "u"), ("id", "u"),
               ("name", "o"), ("op", "o"), ("scope", "o"), ("dtype", "o"), ("device", "o"),
               ("shape", "o"), ("mode", "o"), ("numel", "u"), ("nan", "U"), ("pinf", "U"),
               ("ninf", "U"), ("zero", "U"), ("over_fp16", "U"), ("over_bf16", "U"),
               ("under_fp16", "U"), ("fingerprint", "U"), ("min", "f"), ("max", "f"),
               ("mean", "f"), ("std", "f"), ("l1", "f"), ("l2", "f"), ("absmax", "f"))
COLL_COLS = (("step", "I"), ("rank", "i"), ("seq", "I"), ("comm", "u"), ("coll_seq", "u"),
             ("type", "o"), ("name", "o"), ("dtype", "o"), ("count", "u"), ("redop", "o"),
             ("root", "i"), ("tag", "i"), ("rank_in_comm", "i"), ("nranks", "i"),
             ("t_enter", "u"), ("t_exit", "u"), ("phase", "o"), ("result", "U"))
ALLOC_COLS = (("step", "I"), ("rank", "i"), ("ts", "u"), ("event", "o"), ("ptr", "u"),
              ("bytes", "u"), ("site", "o"), ("device", "o"))
STEP_COLS = (("rank", "i"), ("step", "i"), ("t_begin", "U"), ("t_end", "U"), ("duration", "U"))
CAPTURE_COLS = (("rank", "i"), ("step", "I"), ("seq", "I"), ("role", "o"), ("id", "u"),
                ("name", "o"), ("op", "o"), ("dtype", "o"), ("shape", "o"), ("bytes", "u"),
                ("present", "u"), ("parts", "u"), ("complete", "b"))

_NAN = float("nan")


def tensor_row(names, h, tr, rank, name, op):
    s = tr.stats
    mode = tr.mode
    step, seq = h.step, h.seq
    row = (None if step == STEP_NONE else step, rank, None if seq == SEQ_NONE else seq, h.ts, tr.id,
           name) + (op if op is not None else (None, None)) + (
        names.dtype_name(tr.dtype), _device(tr.device_kind, tr.device), tuple(tr.shape[:tr.ndim]),
        _mode_name(mode), s.numel)
    if mode >= 2:
        return row + (s.nan, s.pinf, s.ninf, s.zero, s.over_fp16, s.over_bf16, s.under_fp16,
                      s.fingerprint, s.min, s.max, s.mean, s.std, s.l1, s.l2, s.absmax)
    if mode == 1:
        return row + (s.nan, s.pinf, s.ninf, s.zero, None, None, None, s.fingerprint, s.min, s.max,
                      _NAN, _NAN, _NAN, _NAN, _NAN)
    return row + (None, None, None, None, None, None, None, None, _NAN, _NAN, _NAN, _NAN, _NAN,
                  _NAN, _NAN)


def coll_row(names, h, cr, rank, strings):
    step, seq = h.step, h.seq
    typ = cr.type
    tag = _TAG_NONE
    if typ in (_COLL_SEND, _COLL_RECV) and h.len >= c.sizeof(RecCollective):
        tag = cr.tag
    phase = "enter" if (h.flags & (_COLL_FLAG_ENTER | _COLL_FLAG_EXIT)) == _COLL_FLAG_ENTER else "exit"
    return (None if step == STEP_NONE else step, rank, None if seq == SEQ_NONE else seq, cr.comm,
            cr.coll_seq, names.coll_name(typ), strings(cr.name), names.dtype_name(cr.dtype),
            cr.count, names.redop_name(cr.redop), cr.root, tag, cr.rank, cr.nranks, cr.t_enter,
            cr.t_exit, phase, cr.result or None)


def alloc_row(h, addr, rank, strings):
    step = None if h.step == STEP_NONE else h.step
    if h.kind == REC_ALLOC:
        a = RecAlloc.from_address(addr)
        return (step, rank, h.ts, "alloc", a.ptr, a.bytes, strings(a.site), _device(a.device_kind, a.device))
    f = RecFree.from_address(addr)
    return (step, rank, h.ts, "free", f.ptr, f.bytes, None, _device(f.device_kind, f.device))


def _row_dict(spec, row):
    return {k: v for (k, _), v in zip(spec, row)}


def event_dict(names, h, addr, rank, strings, ops):
    """One record as a dict (Trace.events)."""
    kind = h.kind
    if kind == REC_TENSOR:
        tr = RecTensor.from_address(addr)
        d = _row_dict(TENSOR_COLS, tensor_row(names, h, tr, rank, strings(tr.name), ops.get(h.seq)))
        d["kind"] = "tensor"
        d["has_data"] = bool(h.flags & _TENSOR_HAS_DATA)
        if h.flags & (_TENSOR_TRAIN | _TENSOR_EVAL):  # its context (format 1.7), when said
            d["training"] = bool(h.flags & _TENSOR_TRAIN)
        if h.flags & (_TENSOR_TRAIN | _TENSOR_EVAL | _TENSOR_NO_GRAD):
            d["grad"] = not h.flags & _TENSOR_NO_GRAD
        return d
    if kind == REC_COLLECTIVE:
        cr = RecCollective.from_address(addr)
        d = _row_dict(COLL_COLS, coll_row(names, h, cr, rank, strings))
        d["kind"], d["ts"] = "collective", h.ts
        return d
    if kind in (REC_ALLOC, REC_FREE):
        d = _row_dict(ALLOC_COLS, alloc_row(h, addr, rank, strings))
        d["kind"], d["seq"] = KIND_NAMES[kind], None if h.seq == SEQ_NONE else h.seq
        d["name"] = d["site"]
        if kind == REC_ALLOC:
            d["stream"] = RecAlloc.from_address(addr).stream
        return d
    d = {"rank": rank, "step": None if h.step == STEP_NONE else h.step,
         "seq": None if h.seq == SEQ_NONE else h.seq,
         "kind": KIND_NAMES.get(kind, "unknown(%d)" % kind), "ts": h.ts, "name": None}
    if kind == REC_STEP:
        d["phase"] = "end" if RecStep.from_address(addr).phase == 1 else "begin"
    elif kind == REC_OP:
        o = RecOp.from_address(addr)
        n_in, n_out, n_attr = o.n_in, o.n_out, o.n_attr
        ids = (_u64 * (n_in + n_out + n_attr)).from_address(addr + c.sizeof(RecOp))
        attrs = (_i64 * n_attr).from_address(addr + c.sizeof(RecOp) + 8 * (n_in + n_out))
        d.update(name=strings(o.name), op_kind=names.op_kind_name(o.op_kind), scope=strings(o.scope),
                 inputs=list(ids[:n_in]), outputs=list(ids[n_in:n_in + n_out]), attrs=list(attrs))
    elif kind == REC_KERNEL:
        k = RecKernel.from_address(addr)
        d.update(name=strings(k.name), op_kind=names.op_kind_name(k.kind), start=k.start, end=k.end,
                 stream=k.stream, corr=k.corr, grid=tuple(k.grid), block=tuple(k.block),
                 device="cuda:%d" % k.device)
    elif kind == REC_CHECKPOINT:
        k = RecCheckpoint.from_address(addr)
        d.update(name=strings(k.path), action="resume" if k.action == 1 else "save",
                 path=strings(k.path), recipe=strings(k.recipe))
    elif kind == REC_PROCESS:
        p = RecProcess.from_address(addr)
        is_exit = p.event == 1
        d.update(event=_PROC_EVENTS[p.event] if p.event < 3 else "?", pid=p.pid,
                 code=p.exit_code if is_exit and not p.signal else None,
                 signal=p.signal if is_exit and p.signal else None, rss=p.rss)
    elif kind == REC_DROPPED:
        p = RecDropped.from_address(addr)
        d.update(count=p.count, reason=_DROP_REASONS[p.reason] if p.reason < 3 else "?")
    elif kind == REC_CAPTURE:
        p = RecCapture.from_address(addr)
        d.update(name=strings(p.name), id=p.tensor,
                 role=ROLE_NAMES[p.role] if p.role < 3 else "?", dtype=names.dtype_name(p.dtype),
                 shape=tuple(p.shape[:p.ndim]), total=p.total, offset=p.offset, n=p.n,
                 shuffled=bool(h.flags & CAPTURE_SHUFFLED))
    elif kind == REC_THREAD:
        p = RecThread.from_address(addr)
        d.update(name=strings(p.name), event="end" if p.event == 1 else "switch", index=p.index,
                 tid=p.tid)
    elif kind == REC_COMM:
        p = RecComm.from_address(addr)
        members = None
        if p.n_members:
            members = list((_i32 * p.n_members).from_address(addr + c.sizeof(RecComm)))
        d.update(name=strings(p.name), comm=p.comm, parent=p.parent or None, comm_rank=p.rank,
                 size=p.size, order=p.order, inter=bool(h.flags & _COMM_FLAG_INTER), members=members)
    elif kind == REC_STACK:
        d.update(_stack_fields(h, RecStack.from_address(addr), strings))
    elif kind == REC_CLOCK and h.len >= c.sizeof(RecClock):
        p = RecClock.from_address(addr)
        d.update(realtime_ns=p.realtime_ns, ntp=_NTP_STATES[p.ntp] if p.ntp < 3 else "unknown",
                 maxerror_ns=p.maxerror_ns, esterror_ns=p.esterror_ns)
    elif kind not in KIND_NAMES:
        d["len"] = h.len
    else:  # a kind the library knows and no branch above decodes: its strings, by field
        k = KINDS[kind]
        for i, (field, off) in enumerate(zip(k.strings, k.offsets)):
            d[field] = strings(_u64.from_address(addr + off).value)
            if i == k.label:
                d["name"] = d[field]
    return d


def _stack_fields(h, p, strings):
    """A STACK record's keys as tfdump --events --json gives them: the
    frames as a list of their lines (each cut at 511 bytes), [] when the
    file does not define the string."""
    frames = strings.defined(p.frames)
    lines = []
    if frames is not None:
        for line in frames.split("\n"):
            b = line.encode("utf-8")
            lines.append(b[:511].decode("utf-8", "replace") if len(b) > 511 else line)
        if lines and lines[-1] == "":
            lines.pop()
    return {"name": strings(p.summary), "pid": p.pid, "tid": p.tid, "main": bool(h.flags & _STACK_FLAG_MAIN),
            "snapshot": _STACK_SOURCES.get(p.source, "running"), "comm": strings(p.comm),
            "summary": strings(p.summary), "frames": lines, "note": strings(p.note)}
