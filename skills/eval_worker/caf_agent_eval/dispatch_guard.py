"""The fallback ban at the dispatcher: which aten ops ModelNew.forward may dispatch.

Every op dispatched while the guard is active (including ops that the extension's C++ code
calls: extension ops are registered CompositeImplicit, so their inner aten calls reach the
Python dispatch key) is checked against a small allowlist. GEMM/convolution ops are allowed
only while an extension op is running (they route to cuBLAS/cuDNN), never from Python.
"""
from __future__ import annotations

import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Rationale: allocation, views, layout copies and metadata move no math; everything a kernel
# computes must be its own code. fill_/zero_ are what zeros/zeros_like decompose into.
ALLOWED_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "zero_", "fill_", "resize_", "view", "_unsafe_view", "reshape",
    "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "flatten", "unflatten", "select", "slice", "narrow", "split", "split_with_sizes",
    "chunk", "unbind", "alias", "detach", "view_as", "contiguous", "clone", "copy_",
    "_to_copy", "to", "lift_fresh", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "is_contiguous", "size", "stride", "dim", "numel", "record_stream", "_local_scalar_dense",
    "set_", "is_same_size",
}
# Rationale: cuBLAS GEMM and cuDNN convolution are the two sanctioned library calls; the
# guard lets them through only from inside an extension op (see ExtensionProxy).
EXTENSION_ONLY_OPS = {
    "mm", "addmm", "bmm", "baddbmm", "matmul", "convolution", "_convolution",
    "cudnn_convolution", "mkldnn_convolution", "convolution_overrideable", "conv1d",
    "conv2d", "conv3d", "linear",
}

_state = threading.local()


def _in_extension() -> bool:
    return getattr(_state, "depth", 0) > 0


class DispatchGuard(TorchDispatchMode):
    """Records each op dispatched inside `with guard:`; violations() lists the banned ones."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []
        self.banned: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        ns = getattr(func, "namespace", "aten")
        full = f"{ns}::{func.__name__}" if hasattr(func, "__name__") else str(func)
        self.seen.append(full)
        if ns == "caf_ext":
            pass
        elif ns != "aten" and ns != "prim":
            self.banned.append(full)
        elif name in ALLOWED_OPS:
            pass
        elif name in EXTENSION_ONLY_OPS and _in_extension():
            pass
        else:
            self.banned.append(full)
        return func(*args, **(kwargs or {}))

    def violations(self) -> list[str]:
        """Distinct banned ops in first-seen order."""
        return list(dict.fromkeys(self.banned))


class ExtensionProxy:
    """What `import caf_ext` gives model_new.py: the extension's ops, each call marked.

    The mark lets GEMM/conv through the guard only inside an extension op; the ops themselves
    are the ones registered by kernels/** under the `caf_ext` namespace.
    """

    def __init__(self, ops_namespace):
        self._ops = ops_namespace

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        op = getattr(self._ops, name)

        def call(*args, **kwargs):
            _state.depth = getattr(_state, "depth", 0) + 1
            try:
                return op(*args, **kwargs)
            finally:
                _state.depth -= 1

        call.__name__ = name
        return call

    def __dir__(self):
        return [n for n in dir(self._ops) if not n.startswith("_")]


def warm_up(device: str) -> None:
    """Runs one guarded op so the mode's lazy first-use work (it imports torch._dynamo,
    seconds) happens at process start, not inside a job's first check."""
    guard = DispatchGuard()
    with torch.no_grad(), guard:
        torch.zeros(2, device=device).add_(1)
