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
- Async calls (``async_op=True``, isend/irecv) record their enter and
  their exit each as an op of its own, begun and ended on the thread that
  records it (ops are per thread in the C API): a wait() elsewhere leaves
  no op open on the calling thread.
- DistributedDataParallel (docs/PYTORCH.md says what a user sees):
  ``DDP.init``, after its construction, one broadcast from rank 0 per
  parameter and buffer, the result the tensor itself read in place (no
  copy of the model; with ``init_sync=False`` nothing was broadcast:
  replicas that differ then show as a values desync at step 0);
  ``DDP.buffers``, its per-forward buffer broadcast (broadcast_buffers),
  one broadcast per buffer; ``DDP.allreduce``, each bucket's gradient
  all-reduce, through the one comm hook this layer registers
  (_HookChain), which runs DDP's reduction or the program's own hook,
  registered before or after the first forward.
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
from .._record import COLL, OP_COLLECTIVE, REDOP, CollInfo, CommInfo, guarded, steps
from . import tensors

_lock = threading.Lock()
_groups = {}  # id(pg) -> (comm id, rank in it, size) ; None when not recorded (while pg lives)


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
            info = (comm, rank, size)
        # the entry goes with its group (held weakly: a group kept alive
        # past destroy_process_group is destroyed at interpreter exit,
        # where gloo's threads abort the process), and no later group
        # that gets its id finds it
        try:
            weakref.finalize(pg, _groups.pop, key, None)
        except TypeError:
            pass
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


def _op_begin(name):
    _lib.lib().tft_op_begin(name if isinstance(name, bytes) else name.encode(), OP_COLLECTIVE, 0, None)


def _op_end():
    _lib.lib().tft_op_end()


class Call:
    """One recorded collective: enter at construction, exit() once.

    own_op=False: the C recorder's implicit op, opened by the enter and
    closed by the exit, which must then come on the same thread, with
    nothing recorded in between (a blocking call). own_op=True: the enter
    and the exit are each an op of their own, begun and ended on the
    thread that records them (ops are per thread, tft.h): for calls that
    end later or elsewhere (async work, DDP's bucket all-reduces), so that
    no op stays open on the calling thread. Callers that bracket calls in
    an op of their own (_state_broadcast) pass in_op=True."""

    __slots__ = ("ci", "token", "result", "done", "own_op")

    def __init__(self, api, ctype, pg_info, tensor=None, count=None, redop="none", root=-1, tag=-1,
                 result=None, own_op=False, in_op=False):
        comm, rank, size = pg_info
        dt = tensors.tft_dtype(tensor) if isinstance(tensor, torch.Tensor) else None
        n = count if count is not None else (tensor.numel() if isinstance(tensor, torch.Tensor) else 0)
        self.ci = CollInfo(sz=_lib.ctypes.sizeof(CollInfo), name=api.encode(), comm=comm, type=COLL[ctype],
                           dtype=dt if dt is not None else 0, count=n,
                           redop=redop if isinstance(redop, int) else REDOP[redop], root=root, rank=rank,
                           nranks=size, tag=tag, t_enter=0)
        self.result = result if _dense_cpu(result) and result.numel() == n else None
        self.done = False
        self.own_op = own_op and not in_op
        steps.ensure()
        lib = _lib.lib()
        self.ci.t_enter = lib.tft_now_ns()
        if self.own_op:
            _op_begin(self.ci.name)
        try:
            self.token = lib.tft_coll_enter(_lib.ctypes.byref(self.ci))
        finally:
            if self.own_op:
                _op_end()

    def failed(self):
        """The call raised (or its work failed): it never completed, so no
        exit is recorded — the trace shows it entered and never left, which
        is what the other ranks saw."""
        self.done = True
        self.result = None

    @guarded("a collective's end")
    def exit(self, *_, result=None):
        """Records the exit; result (optional): the result buffer, when it
        was not known at the enter (its statistics, if a dense CPU tensor of
        the call's count)."""
        if self.done or self.token < 0:
            return
        self.done = True
        if result is not None and _dense_cpu(result) and result.numel() == self.ci.count:
            self.result = result
        ptr = self.result.data_ptr() if self.result is not None and self.result.numel() else None
        self.result = None   # no reference kept past the record
        if self.own_op:
            _op_begin(self.ci.name)
        try:
            _lib.lib().tft_coll_exit(self.token, _lib.ctypes.byref(self.ci), ptr)
        finally:
            if self.own_op:
                _op_end()


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
    later = bool(a.get("async_op")) or fname in _ASYNC_ALWAYS   # ends at wait(), maybe on another thread
    return Call(fname, ctype, info, tensor=t, redop=_redop(a[oparg]) if oparg else "none",
                root=_root(a, rootargs, pg), tag=tag, result=a.get(rarg) if rarg else None, own_op=later)


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
            call.failed()
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
        try:
            r = real_wait(self, *args, **kwargs)
        except BaseException:
            call = _works.pop(self, None)
            if call is not None:
                call.failed()   # the work failed: never completed
            raise
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


