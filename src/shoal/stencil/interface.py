"""The frontend–backend link: an interface of its own, so other backends can plug in.

:class:`Interface` is all the frontend uses: create a grid's tiles, submit batches,
gather, scatter and reduce, each returning a :class:`Pending` value. The one
implementation here, :class:`LocalInterface`, runs the tiles as a chare Array on the
PEs of the running shoal job (``interface=None``). A client–server link (a backend
job serving notebooks) is another implementation of the same five methods.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Callable, NamedTuple

import numpy as np

__all__ = ["GridSpec", "Interface", "LocalInterface", "Pending", "BatchResult", "connect", "decompose", "tile_bounds"]


class GridSpec(NamedTuple):
    """What :meth:`~shoal.stencil.Interface.create` makes: a grid's shape, fields and
    tiling, from the options of :meth:`Stencil.initialize
    <shoal.stencil.Stencil.initialize>` (``ghost`` is its ``ghost_depth``; ``backend``
    is "c" or "numpy", resolved from "auto")."""

    shape: tuple[int, ...]
    names: tuple[str, ...]
    dtypes: tuple[str, ...]
    ghost: int
    odf: int
    fast_math: bool = False
    cflags: tuple[str, ...] = ()
    frontend_tiles: bool = True  # PE 0 (the frontend's PE) hosts tiles too
    backend: str = "c"  # "c": halos are packed by generated C too; "numpy": NumPy only
    device: str = "cpu"  # a name of shoal.stencil.devices: "cuda": tiles in GPU memory, CUDA kernels
    time_blocking: bool = True  # several steps of a backend loop per pass where valid (blocking.py)


class BatchResult(NamedTuple):
    """The value of a submitted batch: ``converged``, the step (counted from the start
    of the solve) a convergence check stopped at, or -1."""

    converged: int  # the step (counted from the start of the solve) a check stopped at, or -1


class Pending:
    """A value the backend will send: ``get()`` waits for it."""

    __slots__ = ("_fut", "_finish")

    def __init__(self, fut: Any, finish: Callable[[Any], Any] = lambda v: v):
        self._fut, self._finish = fut, finish

    def get(self) -> Any:
        """Wait for the value and return it."""
        return self._finish(self._fut.get())

    def done(self) -> bool:
        """Whether the value has arrived."""
        return bool(self._fut.done())


class Interface(ABC):
    """What a frontend needs from a backend: pass an instance as a stencil's
    ``interface=`` option to run its tiles elsewhere. Values come back as
    :class:`~shoal.stencil.Pending` objects; the handle is whatever :meth:`create` returned."""

    @abstractmethod
    def create(self, spec: GridSpec) -> Any:
        """Create the tiles of a grid (fields all zero); returns a handle."""

    @abstractmethod
    def submit(self, handle: Any, batch: Any) -> Pending:
        """Run a batch of recorded steps (``shoal.stencil.program.Batch``); a
        :class:`~shoal.stencil.Pending` :class:`~shoal.stencil.interface.BatchResult`."""

    @abstractmethod
    def gather(self, handle: Any, field: int, seq: int) -> Pending:
        """A Pending of the whole field as one NumPy array."""

    @abstractmethod
    def scatter(self, handle: Any, field: int, array: np.ndarray, seq: int) -> None:
        """Set a whole field (ordered after the requests before ``seq``)."""

    @abstractmethod
    def reduce(self, handle: Any, rid: int, finish: str, seq: int) -> Pending:
        """A Pending of reduction ``rid`` over all tiles."""

    def destroy(self, handle: Any) -> None:
        """Free the tiles (optional)."""

    def describe(self, handle: Any) -> str:
        """One line on where the grid's tiles are (the default: the class name)."""
        return type(self).__name__


