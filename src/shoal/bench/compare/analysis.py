"""From trials to statistics: group the samples, then summarize each target at each size.

:func:`collect` groups every trial's rows by target and message size (and checks that
all trials agree on unit, PEs and buffer); :func:`summarize_all` hands each group to
:func:`shoal.bench.stats.summarize` against the baseline. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

from .plan import CompareError, Target
from .trial import UNITS, TrialRequest, TrialResult

if TYPE_CHECKING:
    from ..stats import Summary

__all__ = ["Trial", "Collected", "check_trial", "collect", "summarize_all"]

_NATIVE_BUFFER = "malloc"  # what the C baseline reports as its buffer


@dataclass(frozen=True, slots=True)
class Trial:
    """One completed trial and where it sat in the schedule."""

    round: int
    position: int
    target: Target
    result: TrialResult
    wall_s: float


@dataclass
class Collected:
    """All trials' samples, grouped ``samples[label][size] -> [value per round]``."""

    test: str
    unit: str
    pes: int
    buffer: str
    samples: dict[str, dict[int, list[float]]] = field(default_factory=dict)

    @property
    def lower_is_better(self) -> bool:
        return UNITS[self.unit]

    @property
    def sizes(self) -> list[int]:
        return sorted({size for per_size in self.samples.values() for size in per_size})


def check_trial(request: TrialRequest, result: TrialResult) -> None:
    """The micro suite answered what was asked (catches a wrong or stale suite early)."""
    asked = request.target
    if result.test != request.test or result.target != asked.name or (asked.api and result.api != asked.api):
        got = Target(result.target, result.api).label
        raise CompareError(f"asked micro for {request.test} on {asked.label}, it reported {result.test} on {got}")


def collect(trials: Iterable[Trial]) -> Collected:
    """Group trial rows by target and size; all trials must agree on unit, PEs and buffer."""
    collected: Collected | None = None
    for trial in trials:
        r = trial.result
        if collected is None:
            collected = Collected(r.test, r.unit, r.pes, r.buffer)
        if collected.buffer == _NATIVE_BUFFER:
            collected.buffer = r.buffer
        # the C baseline always sends from malloc'd memory: it is compared with any buffer
        buffer = collected.buffer if r.buffer == _NATIVE_BUFFER else r.buffer
        for what, mine, theirs in (("unit", r.unit, collected.unit), ("pes", r.pes, collected.pes),
                                   ("buffer", buffer, collected.buffer)):
            if mine != theirs:
                raise CompareError(
                    f"trials disagree on {what}: {trial.target.label} reported {mine!r}, earlier trials {theirs!r}"
                )
        per_size = collected.samples.setdefault(trial.target.label, {})
        for row in r.rows:
            per_size.setdefault(row.size, []).append(row.value)
    if collected is None:
        raise CompareError("no trials ran")
    return collected


def summarize_all(
    data: Collected,
    baseline: str,
    *,
    order: Sequence[str] | None = None,
    seed: int = 0,
    n_resamples: int | None = None,
) -> tuple[list["Summary"], list[str]]:
    """Summaries for every (target, size) with enough samples, and notes on any skipped.

    Sizes ascend; within a size, targets follow ``order`` (the command line's), then any
    others in the order their first trial ran.
    """
    from .. import stats

    resamples = stats.DEFAULT_RESAMPLES if n_resamples is None else n_resamples
    summaries: list[Summary] = []
    notes: list[str] = []
    base = data.samples.get(baseline, {})
    labels = [*(order or ()), *(label for label in data.samples if label not in (order or ()))]
    for size in data.sizes:
        for label in labels:
            values = data.samples.get(label, {}).get(size)
            if values is None:
                continue
            if len(values) < stats.MIN_SAMPLES:
                notes.append(f"{label} at {size} B: only {len(values)} sample(s), not summarized")
                continue
            reference = base.get(size) if label != baseline else None
            if label != baseline and (reference is None or len(reference) < stats.MIN_SAMPLES):
                notes.append(f"{label} at {size} B: no baseline samples at this size, no ratio")
                reference = None
            summaries.append(stats.summarize(
                label, size, values, reference,
                lower_is_better=data.lower_is_better, n_resamples=resamples, seed=seed,
            ))
    return summaries, notes
