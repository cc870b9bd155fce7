"""What each balancing round did, kept by its coordinator; and a job's start-up part of balancing.

A :class:`RoundRecord` holds the phases of one at_sync round (when the last READY report
came, when the plan went out, when the round ended), what it moved, the modules the PEs
imported while reporting and deciding (none, once :func:`prepare` has run: a first round
that imports something waits for it), and the period ``--lb-period auto`` chose after it.
``Balancer.history`` keeps the last :data:`KEPT` of them.

:func:`prepare` runs when a job that balances starts: it imports NumPy and the
strategies and calls the job's strategy, if it is a built-in one, on a tiny input, so
that what a strategy loads on first use (modules, caches) is loaded then. Before, the
first round of a job waited 40-75 ms for NumPy's import on every PE (issue 37).
"""

from __future__ import annotations

__all__ = ["KEPT", "RoundRecord", "prepare"]

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

#: the rounds ``Balancer.history`` keeps (the last ones)
KEPT = 256


class RoundRecord:
    """One at_sync round of one Array, as its coordinator saw it (``perf_counter`` times)."""

    __slots__ = ("number", "ready", "decided", "finished", "moves", "moved_bytes", "imported", "measured", "period")

    def __init__(self, number: int, ready: float):
        self.number = number  # the at_sync round (1, 2, ...)
        self.ready = ready  # the last READY report came: every element is in at_sync
        self.decided = 0.0  # the strategy decided; the plan went out
        self.finished = 0.0  # every moved element landed; RESUME went out
        self.moves = 0
        self.moved_bytes = 0.0  # the moved elements' state, where the strategy measured it (auto), else 0
        self.imported = 0  # modules imported on the PEs while they reported and the coordinator decided
        self.measured: Any = None  # with --lb-period auto: the interval's lb_period.Interval
        self.period = 0  # with --lb-period auto: the at_sync calls until the next round

    def as_dict(self) -> dict:
        """The record as plain values (times in ms from the last READY)."""
        return {"number": self.number, "decide_ms": (self.decided - self.ready) * 1e3,
                "round_ms": (self.finished - self.ready) * 1e3, "moves": self.moves, "moved_bytes": self.moved_bytes,
                "imported": self.imported, "measured": repr(self.measured), "period": self.period}

    def __repr__(self) -> str:
        return f"RoundRecord({self.as_dict()})"


def prepare(name: str) -> None:
    """Load what the rounds of strategy ``name`` use: NumPy, the strategies, and whatever a
    built-in strategy loads on its first call (a user's strategy is not called: it may be
    registered later, and its first call is the user's)."""
    import numpy as np

    from .lb_period import interval
    from .strategies import REASONED, CommGraph, background_speeds, check_placement
    from .strategy_registry import builtin_strategy, get_strategy, takes_sizes

    fn = builtin_strategy(name)
    if fn is None or get_strategy(name) is not fn:  # not a built-in, or the program replaced it
        return
    loads = np.array([3.0, 1.0, 1.0, 1.0])
    placement = np.array([0, 0, 0, 1], dtype=np.int64)
    speeds = np.ones(2)
    comm = CommGraph(*(np.array([0, 1], dtype=np.int64),) * 2, np.array([1, 1], dtype=np.int64),
                     np.array([8, 8], dtype=np.int64))
    options = {"sizes": np.full(4, 512.0)} if takes_sizes(fn) else {}
    new = check_placement(fn(loads, comm, placement, 2, speeds, **options), 4, 2, name)
    background_speeds(np.ones(2), np.ones(2), np.zeros(2))
    interval(loads, new, speeds, 1, 0.0).drift()
    reasoned = REASONED.get(fn)
    if reasoned is not None:
        reasoned(loads, comm, placement, 2, speeds, **options)