def decompose(shape: tuple[int, ...], ntiles: int, ghost: int) -> tuple[int, ...]:
    """Tiles per axis for about ``ntiles`` tiles: slabs along the outer axis first (its
    faces are contiguous), each tile at least ``ghost`` (and 1) points thick."""
    dims = [1] * len(shape)
    left = max(1, ntiles)
    minimum = max(1, ghost)
    for a, n in enumerate(shape):
        most = max(1, n // minimum)
        take = min(left, most)
        # take a divisor-friendly count along this axis, the rest goes to the next axes
        while take > 1 and left % take and a < len(shape) - 1:
            take -= 1
        dims[a] = take
        left = max(1, math.ceil(left / take))
        if left == 1:
            break
    return tuple(dims)


def tile_bounds(index: tuple[int, ...], dims: tuple[int, ...], shape: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """The global box ``[lo, hi)`` a tile owns (sizes differ by at most one point)."""
    lo = [i * n // p for i, n, p in zip(index, shape, dims)]
    hi = [(i + 1) * n // p for i, n, p in zip(index, shape, dims)]
    return lo, hi


class _Handle:
    __slots__ = ("tiles", "spec", "dims", "npes")

    def __init__(self, tiles: Any, spec: GridSpec, dims: tuple[int, ...], npes: int):
        self.tiles, self.spec, self.dims, self.npes = tiles, spec, dims, npes


class _NotOnFirst:
    """Placement of tiles in contiguous blocks over PEs 1..N-1 (PE 0 runs the frontend)."""

    def __init__(self, dims: tuple[int, ...]):
        self.dims = dims

    def __call__(self, index: Any, npes: int) -> int:
        idx = index if isinstance(index, tuple) else (index,)
        lin = 0
        for i, n in zip(idx, self.dims):
            lin = lin * n + i
        return 1 + lin * (npes - 1) // int(np.prod(self.dims))


class LocalInterface(Interface):
    """Tiles as a chare Array on the PEs of the running job (PE 0 runs the frontend
    and serves its share of tiles whenever the frontend waits)."""

    def create(self, spec: GridSpec) -> _Handle:
        import shoal

        from .backend import Tile

        npes = shoal.num_pes()
        skip = not spec.frontend_tiles and npes > 1
        dims = decompose(spec.shape, spec.odf * (npes - 1 if skip else npes), spec.ghost)
        placement = _NotOnFirst(dims) if skip else None
        tiles = shoal.Array(Tile, dims, args=(spec, dims), placement=placement)
        return _Handle(tiles, spec, dims, npes)

    def submit(self, handle: _Handle, batch: Any) -> Pending:
        import shoal

        fut = shoal.Future()
        handle.tiles.batch(batch, fut)
        return Pending(fut, BatchResult)

    def gather(self, handle: _Handle, field: int, seq: int) -> Pending:
        import shoal

        fut = shoal.Future()
        handle.tiles.gather(seq, field, fut)
        spec = handle.spec

        def assemble(pieces: list) -> np.ndarray:
            out = np.empty(spec.shape, dtype=spec.dtypes[field])
            for lo, hi, piece in pieces:
                out[tuple(slice(a, b) for a, b in zip(lo, hi))] = piece
            return out

        return Pending(fut, assemble)

    def scatter(self, handle: _Handle, field: int, array: np.ndarray, seq: int) -> None:
        for index in np.ndindex(*handle.dims):
            lo, hi = tile_bounds(index, handle.dims, handle.spec.shape)
            piece = np.ascontiguousarray(array[tuple(slice(a, b) for a, b in zip(lo, hi))])
            handle.tiles[index].scatter(seq, field, piece)

    def reduce(self, handle: _Handle, rid: int, finish: str, seq: int) -> Pending:
        import shoal

        fut = shoal.Future()
        handle.tiles.reduce(seq, rid, fut)
        return Pending(fut, math.sqrt if finish == "sqrt" else float)

    def destroy(self, handle: _Handle) -> None:
        import shoal

        handle.tiles.free()
        shoal.destroy(handle.tiles)

    def describe(self, handle: _Handle) -> str:
        n = int(np.prod(handle.dims))
        where = f"{handle.npes} PE{'s' if handle.npes > 1 else ''}"
        if not handle.spec.frontend_tiles and handle.npes > 1:
            where = f"PEs 1-{handle.npes - 1} (PE 0 runs the frontend only)"
        return f"{n} tiles ({' x '.join(map(str, handle.dims))}) on {where}"


def connect(interface: Interface | None) -> Interface:
    """The interface to use: the given one, or the PEs of this job (started if needed)."""
    if interface is None:
        from .session import ensure_runtime

        ensure_runtime()
        return LocalInterface()
    if not isinstance(interface, Interface):
        raise TypeError(f"interface={interface!r} is not a shoal.stencil.Interface (None means: the PEs of this job)")
    return interface