_ONCE = "register_comm_hook or register_builtin_comm_hook can only be called once."


def _host(t):
    """t itself when the C recorder can read it in place (a dense CPU
    tensor of a tftrace dtype), else a CPU contiguous copy of it made
    outside any dispatch mode (--torch ops does not see it), or None for a
    dtype tftrace has no counterpart for. The copy is the caller's to drop
    right after recording: one tensor's worth at a time."""
    if tensors.tft_dtype(t) is None:
        return None
    if _dense_cpu(t):
        return t
    try:
        from torch.utils._python_dispatch import _disable_current_modes
        modes = _disable_current_modes()
    except Exception:
        import contextlib
        modes = contextlib.nullcontext()
    with torch.no_grad(), modes:
        return t.detach().to("cpu").contiguous()


def _ddp_state(ddp):
    """(name, tensor) of what DDP broadcasts at construction: the wrapped
    module's parameters and buffers, but those it was told to ignore."""
    ignore = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    m = ddp.module
    out = [(n, p) for n, p in m.named_parameters() if n not in ignore]
    out += [(n, b) for n, b in m.named_buffers() if n not in ignore]
    return out


@guarded("DDP's initial broadcast")
def _record_init(ddp):
    """DDP.init: one broadcast per parameter and buffer (root 0), in
    named_parameters() then named_buffers() order, whose result is that
    tensor as it is after the construction, read in place: no copy of the
    model (a temporary copy of one tensor at a time only for a tensor the
    recorder cannot read in place: not on the CPU, not contiguous). All in
    one op, begun and ended here."""
    info = group_info(getattr(ddp, "process_group", None))
    if info is None:
        return
    state = _ddp_state(ddp)
    steps.ensure()   # the op in the step its records are in
    _op_begin("DDP.init")
    try:
        for _, t in state:
            h = _host(t.detach())
            if h is None:
                continue
            Call("DDP.init", "broadcast", info, tensor=h, root=0, result=h, in_op=True).exit()
            del h
    finally:
        _op_end()


