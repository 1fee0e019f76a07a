"""torch.distributed calls and DDP's gradient all-reduces as tftrace collectives.

- The collectives of ``torch.distributed`` (all_reduce, broadcast,
  all_gather, all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor,
  all_to_all, all_to_all_single, barrier, reduce, gather, scatter) and
  point-to-point calls (send, recv, isend, irecv) are wrapped: an ENTER
  record before the call, an EXIT record (with the statistics of the result
  buffer when it is a dense CPU tensor) after it — for ``async_op=True``
  and isend/irecv at the Work's ``wait()`` (on the waiting thread, with the
  enter time carried over), or, for work never waited for, at the end of
  the step in which it completed. A rank stuck in a call leaves an ENTER
  alone.
- A process group is a communicator whose id is made of its members'
  global ranks and its creation order among groups with the same members,
  so it is equal on its members and different across disjoint groups; a
  COMM record names its members.
- DistributedDataParallel: its construction is recorded as a broadcast
  ``DDP.init`` over its group whose result is the module's parameters and
  buffers as they are after it (with ``init_sync=False`` nothing was
  broadcast: replicas that differ then show as a values desync at step 0);
  its bucketed gradient all-reduces as ``DDP.allreduce``, through a comm
  hook installed at the first forward unless the program registered its
  own (which is then wrapped, and recorded the same way). The hook scales
  by 1/world size and all-reduces with SUM, as DDP's built-in reduction.
- With the NCCL backend under ``tftrace`` the NCCL interposer records the
  calls already: this layer leaves NCCL groups to it (never twice).
"""

import inspect
import os
import threading
import weakref

import torch
import torch.distributed as dist

from .. import _lib
from .._record import COLL, REDOP, CollInfo, CommInfo, guarded, steps
from . import tensors

_lock = threading.Lock()
_groups = {}  # id(pg) -> (comm id, rank in it, size) ; None when not recorded


def _preloaded():
    return "libtftrace" in os.environ.get("LD_PRELOAD", "")


def _members(pg):
    try:
        return list(dist.get_process_group_ranks(pg))
    except Exception:
        return list(range(dist.get_world_size(pg)))


def _order(pg, members):
    try:
        from torch.distributed import distributed_c10d as c10d
        k = 0
        for other in c10d._world.pg_group_ranks:
            if other is pg:
                return k
            if _members(other) == members:
                k += 1
    except Exception:
        pass
    return 0


def group_info(pg):
    """(comm id, rank in pg, size) of process group pg (None = WORLD), or
    None when this layer does not record its calls (NCCL under tftrace)."""
    if pg is None:
        pg = dist.group.WORLD
    key = id(pg)
    got = _groups.get(key, False)
    if got is not False:
        return got
    with _lock:
        got = _groups.get(key, False)
        if got is not False:
            return got
        info = None
        try:
            backend = str(dist.get_backend(pg)).lower()
        except Exception:
            backend = "?"
        if not ("nccl" in backend and _preloaded()):
            members = _members(pg)
            order = _order(pg, members)
            lib = _lib.lib()
            text = ("torch.distributed:%s#%d" % (",".join(map(str, members)), order)).encode()
            comm = lib.tft_string_id(text, len(text)) or 1
            rank, size = dist.get_rank(pg), dist.get_world_size(pg)
            arr = (_lib.ctypes.c_int32 * max(1, len(members)))(*members)
            name = b"init_process_group" if pg is dist.group.WORLD else b"new_group"
            ci = CommInfo(sz=_lib.ctypes.sizeof(CommInfo), comm=comm, name=name, parent=0, rank=rank,
                          size=size, order=order, n_members=len(members), members=arr, flags=0)
            lib.tft_comm_define(_lib.ctypes.byref(ci))
            info = (comm, rank, size, pg)
        _groups[key] = info
        return info


def _redop(op):
    R = dist.ReduceOp
    for k, v in (("SUM", "sum"), ("PRODUCT", "prod"), ("MIN", "min"), ("MAX", "max"), ("AVG", "avg")):
        if hasattr(R, k) and op == getattr(R, k):
            return REDOP[v]
    return REDOP["other"]


def _dense_cpu(t):
    return isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.is_contiguous() and \
        t.layout == torch.strided and tensors.tft_dtype(t) is not None


