"""What a balancing strategy decided and why: a short structured reason per round.

Beside its placement, each round gets a :class:`Reason`: the imbalance the strategy
found (the busiest PE's time over the average), the threshold under which ``auto`` and
``refine`` move nothing, the plan taken (``auto`` says which of its plans and why), the
moves and the imbalance predicted after them. The coordinator records it with the round
in the trace (``args.reason`` of the round's slice) and ``shoal trace report`` puts it in
words. Pure NumPy on the strategy's inputs and result: nothing here touches the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Reason", "judge", "imbalance", "NOTHING", "UNDER", "ENOUGH", "NEEDED", "BETTER", "UNPAID", "NO_GAIN", "PLACED"]

#: why a plan was taken (``Reason.why``): the load was under the threshold; refine's few
#: moves bring every PE under it; greedy was needed (refine's moves leave too much);
#: refine's plan saved more than greedy's; a big move would not pay for itself in one
#: period; no plan saved more than its moves cost; a strategy that does not explain itself
UNDER, ENOUGH, NEEDED, BETTER, UNPAID, NO_GAIN, PLACED = (
    "under threshold", "refine enough", "greedy needed", "refine better", "move not worth it", "no gain", "placed")
#: ``Reason.plan`` when nothing moves by choice
NOTHING = "nothing"


class Reason(NamedTuple):
    """One round's decision; times are seconds per balancing period."""

    strategy: str  # the strategy the job asked for (``--lb``)
    plan: str  # the plan taken: NOTHING, "refine", "greedy", or the strategy's own name
    why: str  # one of UNDER, ENOUGH, NEEDED, BETTER, UNPAID, NO_GAIN, PLACED
    imbalance: float  # the busiest PE's time over the average, before (1.0: even)
    threshold: float  # 1 + the tolerance under which auto and refine move nothing
    moves: int  # elements the plan moves
    after: float  # the imbalance predicted once they have moved
    saved: float | None = None  # auto: seconds a period the plan it weighed saves
    cost: float | None = None  # auto: seconds its moves are estimated to cost
    weighed: str = ""  # auto: the plan ``saved`` and ``cost`` are of, when not the plan taken

    def as_args(self) -> dict[str, Any]:
        """The reason as the trace's JSON (numbers rounded, absent ones left out)."""
        out: dict[str, Any] = {"plan": self.plan, "why": self.why, "imbalance": round(self.imbalance, 4),
                               "threshold": round(self.threshold, 4), "moves": self.moves, "after": round(self.after, 4)}
        for key in ("saved", "cost"):
            value = getattr(self, key)
            if value is not None:
                out[key] = float(f"{value:.4g}")
        if self.weighed:
            out["weighed"] = self.weighed
        return out


def imbalance(loads: np.ndarray, placement: np.ndarray, speeds: np.ndarray) -> float:
    """The busiest PE's time (load / speed) over the average time (1.0 with no load)."""
    import numpy as np

    times = np.bincount(placement, weights=loads, minlength=speeds.size) / speeds
    mean = float(loads.sum()) / float(speeds.sum())
    return float(times.max(initial=0.0)) / mean if mean > 0 else 1.0


def judge(strategy: str, loads: Any, placement: Any, new: Any, speeds: Any, tolerance: float,
          plan: str = "", why: str = PLACED, saved: float | None = None, cost: float | None = None,
          weighed: str = "") -> Reason:
    """The reason of a round of ``strategy`` that went from ``placement`` to ``new``: the
    imbalance before and after measured here; ``plan`` (default: the strategy's name, or
    NOTHING if nothing moves), ``why`` and the estimates from the strategy where it says."""
    import numpy as np

    loads, speeds = np.asarray(loads, np.float64), np.asarray(speeds, np.float64)
    placement, new = np.asarray(placement, np.int64), np.asarray(new, np.int64)
    moves = int((new != placement).sum())
    return Reason(strategy, plan or (strategy if moves else NOTHING), why, imbalance(loads, placement, speeds),
                  1.0 + tolerance, moves, imbalance(loads, new, speeds), saved, cost, weighed)