def _wrap_buffer_sync(DDP):
    """DDP's buffer broadcast (broadcast_buffers=True, before each forward;
    DDP._distributed_broadcast_coalesced) as DDP.buffers: one broadcast per
    buffer from the authoritative rank, entered before the call and exited
    after it with the buffer's statistics. The enters are one op, the exits
    another."""
    real = getattr(DDP, "_distributed_broadcast_coalesced", None)
    if real is None:
        return

    @guarded("DDP's buffer broadcast (start)")
    def enter(self, bufs, root):
        info = group_info(getattr(self, "process_group", None))
        if info is None:
            return None
        steps.ensure()
        _op_begin("DDP.buffers")
        try:
            return [Call("DDP.buffers", "broadcast", info, tensor=b, root=int(root), in_op=True)
                    for b in bufs if isinstance(b, torch.Tensor) and tensors.tft_dtype(b) is not None]
        finally:
            _op_end()

    @guarded("DDP's buffer broadcast (end)")
    def leave(calls, bufs):
        steps.ensure()
        _op_begin("DDP.buffers")
        try:
            k = 0
            for b in bufs:
                if isinstance(b, torch.Tensor) and tensors.tft_dtype(b) is not None:
                    calls[k].exit(result=_host(b))
                    k += 1
        finally:
            _op_end()

    def _distributed_broadcast_coalesced(self, tensors_, buffer_size, authoritative_rank=0):
        if _busy.on:
            return real(self, tensors_, buffer_size, authoritative_rank)
        bufs = list(tensors_)
        calls = enter(self, bufs, authoritative_rank)
        try:
            return real(self, bufs, buffer_size, authoritative_rank)
        finally:
            if calls:
                leave(calls, bufs)

    _distributed_broadcast_coalesced.__doc__ = real.__doc__
    DDP._distributed_broadcast_coalesced = _distributed_broadcast_coalesced


def _result_of(v):
    """The tensor a comm hook's future resolved to (a tensor, or a list of one)."""
    if isinstance(v, (list, tuple)) and v:
        v = v[0]
    return v if isinstance(v, torch.Tensor) else None


class _HookChain:
    """The one comm hook this layer registers with DDP's reducer (at the
    first forward, or when the program registers its own hook before it),
    which runs the reduction DDP would run and records it.

    The reduction: DDP's built-in one (scale by 1/world size, SUM
    all-reduce, the same arithmetic as the reducer's), or the program's
    hook once it registers one — at any time, also after the first forward:
    register_comm_hook is then kept by the chain instead of the reducer, so
    the program behaves as untraced (the hook runs from then on; a second
    registration raises as DDP does).

    Each bucket's all-reduce is a DDP.allreduce collective: the enter in
    the hook (its own op), the exit with the result's statistics when the
    backward ends (an autograd final callback, before DDP's own, on the
    thread that ran the backward; its own op), in bucket order run after
    run. Outside a backward (a hook run by DDP's join) the exit is recorded
    when the all-reduce completes, on the thread that completes it."""

    def __init__(self, ddp):
        self.pg = getattr(ddp, "process_group", None)
        self.inner = None      # the program's hook (state, bucket) -> Future, or None
        self.state = None
        self.pending = []      # (Call, Future) of this backward, in bucket order
        self.queued = False

    def set(self, hook, state):
        if self.inner is not None:
            raise RuntimeError(_ONCE)
        self.inner, self.state = hook, state

    def __call__(self, _state, bucket):
        inner, st = self.inner, self.state
        call = self._enter(bucket, inner, st)
        _busy.on = True
        try:
            if inner is None:
                buf = bucket.buffer()
                buf.mul_(1.0 / dist.get_world_size(self.pg))
                fut = dist.all_reduce(buf, group=self.pg, async_op=True).get_future()
            else:
                fut = inner(st, bucket)
        finally:
            _busy.on = False
        if call is None:
            return fut if inner is not None else fut.then(lambda f: f.value()[0])
        queued = self._queue()

        def done(f):
            v = f.value()
            if not queued:
                call.exit(result=_result_of(v))
            return v[0] if inner is None else v   # DDP's reducer takes a tensor
        out = fut.then(done)
        if queued:
            self.pending.append((call, out))
        return out

    @guarded("DDP's gradient all-reduce (start)")
    def _enter(self, bucket, inner, st):
        pg = self.pg if inner is None else getattr(st, "process_group", self.pg)
        info = group_info(pg)
        if info is None:
            return None
        return Call("DDP.allreduce", "allreduce", info, tensor=bucket.buffer(), redop="sum", own_op=True)

    def _queue(self):
        if self.queued:
            return True
        try:
            from torch.autograd import Variable
            Variable._execution_engine.queue_callback(self._finish)
        except Exception:
            return False   # not in a backward
        self.queued = True
        return True

    def _finish(self):
        pending, self.pending, self.queued = self.pending, [], False
        for call, fut in pending:
            try:
                v = fut.wait()   # DDP waits for it right after, in its own final callback
            except Exception:
                call.failed()    # DDP raises it itself; the call never completed
                continue
            call.exit(result=_result_of(v))


