"""The report's answers in words: the bottleneck PE, where the time was lost, what would help.

:func:`findings` reads an :class:`~shoal.trace.analysis.Analysis` and returns the
figures (:class:`Findings`) and the sentences the top of ``shoal trace report`` shows.
The split of the PEs' time (sum over PEs of each PE's span) is:

* **imbalance**: ``P * max(work) - sum(work)``: the time the other PEs would have had to
  work for every PE to be as busy as the busiest; it is idle time, so at most the idle;
* **communication**: the rest of the idle time (waiting for messages the busiest PE's
  work does not explain) plus packing and unpacking migrating elements;
* **runtime overhead**: the span in neither an entry method nor idle nor packing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .analysis import Analysis, method_totals, usage
from .reasons import decisions
from .rounds import gaps, moves, periods, spread

__all__ = ["Findings", "findings", "duration"]


@dataclass
class Findings:
    """The figures and the sentences; fractions of the PEs' total time."""

    bottleneck: str
    work: float
    imbalance: float
    communication: float
    overhead: float
    #: the best run time an even spread of the same work could give, as a fraction of this one
    balanced_time: float
    top: list[dict[str, object]]
    sentences: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)


def duration(us: float) -> str:
    """``1.23 s``, ``45.6 ms``, ``789 µs`` from microseconds: three significant digits."""
    for unit, scale in (("s", 1e6), ("ms", 1e3), ("µs", 1.0)):
        if abs(us) >= scale or unit == "µs":
            x = us / scale
            return f"{x:.3g} {unit}" if abs(x) < 1000 else f"{x:,.0f} {unit}"
    return f"{us:g} µs"  # pragma: no cover


def findings(an: Analysis) -> Findings:
    """What the trace says, in figures and in sentences."""
    u = usage(an)
    n = len(an.rows)
    total = float(u["span"].sum())
    if n == 0 or total <= 0:
        return Findings("none", 0.0, 0.0, 0.0, 0.0, 1.0, [], ["The trace holds no time on any PE."])
    work, idle, pack, over = (float(u[k].sum()) for k in ("work", "idle", "pack", "overhead"))
    b = int(np.argmax(u["work"] + u["pack"]))
    imbalance = min(idle, n * float(u["work"].max()) - work) / total
    comm = (max(0.0, idle - imbalance * total) + pack) / total
    balanced = float(u["work"].mean() / u["work"].max()) if u["work"].max() > 0 else 1.0
    top = method_totals(an)[:5]
    f = Findings(bottleneck=an.rows[b], work=work / total, imbalance=imbalance, communication=comm,
                 overhead=over / total, balanced_time=balanced, top=list(top))
    span = float(an.spans[:, 1].max() - an.spans[:, 0].min())
    f.sentences.append(
        f"{n} PE{'s' if n != 1 else ''} over {duration(span)}: {100 * f.work:.0f}% of their time in entry methods, "
        f"{100 * imbalance:.0f}% lost to load imbalance, {100 * comm:.0f}% to communication (waiting for messages, "
        f"packing migrations) and {100 * f.overhead:.0f}% to the runtime's own work.")
    busiest = u["work"][b] / max(u["span"][b], 1e-12)
    f.sentences.append(
        f"The bottleneck is {an.rows[b]}: busy {100 * busiest:.0f}% of its span, against "
        f"{100 * float(np.median(u['work'] / np.maximum(u['span'], 1e-12))):.0f}% for the median PE"
        + (f"; spread evenly, the same work would take {100 * balanced:.0f}% of the time." if n > 1 else "."))
    if top:
        share = [100 * float(d["total"]) / max(work, 1e-12) for d in top[:3]]  # type: ignore[arg-type]
        parts = [f"{d['name']} ({s:.0f}%, {d['calls']} calls, mean {duration(float(d['mean']))})"  # type: ignore[arg-type]
                 for d, s in zip(top, share)]
        f.sentences.append("Most time goes to " + "; ".join(parts) + ".")
    _rounds(an, f)
    _cpu_share(an, f, u)
    _advise(an, f, top)
    return f


def _rounds(an: Analysis, f: Findings) -> None:
    """What the balancing rounds changed: the spread of the PEs' work before and after."""
    found = periods(an)
    said = decisions(an)
    if said:
        f.sentences.append(said)
    if len(found) < 2:
        return
    moved = moves(an)
    before, after = spread(found[0].work), spread(found[-1].work)
    f.sentences.append(f"{len(found) - 1} balancing round{'s' if len(found) > 2 else ''}: the busiest PE did "
                       f"{before:.2f}x the mean work before the first and {after:.2f}x after the last "
                       f"(1.00x is even); the rounds moved {sum(moved)} elements in all.")
    late = [(k, g) for k, g in enumerate(gaps(an), start=1) if g == g and g > 10e3]
    if late:
        k, g = max(late, key=lambda kg: kg[1])
        f.sentences.append(f"Round {k} began {duration(g)} after the last entry method before it ended: the "
                           "runtime's own work between the step and the round (gathering the loads, deciding, and "
                           "on a first round whatever is loaded on first use).")


