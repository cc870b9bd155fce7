"""Temporal blocking: several steps of a backend loop in one pass over memory.

A step of an 8192² Burgers grid reads and writes 48 bytes per point from main memory
and computes about 60 flops there: the kernel runs at 1.4 ns per point on such a grid
and at 0.55 ns on one that fits in the L3 cache (hand-written C, this machine). So when
a time loop runs on a tile with no neighbours (one tile: nothing to exchange between
steps), the backend runs ``depth`` steps per pass as a *wavefront* along the outer
axis: in each wave, the first statement computes the next ``band`` layers, the second
the layers ``lag`` behind it, and so on (:func:`~shoal.stencil.printer_c.print_wavefront`
is the C driver). The layers in flight stay in cache, and memory is crossed once per
``depth`` steps instead of once per step.

Exact: each point is computed by the same compiled kernel, with the same operands, as
in the plain order. ``lag`` is the deepest outer-axis offset any statement of the loop
reads, so when a statement computes a layer, every layer it reads was written by the
statements before it (they are at least ``lag`` ahead) and not yet overwritten by
those after it (at least ``lag`` behind). Statements that run with NumPy or through a
scratch box (they read their target at an offset) make the loop run plainly.

This module decides whether and how (:func:`plan`) and runs passes (:class:`TimeBlocker`);
``backend.Tile`` decides when it applies (one tile, CPU, compiled statements).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from .build import load_wavefront

__all__ = ["BlockStatement", "Plan", "plan", "cache_budget", "TimeBlocker", "MAX_DEPTH", "BAND"]

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
    outer_step: int  # loop step along the outer axis
    fields: tuple[int, ...]  # the fields it reads and writes
    accesses: tuple  # (field, offsets) of each read


class Plan(NamedTuple):
    depth: int  # steps per pass
    band: int
    lag: int


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
         band: int = BAND, max_depth: int = MAX_DEPTH) -> Plan | None:
    """How to block a loop whose steps run ``per_step`` statements on a tile of
    ``layers`` outer-axis layers, one layer of all the fields they touch taking
    ``layer_bytes``; None if under two steps fit in ``budget``.

    A pass of ``depth`` steps keeps about ``depth * statements_per_step * lag + band +
    2 * lag`` layers in cache. A tile that fits in the budget whole gains nothing from
    thin bands (Burgers 512²: 4-layer bands were 4% slower than plain steps), only from
    running ``depth`` steps per call from Python (64²: 1.9x): its band is the tile."""
    lag = 1
    for stmts in per_step:
        for s in stmts:
            for _, off in s.accesses:
                lag = max(lag, abs(off[0]))
    per = max(1, max(len(s) for s in per_step))
    if layers * layer_bytes <= budget:
        band = max(band, layers)
    fit = budget // max(1, layer_bytes)
    depth = max_depth if band >= layers else min(max_depth, (fit - band - 2 * lag) // (per * lag))
    return Plan(depth, band, lag) if depth >= 2 else None


class TimeBlocker:
    """Runs passes of a loop body's steps on one tile with the wavefront driver."""

    def __init__(self, per_step: Sequence[Sequence[BlockStatement]], the_plan: Plan, strides: Any, ndim: int,
                 cflags: Sequence[str]):
        self.per_step = [list(s) for s in per_step]
        self.plan = the_plan
        self.strides = strides
        self.ndim = ndim
        self.driver = load_wavefront(cflags)
        self.calls: dict[tuple[int, int], tuple] = {}

    def run(self, start: int, count: int) -> int:
        """Steps ``start .. start + count - 1`` of the body (indices modulo its period)
        in one pass; returns the number of kernel calls."""
        args = self.calls.get((start, count))
        if args is None:
            args = self.calls[(start, count)] = self._arguments(start, count)
        if not args:
            return 0
        return int(self.driver(*args[:10]))

    def _arguments(self, start: int, count: int) -> tuple:
        """The driver's arguments for these steps, then what must outlive the calls
        (the driver gets some arrays by address only)."""
        p = len(self.per_step)
        stmts = [s for j in range(count) for s in self.per_step[(start + j) % p]]
        m, d = len(stmts), self.ndim
        if m == 0:
            return ()
        fns = (ctypes.c_void_p * m)(*(s.fn for s in stmts))
        ptrs = (ctypes.c_void_p * m)(*(ctypes.addressof(s.ptrs) for s in stmts))
        b = (ctypes.c_long * (m * d))(*(x for s in stmts for x, _ in s.box))
        n = (ctypes.c_long * (m * d))(*(x for s in stmts for _, x in s.box))
        st = (ctypes.c_long * m)(*(s.outer_step for s in stmts))
        return (m, d, ctypes.addressof(fns), ctypes.addressof(ptrs), b, n, st, self.strides, self.plan.lag,
                self.plan.band, (fns, ptrs, stmts))
