"""Task Bench task graphs: points over timesteps, and who depends on whom.

A graph has ``timesteps`` rows of at most ``max_width`` tasks. Row ``t`` holds the
points ``offset(t) … offset(t) + width(t) - 1``; the task ``(t, p)`` reads the outputs
of its *dependencies* in row ``t - 1`` and its output is read by its *reverse
dependencies* in row ``t + 1``. Dependencies are given as inclusive intervals of
points; those outside the previous row's points are dropped. Patterns with more than
one *dependence set* (``fft``, ``spread``, ``random_nearest``) cycle through them with
the timestep. Everything here is pure and deterministic: every process and every
system under test computes the same graph.

The semantics are those of the reference Task Bench core (``core/core.cc``), with
two edge cases defined where the reference's own graph check rejects the graph:

* ``stencil_1d_periodic`` with ``max_width`` 1 or 2: the wrap-around neighbour is
  already in the stencil, so it is not listed twice (the reference lists it twice and
  its check fails on the duplicate);
* ``fft`` with ``max_width`` 1 has one dependence set (the reference computes
  ``ceil(log2(1)) = 0`` sets and divides by zero).

``random_spread`` is declared by the reference but never implemented; it is left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Iterator

from .siphash import random_uniform

__all__ = [
    "DependenceType",
    "KernelType",
    "Kernel",
    "TaskGraph",
    "GraphError",
    "Interval",
    "expand",
]

#: an inclusive interval of points, ``(first, last)``
Interval = tuple[int, int]


class GraphError(ValueError):
    """A graph's parameters are inconsistent; the message names the parameter and the fix."""


class DependenceType(str, Enum):
    TRIVIAL = "trivial"
    NO_COMM = "no_comm"
    STENCIL_1D = "stencil_1d"
    STENCIL_1D_PERIODIC = "stencil_1d_periodic"
    DOM = "dom"
    TREE = "tree"
    FFT = "fft"
    ALL_TO_ALL = "all_to_all"
    NEAREST = "nearest"
    SPREAD = "spread"
    RANDOM_NEAREST = "random_nearest"


class KernelType(str, Enum):
    """Kernels, numbered as ``kernels.c`` numbers them."""

    EMPTY = "empty"
    BUSY_WAIT = "busy_wait"
    MEMORY_BOUND = "memory_bound"
    COMPUTE_BOUND = "compute_bound"
    COMPUTE_BOUND2 = "compute_bound2"
    LOAD_IMBALANCE = "load_imbalance"

    @property
    def code(self) -> int:
        return list(KernelType).index(self)


#: patterns whose period (number of dependence sets) the user sets with -period
NEEDS_PERIOD = frozenset({DependenceType.SPREAD, DependenceType.RANDOM_NEAREST})


@dataclass(frozen=True, slots=True)
class Kernel:
    """What each task computes (``-kernel -iter -sample -imbalance``)."""

    type: KernelType = KernelType.EMPTY
    iterations: int = 0
    samples: int = 16
    imbalance: float = 0.0


def expand(intervals: tuple[Interval, ...]) -> Iterator[int]:
    """The points of a list of inclusive intervals, in order."""
    for first, last in intervals:
        yield from range(first, last + 1)


