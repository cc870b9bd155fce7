"""How often to balance (``--lb-period auto``): a pure function of what the last rounds measured.

Between two rounds the load drifts: a placement balanced at one round grows uneven as the
elements' costs change. Balancing often keeps the PEs even but pays a round each time
(the barrier of ``at_sync``, the strategy, the moves); balancing rarely saves rounds and
loses time to the imbalance that builds up. With a residual imbalance ``r`` (seconds per
``at_sync`` interval that even a fresh placement leaves) and a drift ``g`` (the loss
grows by ``g`` seconds per interval, each interval), a period of ``P`` intervals loses
``r * P + g * P**2 / 2`` seconds to imbalance and pays one round of ``c`` seconds, so the
loss per interval, ``r + g * P / 2 + c / P``, is least at ``P = sqrt(2 c / g)`` (the
model of Menon et al., "Automated load balancing invocation based on application
characteristics", CLUSTER 2012).

:func:`next_period` takes one round's measurements and returns the next period: longer
(up to twice) while the load is stable, shorter at once when it drifts. The balancer
(:mod:`.balancing`) measures, calls it at the end of each round and sends the period with
the round's RESUME; each element balances again after that many more ``at_sync`` calls.
"""

from __future__ import annotations

import math

__all__ = ["AUTO", "LONGEST", "RISE", "STABLE", "Interval", "next_floor", "next_period", "interval"]

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

#: ``SHOAL_LB_PERIOD`` for an adaptive period (``--lb-period auto``)
AUTO = -1
#: the longest period auto chooses, in at_sync calls
LONGEST = 1024
#: an interval whose slowest PE was at most this much above the mean counts as stable
STABLE = 0.05


class Interval:
    """What a round measured of the interval since the last one (all times in seconds).

    The loss shows two ways. In the elements' loads: the slowest PE's total less the mean
    (``lost``), beyond what the last placement left (``residual``). And in the PEs' idle
    time (``idle``, the mean over PEs), beyond the idle time per at_sync of the earlier
    intervals (``floor``, :func:`next_floor`: what communication and noise cost). Totals
    over an interval can hide a load that moved within it (a hot spot that crossed every PE
    looks even), idle time cannot; idle time includes waits that are no imbalance (messages,
    other processes on the cores), which the floor takes out. The drift is the larger.
    """

    __slots__ = ("period", "lost", "mean", "residual", "idle", "floor")

    def __init__(self, period: int, lost: float, mean: float, residual: float, idle: float = 0.0,
                 floor: float | None = None):
        self.period = period  # at_sync calls per element in the interval
        self.lost = lost  # the slowest PE's time in entry methods less the mean over PEs
        self.mean = mean  # the mean over PEs of that time
        self.residual = residual  # loss per at_sync the previous round's placement predicted
        self.idle = idle  # the mean over PEs of their idle time in the interval
        self.floor = idle / max(period, 1) if floor is None else floor  # idle per at_sync before

    def excess(self) -> float:
        """Seconds the interval lost beyond what an even load costs (0 within :data:`STABLE` of the mean)."""
        p = self.period
        by_loads = self.lost - self.residual * p
        by_idle = self.idle - self.floor * p
        worst = max(by_loads if self.lost > STABLE * self.mean else 0.0, by_idle)
        return worst if worst > STABLE * self.mean else 0.0

    def drift(self) -> float:
        """``g``: how much the loss per interval grew per interval (s), 0 if it did not."""
        return 2.0 * self.excess() / (self.period * self.period)

    def __repr__(self) -> str:
        return (f"Interval(period={self.period}, lost={self.lost:.3g}, mean={self.mean:.3g}, "
                f"residual={self.residual:.3g}, idle={self.idle:.3g}, floor={self.floor:.3g})")


def interval(loads: Any, placement: Any, speeds: Any, period: int, residual: float, idle: Any = None,
             floor: float | None = None) -> Interval:
    """The :class:`Interval` of per-element ``loads`` (seconds since the last round) placed
    as ``placement`` on PEs of relative ``speeds``, with each PE's ``idle`` seconds in it
    and the idle time per at_sync of the earlier intervals (``floor``; None: none yet)."""
    import numpy as np

    times = np.bincount(placement, weights=loads, minlength=len(speeds)) / speeds
    mean = float(times.mean()) if times.size else 0.0
    waited = float(np.mean(idle)) if idle is not None and len(idle) else 0.0
    p = max(int(period), 1)
    return Interval(p, float(times.max()) - mean if times.size else 0.0, mean, residual, waited,
                    waited / p if floor is None else floor)


#: how fast the floor rises towards more idle time per at_sync (it falls at once)
RISE = 0.25


def next_floor(measured: Interval) -> float:
    """The ``floor`` of the next interval: this interval's idle time per at_sync where it
    is lower, else a quarter of the way up to it. It falls at once, so the short periods
    of a drifting load (little idle time) set it, and rises slowly, so that one lucky
    interval does not make every later one look like drift."""
    now = measured.idle / measured.period
    return now if now < measured.floor else measured.floor + RISE * (now - measured.floor)


def next_period(measured: Interval, cost: float, *, longest: int = LONGEST) -> int:
    """The at_sync calls until the next round, given the interval just ``measured`` and
    the ``cost`` of a round in seconds: twice the last period while the load is stable
    (no drift), else ``sqrt(2 cost / drift)``, at most twice the last period and within
    ``1 .. longest``."""
    if cost < 0 or not math.isfinite(cost):
        raise ValueError(f"cost must be a finite number of seconds >= 0, not {cost!r}")
    period = measured.period
    grown = min(2 * period, longest)
    g = measured.drift()
    if g <= 0.0:
        return max(grown, 1)
    best = math.sqrt(2.0 * cost / g)
    return max(1, min(grown, int(round(best))))