def _builtin_hook(kind):
    """A Python equivalent of DDP's C++ built-in hook kind (ALLREDUCE,
    FP16_COMPRESS), for a registration after this layer's chain took the
    reducer's slot; None for another kind."""
    T = getattr(dist, "BuiltinCommHookType", None)
    if T is None:
        return None

    def allreduce(pg, bucket):
        buf = bucket.buffer()
        buf.div_(dist.get_world_size(pg))
        return dist.all_reduce(buf, group=pg, async_op=True).get_future().then(lambda f: f.value()[0])

    def fp16_compress(pg, bucket):
        buf = bucket.buffer()
        c = buf.to(torch.float16)
        c.div_(dist.get_world_size(pg))
        fut = dist.all_reduce(c, group=pg, async_op=True).get_future()

        def decompress(f):
            buf.copy_(f.value()[0])
            return buf
        return fut.then(decompress)

    if kind == getattr(T, "ALLREDUCE", None):
        return allreduce
    if kind == getattr(T, "FP16_COMPRESS", None):
        return fp16_compress
    return None


def _wrap_ddp():
    from torch.nn.parallel import DistributedDataParallel as DDP
    real_init, real_forward, real_register = DDP.__init__, DDP.forward, DDP.register_comm_hook

    def install_chain(self):
        """The chain into the reducer's slot (once); None when this layer
        does not record the group (NCCL under tftrace) or a C++ built-in
        hook holds the slot."""
        chain = self.__dict__.get("_tft_chain")
        if chain is not None or self.__dict__.get("_tft_builtin") or group_info(self.process_group) is None:
            return chain
        chain = _HookChain(self)
        # not DDP.register_comm_hook: DDP's logger and _comm_hooks keep what the program registered
        dist._register_comm_hook(self.reducer, None, chain)
        self._tft_chain = chain
        return chain

    def __init__(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        _record_init(self)

    def register_comm_hook(self, state, hook):
        try:
            chain = install_chain(self)
        except Exception:
            chain = None
        if chain is None:
            return real_register(self, state, hook)
        # what DDP.register_comm_hook does, the reducer's part kept by the chain
        self._check_comm_hook(hook)
        if chain.inner is not None:
            raise RuntimeError(_ONCE)
        if self.logger is not None:
            self.logger._set_comm_hook_name(hook.__qualname__)
        self._comm_hooks.append((hook, state))
        chain.set(hook, state)

    register_comm_hook.__doc__ = real_register.__doc__

    def forward(self, *args, **kwargs):
        if "_tft_chain" not in self.__dict__:
            try:
                install_chain(self)
            except Exception:
                self._tft_chain = None
        return real_forward(self, *args, **kwargs)

    DDP.__init__, DDP.forward, DDP.register_comm_hook = __init__, forward, register_comm_hook
    real_builtin = getattr(DDP, "_register_builtin_comm_hook", None)
    if real_builtin is not None:
        def _register_builtin_comm_hook(self, comm_hook_type):
            chain = self.__dict__.get("_tft_chain")
            emul = _builtin_hook(comm_hook_type) if chain is not None else None
            if emul is None:
                # before the chain: a C++ hook, its all-reduces go unrecorded (docs/PYTORCH.md)
                self._tft_builtin = True
                return real_builtin(self, comm_hook_type)
            if chain.inner is not None:
                raise RuntimeError("register_builtin_comm_hook or register_comm_hook can only be called once.")
            if self.logger is not None:
                self.logger._set_comm_hook_name(str(comm_hook_type))
            chain.set(emul, self.process_group)
        _register_builtin_comm_hook.__doc__ = real_builtin.__doc__
        DDP._register_builtin_comm_hook = _register_builtin_comm_hook
    _wrap_buffer_sync(DDP)


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