@dataclass(frozen=True)
class TaskGraph:
    """One task graph (the parameters between two ``-and`` flags)."""

    graph_index: int = 0
    timesteps: int = 4
    max_width: int = 4
    dependence: DependenceType = DependenceType.TRIVIAL
    radix: int = 3
    period: int = 0
    fraction_connected: float = 0.25
    kernel: Kernel = Kernel()
    output_bytes_per_task: int = 16
    scratch_bytes_per_task: int = 0
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_cache"}

    def __setstate__(self, state: dict) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_cache", {})

    def with_iterations(self, iterations: int) -> "TaskGraph":
        """The same graph with another kernel iteration count."""
        return replace(self, kernel=replace(self.kernel, iterations=iterations))

    # ------------------------------------------------------------ rows

    def offset_at_timestep(self, timestep: int) -> int:
        """The first point of row ``timestep`` (0 before the first row)."""
        if timestep < 0:
            return 0
        if self.dependence is DependenceType.DOM:
            return max(0, timestep + self.max_width - self.timesteps)
        return 0

    def width_at_timestep(self, timestep: int) -> int:
        """The number of points of row ``timestep`` (0 before the first row)."""
        if timestep < 0:
            return 0
        if self.dependence is DependenceType.DOM:
            return min(self.max_width, timestep + 1, self.timesteps - timestep)
        if self.dependence is DependenceType.TREE:
            return min(self.max_width, 1 << min(timestep, 62))
        return self.max_width

    def active(self, timestep: int, point: int) -> bool:
        """Whether the task ``(timestep, point)`` exists."""
        if not 0 <= timestep < self.timesteps:
            return False
        offset = self.offset_at_timestep(timestep)
        return offset <= point < offset + self.width_at_timestep(timestep)

    # ------------------------------------------------------------ dependence sets

    def max_dependence_sets(self) -> int:
        d = self.dependence
        if d is DependenceType.FFT:
            return max(1, math.ceil(math.log2(self.max_width)))
        if d in NEEDS_PERIOD:
            return self.period
        return 1

    def dependence_set_at_timestep(self, timestep: int) -> int:
        d, n = self.dependence, self.max_dependence_sets()
        if d is DependenceType.FFT:
            return (timestep + n - 1) % n
        if d in NEEDS_PERIOD:
            return timestep % n
        return 0

    # ------------------------------------------------------------ dependencies

    def dependencies(self, dset: int, point: int) -> tuple[Interval, ...]:
        """The producers (in the previous row) of ``point``, as inclusive intervals."""
        key = ("deps", dset, point)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._dependencies(dset, point, reverse=False)
        return found

    def reverse_dependencies(self, dset: int, point: int) -> tuple[Interval, ...]:
        """The consumers (in the next row, of dependence set ``dset``) of ``point``."""
        key = ("rdeps", dset, point)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._dependencies(dset, point, reverse=True)
        return found

    def _dependencies(self, dset: int, point: int, reverse: bool) -> tuple[Interval, ...]:
        d, w, r = self.dependence, self.max_width, self.radix
        if d is DependenceType.TRIVIAL:
            return ()
        if d is DependenceType.NO_COMM:
            return ((point, point),)
        if d is DependenceType.STENCIL_1D:
            return ((max(0, point - 1), min(point + 1, w - 1)),)
        if d is DependenceType.STENCIL_1D_PERIODIC:
            main = (max(0, point - 1), min(point + 1, w - 1))
            out = [main]
            for wrap, needed in ((w - 1, point - 1 < 0), (0, point + 1 >= w)):
                if needed and not main[0] <= wrap <= main[1] and (wrap, wrap) not in out:
                    out.append((wrap, wrap))
            return tuple(out)
        if d is DependenceType.DOM:
            if reverse:
                return ((point, min(w - 1, point + 1)),)
            return ((max(0, point - 1), point),)
        if d is DependenceType.TREE:
            if not reverse:
                return ((point // 2, point // 2),)
            child = 2 * point
            if child + 1 < w:
                return ((child, child + 1),)
            return ((child, child),) if child < w else ()
        if d is DependenceType.FFT:
            out = []
            if point - (1 << dset) >= 0:
                out.append((point - (1 << dset),) * 2)
            out.append((point, point))
            if point + (1 << dset) < w:
                out.append((point + (1 << dset),) * 2)
            return tuple(out)
        if d is DependenceType.ALL_TO_ALL:
            return ((0, w - 1),)
        if d is DependenceType.NEAREST:
            if r <= 0:
                return ()
            below, above = (r - 1) // 2, r // 2  # consumers: below/above; producers: mirrored
            if not reverse:
                below, above = above, below
            return ((max(0, point - below), min(point + above, w - 1)),)
        if d is DependenceType.SPREAD:
            sign = -1 if reverse else 1
            return tuple(
                ((point + sign * (i * w // r + (dset if i > 0 else 0))) % w,) * 2 for i in range(r)
            )
        if d is DependenceType.RANDOM_NEAREST:
            below, above = (r - 1) // 2, r // 2
            if not reverse:
                below, above = above, below
            out, run_start = [], -1
            last = min(point + above, w - 1)
            for i in range(max(0, point - below), last + 1):
                producer, consumer = (point, i) if reverse else (i, point)
                value = random_uniform((self.graph_index, r, dset, producer, consumer))
                if value < self.fraction_connected or (r > 0 and i == point):
                    if run_start < 0:
                        run_start = i
                else:
                    if run_start >= 0:
                        out.append((run_start, i - 1))
                    run_start = -1
            if run_start >= 0:
                out.append((run_start, last))
            return tuple(out)
        raise GraphError(f"unknown dependence type {d!r}")

    # ------------------------------------------------------------ per task

    def inputs(self, timestep: int, point: int) -> tuple[int, ...]:
        """The producers of task ``(timestep, point)`` that exist, in order: one input each."""
        key = ("in", timestep, point)
        found = self._cache.get(key)
        if found is None:
            if not self.active(timestep, point):
                found = ()
            else:
                lo = self.offset_at_timestep(timestep - 1)
                hi = lo + self.width_at_timestep(timestep - 1)
                dset = self.dependence_set_at_timestep(timestep)
                found = tuple(q for q in expand(self.dependencies(dset, point)) if lo <= q < hi)
            self._cache[key] = found
        return found

    def outputs(self, timestep: int, point: int) -> tuple[int, ...]:
        """The consumers (in row ``timestep + 1``) of task ``(timestep, point)`` that exist."""
        key = ("out", timestep, point)
        found = self._cache.get(key)
        if found is None:
            if not self.active(timestep, point) or timestep + 1 >= self.timesteps:
                found = ()
            else:
                lo = self.offset_at_timestep(timestep + 1)
                hi = lo + self.width_at_timestep(timestep + 1)
                dset = self.dependence_set_at_timestep(timestep + 1)
                found = tuple(q for q in expand(self.reverse_dependencies(dset, point)) if lo <= q < hi)
            self._cache[key] = found
        return found

    def max_inputs(self) -> int:
        """The largest number of inputs any task of this graph can have."""
        return max(
            (sum(b - a + 1 for a, b in self.dependencies(dset, p)) for dset in range(self.max_dependence_sets()) for p in range(self.max_width)),
            default=0,
        )

    # ------------------------------------------------------------ check

    def check(self) -> None:
        """Reject an ill-formed graph, as the reference's ``App::check`` does.

        Beyond the reference, reverse dependencies must mirror dependencies exactly
        (both directions), which every pattern here satisfies by construction.
        """
        d = self.dependence
        if self.timesteps <= 0 or self.max_width <= 0:
            raise GraphError(f"-steps and -width must be > 0 (got {self.timesteps} and {self.max_width})")
        if d in NEEDS_PERIOD and self.period == 0:
            raise GraphError(f'graph type "{d.value}" requires a non-zero period (specify with -period)')
        if d not in NEEDS_PERIOD and self.period != 0:
            raise GraphError(f'graph type "{d.value}" does not support user-configurable period')
        if d is DependenceType.SPREAD:
            if self.radix <= 0:
                raise GraphError('graph type "spread" requires -radix > 0')
            spread = (self.max_width + self.radix - 1) // self.radix
            if self.period > spread:
                raise GraphError(f'graph type "spread" requires a period that is at most {spread} (got -period {self.period})')
        if self.output_bytes_per_task < 16:
            raise GraphError(f"-output must be at least 16 bytes (one (timestep, point) pair), got {self.output_bytes_per_task}")
        if self.scratch_bytes_per_task % 8:
            raise GraphError(f"-scratch must be a multiple of 8 bytes, got {self.scratch_bytes_per_task}")
        if self.kernel.type is KernelType.MEMORY_BOUND and (self.scratch_bytes_per_task <= 0 or self.kernel.samples <= 0):
            raise GraphError("kernel memory_bound needs -scratch > 0 and -sample > 0")
        for t in range(self.timesteps):
            offset, width = self.offset_at_timestep(t), self.width_at_timestep(t)
            if offset < 0 or width < 0 or offset + width > self.max_width:
                raise GraphError(f"timestep {t}: offset {offset} and width {width} leave 0..{self.max_width - 1}")
        for dset in range(self.max_dependence_sets()):
            forward: dict[int, set[int]] = {}
            for p in range(self.max_width):
                seen: set[int] = set()
                for q in expand(self.dependencies(dset, p)):
                    if not 0 <= q < self.max_width:
                        raise GraphError(f"{d.value}: point {p} depends on {q}, outside 0..{self.max_width - 1}")
                    if q in seen:
                        raise GraphError(
                            f"{d.value}: point {p} lists dependency {q} twice in dependence set {dset} "
                            f"(width {self.max_width}, radix {self.radix}, period {self.period}); use a larger -width"
                        )
                    seen.add(q)
                forward[p] = seen
            for q in range(self.max_width):
                consumers = set(expand(self.reverse_dependencies(dset, q)))
                expected = {p for p, deps in forward.items() if q in deps}
                if consumers != expected:
                    raise GraphError(
                        f"{d.value}: reverse dependencies of point {q} in set {dset} are {sorted(consumers)}, "
                        f"but the points depending on it are {sorted(expected)}"
                    )
