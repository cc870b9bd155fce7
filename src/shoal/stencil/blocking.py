"""Temporal blocking: several steps of a backend loop in one pass over memory.

A step of an 8192² Burgers grid reads and writes 48 bytes per point from main memory
and computes about 60 flops there: the kernel runs at 1.4 ns per point on such a grid
and at 0.55 ns on one that fits in the L3 cache (hand-written C, this machine). So when
a time loop runs on a tile with no neighbours (one tile: nothing to exchange between
steps), or in deep passes between two ghost exchanges (:mod:`shoal.stencil.deep_halo`),
the backend runs ``depth`` steps per pass as a *wavefront* along the outer axis: in
each wave, the first statement computes the next ``band`` layers, the second the layers
``lag`` behind it, and so on (:func:`~shoal.stencil.printer_c.print_wavefront` is the C
driver). The layers in flight stay in cache, and memory is crossed once per
``depth`` steps instead of once per step.

Exact: each point is computed by the same compiled kernel, with the same operands, as
in the plain order. ``lag`` is the deepest outer-axis offset any statement of the loop
reads, so when a statement computes a layer, every layer it reads was written by the
statements before it (they are at least ``lag`` ahead) and not yet overwritten by
those after it (at least ``lag`` behind). Statements that run with NumPy or through a
scratch box (they read their target at an offset) make the loop run plainly.

A 3-D tile whose planes do not fit the cache runs the wavefront in strips of axis 1,
skewed by the axis-1 reach per statement (:func:`plan` chooses their width).

This module decides whether and how (:func:`plan`) and runs passes (:class:`TimeBlocker`);
``backend.Tile`` decides when it applies (CPU, compiled statements; one tile, or deep
passes on several).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any, Callable, Hashable, NamedTuple, Sequence

from .build import load_wavefront

__all__ = ["BlockStatement", "Plan", "plan", "in_order", "cache_budget", "TimeBlocker", "MAX_DEPTH", "BAND",
           "MIN_WIDTH"]

#: most steps per pass: 8 steps took Burgers 8192² from 94 to 52 ms per step, 16 to 51.6
#: (prototype of the driver on the hand-written loop, 8 steps per run)
MAX_DEPTH = 8
#: outer-axis layers each statement advances per wave (1, 4 and 16 measured alike)
BAND = 4


class BlockStatement(NamedTuple):
    """One compiled statement of a loop body on one tile, as the driver calls it."""

    fn: int  # address of its shoal_kernel
    ptrs: Any  # its slot pointers (a ctypes array: kept alive here)
    box: tuple[tuple[int, int], ...]  # tile-local (first index, count) per axis
    steps: tuple[int, ...]  # loop step per axis
    fields: tuple[int, ...]  # the fields it reads and writes
    accesses: tuple  # (field, offsets) of each read


class Plan(NamedTuple):
    depth: int  # steps per pass
    band: int
    lag: int
    width: int = 0  # rows of axis 1 per strip (0: whole layers)
    lag1: int = 0  # the deepest axis-1 offset read (with strips)


#: fewest axis-1 rows per strip worth running (each kernel call then covers band x width rows)
MIN_WIDTH = 8


@functools.lru_cache(maxsize=None)
def cache_budget() -> int:
    """Bytes the layers in flight may take: a quarter of the last-level cache (the
    other core and other jobs use it too), 2 MiB if sysfs does not say."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            size = int(text.rstrip("KMG")) * scale
        except ValueError:
            continue
        best = max(best, size)
    return best // 4 if best else 2 << 20


