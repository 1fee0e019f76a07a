"""What a root model is given and holds, recorded at its forward:

- its inputs: the root module's forward arguments by parameter name,
  ``input.input_ids``, ``input.labels``, ``input.attention_mask`` (keyword
  or positional, named from ``forward``'s signature; ``input[i]`` for the
  extra positional ones, ``input.NAME.key`` inside a dict), before its
  forward runs: token ranges, label shift, masks, a repeated batch, a dtype
  change of the data are in the trace. A root other than the model (a loss
  module called on its own) records its as ``ROOT.input.NAME``
  (``crossentropyloss.input.target``).
- its parameters before training: each parameter as ``param.P`` at the
  root's first forward before any optimizer step of the process and any
  restored state (the values training starts from; a resumed run's first
  forward records none), with the tensor
  flag NO_GRAD when it does not require grad (frozen), and again at a
  forward after its ``requires_grad`` changed (a layer frozen or unfrozen).
- its buffers: each as ``buffer.B`` (``buffer.model.blocks.0.attn.bias``,
  BatchNorm's ``running_mean``) at the first forward, and after each
  optimizer step when it changed (the hash of its bytes, or on a device its
  version counter): a mask is recorded once, running statistics every step.

docs/PYTORCH.md, "What is recorded".
"""

import ctypes
import inspect

import torch

from .. import _lib
from . import init_count, tensors

_TRAIN, _EVAL, _NO_GRAD = 0x2, 0x4, 0x8  # the TENSOR flags (tft_types.h)


def _param_names(module, cache={}):  # noqa: B006 (a cache by forward's code)
    """forward's parameter names after self, and whether it takes *args."""
    fwd = getattr(type(module), "forward", None)
    code = getattr(fwd, "__code__", None)
    got = cache.get(code)
    if got is None:
        try:
            ps = list(inspect.signature(fwd).parameters.values())[1:]
        except (TypeError, ValueError):
            ps = []
        named = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        got = cache[code] = named
    return got


class ModelState:
    """The roots' parameters and buffers as last recorded."""

    def __init__(self, names, weak_map):
        self.names = names
        self.grads = weak_map()     # parameter -> requires_grad last recorded
        self.versions = weak_map()  # buffer -> its _version last recorded
        self.roots = weak_map()     # root module -> its name (those that ran)
        self.trained = False        # an optimizer step was taken in this process
        self.lib = _lib.lib()

    def inputs(self, root, name, args, kwargs):
        """Records root's forward arguments (before its forward), in its
        context (training or eval mode, gradient recording on or off: the
        TENSOR flags, so a validation batch is not taken for a training one),
        and, when it is given both input_ids and labels (Hugging Face's
        convention), the share of positions where the labels equal the next
        input id: ``input.labels.shifted`` (1.0: labels shifted already)."""
        prefix = "input" if name == "model" else name + ".input"
        named = _param_names(root)
        flags = (_TRAIN if root.training else _EVAL) | (0 if torch.is_grad_enabled() else _NO_GRAD)
        self.lib.tft_tensor_context(flags)
        try:
            by_name = {}
            for i, a in enumerate(args):
                label = "%s.%s" % (prefix, named[i]) if i < len(named) else "%s[%d]" % (prefix, i)
                self._leaves(a, label)
                if i < len(named):
                    by_name[named[i]] = a
            for k, v in (kwargs or {}).items():
                self._leaves(v, "%s.%s" % (prefix, k))
                by_name[k] = v
            self._label_shift(by_name.get("labels"), by_name.get("input_ids"), prefix)
        finally:
            self.lib.tft_tensor_context(0)

    @staticmethod
    def _label_shift(labels, ids, prefix):
        if not (isinstance(labels, torch.Tensor) and isinstance(ids, torch.Tensor)):
            return
        if (labels.shape != ids.shape or labels.dim() < 1 or labels.shape[-1] < 2 or labels.is_floating_point()
                or ids.is_floating_point() or labels.device != ids.device or labels.layout is not torch.strided):
            return
        with torch.no_grad():
            share = (labels[..., :-1] == ids[..., 1:]).float().mean()
        tensors.record(prefix + ".labels.shifted", share)

    def _leaves(self, obj, label):
        if isinstance(obj, torch.Tensor):
            tensors.record(label, obj)
        elif isinstance(obj, (dict, list, tuple)):
            for n, t in tensors.leaves(obj, label, []):
                tensors.record(n, t)

    def first_forward(self, root, name, before_training):
        """At each forward of a root: its parameters the first time and when
        their requires_grad changed, its buffers the first time. A first
        forward after training began (a resumed run: its steps continue
        from the checkpoint's) only notes them, so that the resumed run
        records what the uninterrupted one does from there on."""
        first = root not in self.roots
        if first:
            self.roots[root] = name
        for pn, p in root.named_parameters():
            rg = bool(p.requires_grad)
            seen = self.grads.get(p)
            if seen is rg:
                continue
            self.grads[p] = rg
            if seen is not None or before_training:
                self._record(("param.%s.%s" % (name, pn)), p, 0 if rg else _NO_GRAD)
            if before_training and seen is None:
                n = init_count.take(p)
                if n >= 2:
                    tensors.record_scalar("init.count.%s.%s" % (name, pn), n)
        if first:
            self.buffers(root, name, record=before_training)

    def buffers(self, root, name, record=True):
        """Records root's buffers that changed since they were last recorded
        (record False: notes them only)."""
        for bn, b in root.named_buffers():
            v = self._fingerprint(b)
            if self.versions.get(b) == v:
                continue
            self.versions[b] = v
            if record:
                self._record("buffer.%s.%s" % (name, bn), b, 0)

    def _fingerprint(self, b):
        """What says a buffer changed: the hash of its bytes for a dense CPU
        tensor (read in place by the library's string hash: no torch op;
        kernels such as batch_norm's update running statistics without
        moving the version counter), else its version counter."""
        if b.is_cpu and b.layout is torch.strided and b.is_contiguous() and b.numel():
            n = b.numel() * b.element_size()
            return ("h", self.lib.tft_string_id(ctypes.cast(b.data_ptr(), ctypes.c_char_p), n))
        return ("v", b._version)

    def after_step(self):
        """After an optimizer step: the buffers that changed."""
        self.trained = True
        init_count.training_began()
        for ref, name in list(self.roots.d.values()):
            root = ref()
            if root is not None:
                self.buffers(root, name)

    def _record(self, label, t, flags):
        if flags:
            self.lib.tft_tensor_context(flags)
        try:
            tensors.record(label, t)
        finally:
            if flags:
                self.lib.tft_tensor_context(0)