def _churn(an: Analysis) -> str:
    """Advice where rounds found the load even already and still moved elements."""
    found, counts = periods(an), moves(an)
    idle_rounds = [(k, n) for k, n in enumerate(counts, start=1)
                   if k < len(found) and found[k - 1].work.sum() > 0 and spread(found[k - 1].work) <= 1.1 and n > 0]
    if not idle_rounds:
        return ""
    which = ", ".join(str(k) for k, _ in idle_rounds)
    many = ", ".join(str(n) for _, n in idle_rounds)
    strategies = sorted({str(d.get("strategy")) for d in an.balances})
    return (f"Round{'s' if len(idle_rounds) > 1 else ''} {which} found the load even already (spread 1.10x or less "
            f"before it) yet moved {many} elements: {' and '.join(strategies)} recomputes the placement each round. "
            "Balance less often (a larger --lb-period) or use --lb auto or refine, which move only what pays.")


def _cpu_share(an: Analysis, f: Findings, u: dict[str, np.ndarray]) -> None:
    """PEs whose process had the CPU for much less than the time they were not idle:
    other processes took their core (or their entry methods waited: sleep, I/O)."""
    active = u["span"] - u["idle"]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(active > 0, an.cpu / active, np.nan) if len(an.cpu) == len(active) else np.array([])
    low = [i for i in range(len(share)) if share[i] == share[i] and share[i] < 0.8]
    if not low:
        return
    worst = min(low, key=lambda i: share[i])
    names = ", ".join(an.rows[i] for i in low[:6]) + (f" and {len(low) - 6} more" if len(low) > 6 else "")
    f.sentences.append(f"{names} had the CPU for only {100 * share[worst]:.0f}% (the least) of the time they were "
                       "not idle: other processes took their cores, or entry methods waited (sleep, I/O).")
    f.advice.append("Other processes share the cores: run on a quiet machine or with fewer PEs than free cores. "
                    "Timings, and balancing by measured load, are unreliable while the cores are shared.")


def _advise(an: Analysis, f: Findings, top: list[dict[str, object]]) -> None:
    """What would help, from the figures: one sentence per finding."""
    if f.work < 0.05:  # the time went to what the trace does not break down: no advice from its split
        f.advice.append(f"Entry methods took only {100 * f.work:.1f}% of the PEs' time: the rest went to what the "
                        "trace does not break down (the main program, compiled stencil kernels, start-up and "
                        "shut-down). Trace a longer run, or time those parts.")
        return
    rounds = len(an.balances)
    moved = [int(d.get("moved", 0) or 0) for d in an.balances]
    strategies = sorted({str(d.get("strategy")) for d in an.balances})
    if f.imbalance >= 0.10:
        if not rounds:
            f.advice.append(f"Balance the load: {100 * f.imbalance:.0f}% of the time is lost to imbalance and no "
                            "balancing round ran. Call at_sync() in the step loop and run with --lb greedy "
                            "(or --lb auto, which moves only what pays).")
        elif len(found := periods(an)) >= 2 and spread(found[-1].work) <= 1.1:
            f.advice.append(f"The rounds evened the load ({spread(found[0].work):.2f}x the mean before the first, "
                            f"{spread(found[-1].work):.2f}x after the last), but {100 * f.imbalance:.0f}% of the time "
                            f"is lost to imbalance, most of it before the first round at {duration(found[0].end)}: "
                            "balance sooner (a smaller --lb-period, or a first at_sync earlier).")
        else:
            f.advice.append(f"{rounds} balancing round{'s' if rounds != 1 else ''} ({', '.join(strategies)}) "
                            f"ran, yet {100 * f.imbalance:.0f}% is still lost to imbalance: over-decompose more "
                            "(8 to 16 elements per PE give the strategy pieces to move) or balance more often "
                            "(a smaller --lb-period).")
    churn = _churn(an)
    if churn:
        f.advice.append(churn)
    elif rounds and moved and np.mean(moved) > 0 and f.imbalance < 0.05:
        f.advice.append(f"The load is balanced ({100 * f.imbalance:.0f}% lost), yet the rounds moved "
                        f"{np.mean(moved):.0f} elements each on average: balance less often (a larger --lb-period) "
                        "or use --lb auto or refine, which leave a placement that is good enough.")
    if f.communication >= 0.15:
        f.advice.append(f"{100 * f.communication:.0f}% of the time is spent waiting for messages: give each PE more "
                        "elements so that one's work overlaps another's messages, and send fewer, larger messages.")
    if f.overhead >= 0.15:
        means = [float(d["mean"]) for d in top if float(d["mean"]) > 0]  # type: ignore[arg-type]
        grain = f" (the busiest entry method takes {duration(means[0])} a call)" if means else ""
        f.advice.append(f"The runtime's own work takes {100 * f.overhead:.0f}% of the time{grain}: make the grain "
                        "coarser (fewer, larger elements; more work per message).")
    if not f.advice:
        f.advice.append("Nothing stands out: the PEs are busy and even. Faster entry methods (a compiled kernel, "
                        "the stencil DSL) are what would help now.")