class Call:
    """One recorded collective: enter at construction, exit() once."""

    __slots__ = ("ci", "token", "result", "done")

    def __init__(self, api, ctype, pg_info, tensor=None, count=None, redop="none", root=-1, tag=-1,
                 result=None):
        comm, rank, size, _ = pg_info
        dt = tensors.tft_dtype(tensor) if isinstance(tensor, torch.Tensor) else None
        n = count if count is not None else (tensor.numel() if isinstance(tensor, torch.Tensor) else 0)
        self.ci = CollInfo(sz=_lib.ctypes.sizeof(CollInfo), name=api.encode(), comm=comm, type=COLL[ctype],
                           dtype=dt if dt is not None else 0, count=n,
                           redop=redop if isinstance(redop, int) else REDOP[redop], root=root, rank=rank,
                           nranks=size, tag=tag, t_enter=0)
        self.result = result if _dense_cpu(result) and result.numel() == n else None
        self.done = False
        steps.ensure()
        lib = _lib.lib()
        self.ci.t_enter = lib.tft_now_ns()
        self.token = lib.tft_coll_enter(_lib.ctypes.byref(self.ci))

    @guarded("a collective's end")
    def exit(self, *_):
        if self.done or self.token < 0:
            return
        self.done = True
        ptr = self.result.data_ptr() if self.result is not None and self.result.numel() else None
        _lib.lib().tft_coll_exit(self.token, _lib.ctypes.byref(self.ci), ptr)


# name -> (type, tensor param for count/dtype, result param, redop param, root params, peer?)
_SPECS = {
    "all_reduce": ("allreduce", "tensor", "tensor", "op", None),
    "broadcast": ("broadcast", "tensor", "tensor", None, ("src", "group_src")),
    "all_gather": ("allgather", "tensor", None, None, None),
    "all_gather_into_tensor": ("allgather", "input_tensor", None, None, None),
    "reduce_scatter": ("reduce_scatter", "output", "output", "op", None),
    "reduce_scatter_tensor": ("reduce_scatter", "output", "output", "op", None),
    "all_to_all": ("alltoall", None, None, None, None),
    "all_to_all_single": ("alltoall", "input", None, None, None),
    "barrier": ("barrier", None, None, None, None),
    "reduce": ("reduce", "tensor", None, "op", ("dst", "group_dst")),
    "gather": ("gather", "tensor", None, None, ("dst", "group_dst")),
    "scatter": ("scatter", "tensor", "tensor", None, ("src", "group_src")),
    "send": ("send", "tensor", None, None, ("dst", "group_dst")),
    "isend": ("send", "tensor", None, None, ("dst", "group_dst")),
    "recv": ("recv", "tensor", "tensor", None, ("src", "group_src")),
    "irecv": ("recv", "tensor", "tensor", None, ("src", "group_src")),
}
_ASYNC_ALWAYS = ("isend", "irecv")


def _root(bound, names, pg):
    if not names:
        return -1
    glob, local = names
    if bound.get(local) is not None:
        return int(bound[local])
    g = bound.get(glob)
    if g is None:
        return -2 if glob == "src" else -1   # recv from any source
    try:
        return dist.get_group_rank(pg if pg is not None else dist.group.WORLD, int(g))
    except Exception:
        return int(g)


@guarded("a collective's start")
def _enter(fname, ctype, info, a, t, oparg, rootargs, rarg, pg):
    tag = int(a.get("tag", 0)) if ctype in ("send", "recv") else -1
    return Call(fname, ctype, info, tensor=t, redop=_redop(a[oparg]) if oparg else "none",
                root=_root(a, rootargs, pg), tag=tag, result=a.get(rarg) if rarg else None)


def _wrap(fname, real):
    ctype, targ, rarg, oparg, rootargs = _SPECS[fname]
    sig = inspect.signature(real)

    def wrapper(*args, **kwargs):
        if _busy.on:
            return real(*args, **kwargs)
        try:
            b = sig.bind(*args, **kwargs)
            b.apply_defaults()
            a = b.arguments
            pg = a.get("group")
            info = group_info(pg)
        except Exception:
            info = None
        if info is None:
            return real(*args, **kwargs)
        t = a.get(targ) if targ else None
        if fname == "all_to_all":
            lst = a.get("input_tensor_list") or []
            t = lst[0] if lst else None
        call = _enter(fname, ctype, info, a, t, oparg, rootargs, rarg, pg)
        if call is None:
            return real(*args, **kwargs)
        _busy.on = True
        try:
            work = real(*args, **kwargs)
        except BaseException:
            call.exit()
            raise
        finally:
            _busy.on = False
        if (a.get("async_op") or fname in _ASYNC_ALWAYS) and work is not None:
            _pending_work(work, call)
        else:
            call.exit()
        return work

    wrapper.__wrapped__ = real
    wrapper.__name__ = real.__name__
    wrapper.__doc__ = real.__doc__
    return wrapper


_works = weakref.WeakKeyDictionary()  # Work -> its Call, until wait()
_unwaited = []                        # (weak Work, Call) of works not yet waited for


def _pending_work(work, call):
    try:
        _works[work] = call
        _unwaited.append((weakref.ref(work), call))
    except TypeError:
        call.exit()