def plan(per_step: Sequence[Sequence[BlockStatement]], layer_bytes: int, layers: int, budget: int,
         band: int = BAND, max_depth: int = MAX_DEPTH, rows: int = 0) -> Plan | None:
    """How to block a loop whose steps run ``per_step`` statements on a tile of
    ``layers`` outer-axis layers, one layer of all the fields they touch taking
    ``layer_bytes``; None if under two steps fit in ``budget``.

    A pass of ``depth`` steps keeps about ``depth * statements_per_step * lag + band +
    2 * lag`` layers in cache. A tile that fits in the budget whole gains nothing from
    thin bands (Burgers 512²: 4-layer bands were 4% slower than plain steps), only from
    running ``depth`` steps per call from Python (64²: 1.9x): its band is the tile.

    Where whole layers do not fit (the planes of a 512³ grid) and ``rows`` (the layers'
    extent along axis 1, given for 3-D tiles) allows, the pass runs ``MAX_DEPTH`` steps
    in strips of axis 1 as wide as fit (at least ``MIN_WIDTH`` rows, plus the skew of
    ``lag1`` rows per statement in flight)."""
    lag = _lag(per_step)
    per = max(1, max(len(s) for s in per_step))
    if layers * layer_bytes <= budget:
        band = max(band, layers)
    fit = budget // max(1, layer_bytes)
    depth = max_depth if band >= layers else min(max_depth, (fit - band - 2 * lag) // (per * lag))
    if depth >= 2:
        return Plan(depth, band, lag)
    if rows <= 0:
        return None
    lag1 = _lag(per_step, 1)
    in_flight = band + 2 * lag + max_depth * per * lag
    width = int(budget * rows // (layer_bytes * in_flight)) - max_depth * per * lag1
    return Plan(max_depth, band, lag, width, lag1) if width >= MIN_WIDTH else None


def in_order(per_step: Sequence[Sequence[BlockStatement]], layers: int) -> Plan:
    """A plan without a wavefront, for a tile of ``layers`` outer-axis layers: one band
    takes each statement over its whole box, in order (a deep pass on a tile whose
    layers in flight :func:`plan` cannot fit in the cache: its exchanges are still
    saved)."""
    lag = _lag(per_step)
    per = max(1, max(len(s) for s in per_step))
    return Plan(MAX_DEPTH, layers + MAX_DEPTH * per * lag, lag)


def _lag(per_step: Sequence[Sequence[BlockStatement]], axis: int = 0) -> int:
    """The deepest offset along ``axis`` the statements read (at least 1)."""
    return max([1] + [abs(off[axis]) for stmts in per_step for s in stmts for _, off in s.accesses])


class TimeBlocker:
    """Runs passes of a loop body's steps on one tile with the wavefront driver:
    ``plan.depth`` steps per wavefront (a longer pass, a deep one, runs several)."""

    def __init__(self, per_step: Sequence[Sequence[BlockStatement]], the_plan: Plan, strides: Any, ndim: int,
                 cflags: Sequence[str]):
        self.per_step = [list(s) for s in per_step]
        self.plan = the_plan
        self.strides = strides
        self.ndim = ndim
        self.driver = load_wavefront(cflags)
        self.calls: dict[Hashable, list[tuple]] = {}

    def run(self, start: int, count: int) -> int:
        """Steps ``start .. start + count - 1`` of the body (indices modulo its period)
        in one pass; returns the number of kernel calls."""
        p = len(self.per_step)
        return self.run_steps((start, count), lambda: [self.per_step[(start + j) % p] for j in range(count)])

    def run_steps(self, key: Hashable, steps: Callable[[], Sequence[Sequence[BlockStatement]]]) -> int:
        """Run the statements ``steps()`` gives (one list per step, each statement with
        its box) in order, as wavefronts of ``plan.depth`` steps; ``key`` names this
        pass, whose driver arguments are built once. Returns the number of kernel calls."""
        args = self.calls.get(key)
        if args is None:
            listed = [list(s) for s in steps()]
            d = self.plan.depth
            chunks = ([s for step in listed[j:j + d] for s in step] for j in range(0, len(listed), d))
            args = self.calls[key] = [a for a in map(self._arguments, chunks) if a]
        return sum(int(self.driver(*a[:12])) for a in args)

    def _arguments(self, stmts: list[BlockStatement]) -> tuple:
        """The driver's arguments for these statements, then what must outlive the calls
        (the driver gets some arrays by address only)."""
        m, d = len(stmts), self.ndim
        if m == 0:
            return ()
        fns = (ctypes.c_void_p * m)(*(s.fn for s in stmts))
        ptrs = (ctypes.c_void_p * m)(*(ctypes.addressof(s.ptrs) for s in stmts))
        b = (ctypes.c_long * (m * d))(*(x for s in stmts for x, _ in s.box))
        n = (ctypes.c_long * (m * d))(*(x for s in stmts for _, x in s.box))
        st = (ctypes.c_long * (m * d))(*(x for s in stmts for x in s.steps))
        p = self.plan
        return (m, d, ctypes.addressof(fns), ctypes.addressof(ptrs), b, n, st, self.strides, p.lag, p.band,
                p.width, p.lag1, (fns, ptrs, stmts))
