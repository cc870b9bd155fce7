"""Kinds of device array: how shoal recognises one in a message and rebuilds its like.

A kind knows its classes, views an array of them as its ops' native array without a
copy, and wraps a native array back: a CuPy array arrives as a CuPy array, a Numba
device array as a Numba device array, a PyTorch CUDA tensor as a PyTorch tensor. The
three built-in kinds share :class:`~shoal.gpu.ops.CupyOps`; :func:`register` adds
others (a kind's ``name`` travels in the message, so every PE registers the same ones).

Recognising costs one dictionary look-up per pickled object's type: a class is looked at
once, by its module's name, so no GPU library is imported to tell that an object is not
a device array.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

from .ops import DeviceOps, cupy_ops

__all__ = ["ArrayKind", "register", "kind_of", "kind_named"]


class ArrayKind:
    """One kind of device array: its classes, and the views to and from its ops' arrays."""

    def __init__(self, name: str, owns: Callable[[type], bool], ops: Callable[[], DeviceOps],
                 native: Callable[[Any], Any], wrap: Callable[[Any], Any],
                 claims: Callable[[Any], bool] | None = None):
        self.name = name
        self.owns = owns  # whether a class is this kind's
        self._ops = ops
        self.native = native  # an array of this kind -> the ops' array (no copy)
        self.wrap = wrap  # the ops' array -> an array of this kind (no copy)
        self.claims = claims  # for classes with host and device objects: whether this one is on a device

    @property
    def ops(self) -> DeviceOps:
        return self._ops()

    def __repr__(self) -> str:
        return f"ArrayKind({self.name!r})"


def _module_is(*prefixes: str) -> Callable[[type], bool]:
    def owns(cls: type) -> bool:
        module = cls.__module__ or ""
        return module.split(".")[0] in prefixes and hasattr(cls, "__cuda_array_interface__")
    return owns


def _same(arr: Any) -> Any:
    return arr


def _cupy_view(obj: Any) -> Any:
    import cupy

    return cupy.asarray(obj)  # through __cuda_array_interface__: the same memory


def _numba_wrap(arr: Any) -> Any:
    from numba import cuda

    return cuda.as_cuda_array(arr)


def _torch_is_cuda(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "torch" and hasattr(cls, "is_cuda")


def _torch_wrap(arr: Any) -> Any:
    import torch

    return torch.from_dlpack(arr)


_KINDS: dict[str, ArrayKind] = {}
_BY_TYPE: dict[type, ArrayKind | None] = {}


def register(kind: ArrayKind) -> ArrayKind:
    """Make ``kind`` known to shoal's messages on this PE (the same name replaces one)."""
    _KINDS[kind.name] = kind
    _BY_TYPE.clear()
    return kind


register(ArrayKind("cupy", _module_is("cupy", "cupyx"), cupy_ops, _same, _same))
register(ArrayKind("numba", _module_is("numba"), cupy_ops, _cupy_view, _numba_wrap))
register(ArrayKind("torch", _torch_is_cuda, cupy_ops, _cupy_view, _torch_wrap,
                   claims=lambda t: bool(t.is_cuda)))


def kind_of(obj: Any) -> ArrayKind | None:
    """The kind of device array ``obj`` is, or None (a host object)."""
    cls = type(obj)
    try:
        kind = _BY_TYPE[cls]
    except KeyError:
        kind = _BY_TYPE[cls] = next((k for k in _KINDS.values() if k.owns(cls)), None)
    if kind is not None and kind.claims is not None and not kind.claims(obj):
        return None
    return kind


def kind_named(name: str) -> ArrayKind | None:
    """The registered kind called ``name``, or None."""
    return _KINDS.get(name)