def _flush_unwaited():
    """Step end: the exits of works that completed without a wait()."""
    keep = []
    for ref, call in _unwaited:
        w = ref()
        if call.done:
            continue
        try:
            finished = w is None or w.is_completed()
        except Exception:
            finished = True
        if finished:
            call.exit()
        else:
            keep.append((ref, call))
    _unwaited[:] = keep


def _wrap_work():
    W = dist.Work
    real_wait = W.wait

    def wait(self, *args, **kwargs):
        r = real_wait(self, *args, **kwargs)
        call = _works.pop(self, None)
        if call is not None:
            call.exit()
        return r

    wait.__doc__ = real_wait.__doc__
    W.wait = wait
    steps.before_end.append(_flush_unwaited)


class _Busy(threading.local):
    on = False


_busy = _Busy()


def _ddp_state_tensor(module):
    """The module's parameters and buffers, flattened into one CPU f32 vector
    (a one-time copy at DDP construction: its fingerprint is the replica's)."""
    parts = [p.detach().reshape(-1).to("cpu", torch.float32) for p in module.parameters()]
    parts += [b.detach().reshape(-1).to("cpu", torch.float32) for b in module.buffers()
              if b.is_floating_point()]
    return torch.cat(parts) if parts else torch.zeros(0)


def _recording_hook(inner):
    """A DDP comm hook that records each bucket's all-reduce; inner: the
    program's own hook (state, bucket) -> Future, or None for DDP's default
    reduction (scale by 1/size, SUM all-reduce)."""

    def hook(state, bucket):
        pg = state if isinstance(state, dist.ProcessGroup) else None
        info = group_info(pg if inner is None else getattr(state, "process_group", pg))
        buf = bucket.buffer()
        if info is None:
            call = None
        else:
            call = Call("DDP.allreduce", "allreduce", info, tensor=buf, redop="sum", result=buf)
        _busy.on = True
        try:
            if inner is None:
                size = dist.get_world_size(pg)
                buf.mul_(1.0 / size)
                fut = dist.all_reduce(buf, group=pg, async_op=True).get_future()
            else:
                fut = inner(state, bucket)
        finally:
            _busy.on = False

        # the exit is recorded before DDP sees the result (then() runs first),
        # so it lands in the step of its backward, run after run
        def done(f):
            v = f.value()
            if call is not None:
                call.exit()
            return v[0] if inner is None else v
        return fut.then(done)
    return hook


def _wrap_ddp():
    from torch.nn.parallel import DistributedDataParallel as DDP
    real_init, real_forward, real_register = DDP.__init__, DDP.forward, DDP.register_comm_hook

    def __init__(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self._tft_hooked = False
        try:
            info = group_info(getattr(self, "process_group", None))
            if info is not None:
                state = _ddp_state_tensor(self.module)
                call = Call("DDP.init", "broadcast", info, tensor=state, root=0, result=state)
                call.exit()
        except Exception:
            pass

    def register_comm_hook(self, state, hook):
        self._tft_hooked = True
        return real_register(self, state, _recording_hook_user(hook))

    def forward(self, *args, **kwargs):
        if not getattr(self, "_tft_hooked", True):
            self._tft_hooked = True
            try:
                pg = getattr(self, "process_group", None)
                if group_info(pg) is not None:   # else DDP's own reduction stays (NCCL under tftrace)
                    real_register(self, pg, _recording_hook(None))
            except Exception:
                pass
        return real_forward(self, *args, **kwargs)

    DDP.__init__, DDP.forward, DDP.register_comm_hook = __init__, forward, register_comm_hook
    real_builtin = getattr(DDP, "_register_builtin_comm_hook", None)
    if real_builtin is not None:
        def _register_builtin_comm_hook(self, *args, **kwargs):
            self._tft_hooked = True   # a C++ hook: its all-reduces go unrecorded (docs/PYTORCH.md)
            return real_builtin(self, *args, **kwargs)
        DDP._register_builtin_comm_hook = _register_builtin_comm_hook


def _recording_hook_user(hook):
    rec = _recording_hook(hook)
    rec.__name__ = getattr(hook, "__name__", "comm_hook")
    rec.__qualname__ = getattr(hook, "__qualname__", rec.__name__)
    return rec


def install():
    """Wraps torch.distributed's calls and DDP (idempotent)."""
    from torch.distributed import distributed_c10d as c10d
    if getattr(c10d, "_tft_wrapped", False):
        return
    for fname in _SPECS:
        real = getattr(c10d, fname, None)
        if real is None:
            continue
        w = _wrap(fname, real)
        setattr(c10d, fname, w)
        if getattr(dist, fname, None) is real:
            setattr(dist, fname, w)
    c10d._tft_wrapped = True
    try:
        _wrap_work()
    except Exception:
        pass
    try:
        _wrap_ddp()
    except Exception:
        pass
