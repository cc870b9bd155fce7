"""The catalogue of micro-benchmarks: names, OSU titles, units and default counts.

One table describes every test once, so option checking, output headers, the job
size rules and the default iteration counts all read the same facts. The defaults
are OSU's: 8 KiB is the large-message threshold, above which fewer iterations and
warm-up rounds are run.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Test", "TESTS", "POINT_TO_POINT", "COLLECTIVES", "LARGE_MESSAGE", "get"]

#: Messages larger than this many bytes use the "large" iteration counts (OSU's 8 KiB).
LARGE_MESSAGE = 8192


@dataclass(frozen=True, slots=True)
class Test:
    """One benchmark: what it measures and how OSU runs it by default."""

    name: str
    title: str  # the OSU title words, e.g. "Latency Test"
    kind: str  # "p2p" or "collective"
    unit: str  # "us" or "MB/s"
    dtype: str  # element type: "char" (bytes) or "float" (float32, for reductions)
    pes: str  # "two", "even" or "many" (at least two)
    iters: int
    warmup: int
    iters_large: int
    warmup_large: int
    max_size: int
    sized: bool = True  # False for barrier: one row, no message size

    @property
    def elem(self) -> int:
        """Bytes per element: message sizes below this are skipped."""
        return 4 if self.dtype == "float" else 1

    @property
    def mpi_datatype(self) -> str:
        """The MPI datatype named on the ``# Datatype:`` line."""
        return "MPI_FLOAT" if self.dtype == "float" else "MPI_CHAR"

    @property
    def vector(self) -> bool:
        """Whether this is a vector (``…v``) variant of a collective."""
        return self.kind == "collective" and self.name.endswith("v")

    def check_pes(self, n: int) -> str | None:
        """Why ``n`` PEs cannot run this test, or None if they can."""
        if self.pes == "two" and n != 2:
            return f"{self.name} runs on exactly 2 PEs, not {n} (use -n 2, or multi_lat for pairs)"
        if self.pes == "even" and (n < 2 or n % 2):
            return f"{self.name} pairs PE i with PE i+N/2, so it needs an even number of PEs, not {n}"
        if self.pes == "many" and n < 2:
            return f"{self.name} needs at least 2 PEs, not {n}"
        return None


_MiB = 1 << 20
#: OSU's default (iterations, warm-up, large iterations, large warm-up, largest size)
_LATENCY = (10000, 100, 1000, 10, 4 * _MiB)
_BANDWIDTH = (100, 10, 20, 2, 4 * _MiB)
_COLLECTIVE = (1000, 200, 100, 10, _MiB)


def _p2p(name: str, title: str, pes: str, counts: tuple[int, int, int, int, int]) -> Test:
    unit = "MB/s" if counts is _BANDWIDTH else "us"
    return Test(name, title, "p2p", unit, "char", pes, *counts)


def _coll(name: str, title: str, dtype: str = "char", sized: bool = True) -> Test:
    return Test(name, title, "collective", "us", dtype, "many", *_COLLECTIVE, sized=sized)


_ALL = [
    _p2p("latency", "Latency Test", "two", _LATENCY),
    _p2p("bw", "Bandwidth Test", "two", _BANDWIDTH),
    _p2p("bibw", "Bi-Directional Bandwidth Test", "two", _BANDWIDTH),
    _p2p("multi_lat", "Multi Latency Test", "even", _LATENCY),
    _coll("allgather", "Allgather Latency Test"),
    _coll("allreduce", "Allreduce Latency Test", dtype="float"),
    _coll("alltoall", "All-to-All Personalized Exchange Latency Test"),
    _coll("barrier", "Barrier Latency Test", sized=False),
    _coll("bcast", "Broadcast Latency Test"),
    _coll("gather", "Gather Latency Test"),
    _coll("reduce_scatter", "Reduce_scatter Latency Test", dtype="float"),
    _coll("reduce", "Reduce Latency Test", dtype="float"),
    _coll("scatter", "Scatter Latency Test"),
    _coll("allgatherv", "Allgatherv Latency Test"),
    _coll("alltoallv", "All-to-Allv Personalized Exchange Latency Test"),
    _coll("gatherv", "Gatherv Latency Test"),
    _coll("scatterv", "Scatterv Latency Test"),
]

#: name -> Test, in OSU's order
TESTS: dict[str, Test] = {t.name: t for t in _ALL}
POINT_TO_POINT = tuple(t.name for t in _ALL if t.kind == "p2p")
COLLECTIVES = tuple(t.name for t in _ALL if t.kind == "collective")


def get(name: str) -> Test:
    """The test called ``name``; a KeyError naming the valid ones otherwise."""
    try:
        return TESTS[name]
    except KeyError:
        raise KeyError(f"unknown test {name!r}; valid tests: {', '.join(TESTS)}, all") from None
