"""Statistics for benchmark comparisons: medians, bootstrap CIs, Mann–Whitney U.

Pure functions over sequences of floats (one float per trial), so they are unit-tested
without running anything. The method (docs/benchmarks.md):
the *median* of repeated trials as the point estimate (robust to the occasional trial a
noisy machine slows down), a bootstrap 95% confidence interval around it, and the
non-parametric Mann–Whitney U test for "is A faster than B" (timings are skewed and
rarely normal, so a t-test's assumptions do not hold).

Bootstrap intervals use the *percentile* method: BCa's acceleration term comes from a
jackknife, which is unreliable for a non-smooth statistic like the median and breaks
down on the tied values short benchmark runs produce. Every resampling is seeded, so a
result file reproduces exactly from its samples.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal, Sequence, Union

import numpy as np
from numpy.typing import NDArray
from scipy import stats as _scipy_stats

__all__ = [
    "mean_ci",
    "DEFAULT_RESAMPLES",
    "MIN_SAMPLES",
    "InsufficientSamplesError",
    "Interval",
    "MannWhitney",
    "Samples",
    "Summary",
    "mann_whitney",
    "median",
    "median_ci",
    "min_pvalue",
    "ratio_of_medians",
    "ratio_ci",
    "faster_test",
    "summarize",
]

#: resamples per bootstrap; 9999 keeps the Monte-Carlo error of a 95% bound small
DEFAULT_RESAMPLES = 9999
#: the fewest samples per set a bootstrap CI or a Mann–Whitney test accepts
MIN_SAMPLES = 2

Alternative = Literal["two-sided", "less", "greater"]
#: one value per trial: a list of floats or a 1-D float array
Samples = Union[Sequence[float], NDArray[np.floating[Any]]]


class InsufficientSamplesError(ValueError):
    """A statistic was asked of fewer samples than it needs."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A closed confidence interval ``[low, high]``."""

    low: float
    high: float

    def __contains__(self, value: object) -> bool:
        return isinstance(value, (int, float)) and self.low <= value <= self.high


@dataclass(frozen=True, slots=True)
class MannWhitney:
    """The outcome of a Mann–Whitney U test of sample set A against B."""

    statistic: float  #: U of sample set A
    pvalue: float
    alternative: Alternative  #: "less" means the test's H1 is "A tends to be smaller than B"


@dataclass(frozen=True, slots=True)
class Summary:
    """Everything reported for one target at one message size.

    ``ratio`` is ``median / baseline median`` of the measured quantity itself: above 1
    means slower for a latency and faster for a bandwidth. The baseline's own record, and
    any record whose ratio is undefined (a zero baseline), carries ``None`` there.
    """

    target: str
    size: int
    n: int
    median: float
    ci: Interval
    ratio: float | None = None
    ratio_ci: Interval | None = None
    p_differs: float | None = None  #: two-sided Mann–Whitney p vs the baseline
    p_faster: float | None = None  #: one-sided p for "target is faster than the baseline"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (intervals become ``[low, high]`` lists)."""
        out = asdict(self)
        out["ci"] = [self.ci.low, self.ci.high]
        out["ratio_ci"] = None if self.ratio_ci is None else [self.ratio_ci.low, self.ratio_ci.high]
        return out


def _as_samples(samples: Samples, what: str, minimum: int) -> np.ndarray:
    """``samples`` as a float array, rejecting too few or non-finite values by name."""
    arr = np.asarray(samples, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of numbers, got shape {arr.shape}")
    if arr.size < minimum:
        raise InsufficientSamplesError(
            f"{what} needs at least {minimum} sample(s), got {arr.size}; collect more trials"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} contains a non-finite value: {arr.tolist()}")
    return arr


def median(samples: Samples) -> float:
    """The median of at least one finite sample."""
    return float(np.median(_as_samples(samples, "median", 1)))


def _interval(result: Any) -> Interval:
    ci = result.confidence_interval
    return Interval(float(ci.low), float(ci.high))


def median_ci(
    samples: Samples,
    *,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap confidence interval of the median of ``samples``."""
    arr = _as_samples(samples, "bootstrap CI of the median", MIN_SAMPLES)
    return _bootstrap(arr, np.median, confidence, n_resamples, seed)


def mean_ci(
    samples: Samples,
    *,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap confidence interval of the mean of ``samples``."""
    arr = _as_samples(samples, "bootstrap CI of the mean", MIN_SAMPLES)
    return _bootstrap(arr, np.mean, confidence, n_resamples, seed)


def _bootstrap(arr: np.ndarray, statistic: Any, confidence: float, n_resamples: int, seed: int) -> Interval:
    if np.all(arr == arr[0]):  # every resample is the same: the interval is that value
        return Interval(float(arr[0]), float(arr[0]))
    result = _scipy_stats.bootstrap(
        (arr,),
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return _interval(result)


def ratio_of_medians(samples: Samples, baseline: Samples) -> float:
    """``median(samples) / median(baseline)``; the baseline median must be non-zero."""
    top, bottom = median(samples), median(baseline)
    if bottom == 0:
        raise ValueError("ratio of medians is undefined: the baseline median is 0")
    return top / bottom


def _median_ratio_statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(a, axis=axis) / np.median(b, axis=axis))


def ratio_ci(
    samples: Samples,
    baseline: Samples,
    *,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Bootstrap CI of ``median(samples) / median(baseline)``.

    The two sets are resampled independently (unpaired): trials of different targets
    are separate processes, and pairing by round would assume a round effect we do not
    model. All baseline values must be positive so that no resample divides by zero.
    """
    a = _as_samples(samples, "bootstrap CI of a ratio (samples)", MIN_SAMPLES)
    b = _as_samples(baseline, "bootstrap CI of a ratio (baseline)", MIN_SAMPLES)
    if np.any(b <= 0):
        raise ValueError(f"bootstrap CI of a ratio needs positive baseline samples, got {b.tolist()}")
    result = _scipy_stats.bootstrap(
        (a, b),
        _median_ratio_statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        paired=False,
        rng=np.random.default_rng(seed),
    )
    return _interval(result)


def mann_whitney(a: Samples, b: Samples, alternative: Alternative = "two-sided") -> MannWhitney:
    """Mann–Whitney U test of ``a`` against ``b`` (scipy picks exact or asymptotic p)."""
    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(f"alternative must be 'two-sided', 'less' or 'greater', not {alternative!r}")
    x = _as_samples(a, "Mann–Whitney U (first set)", MIN_SAMPLES)
    y = _as_samples(b, "Mann–Whitney U (second set)", MIN_SAMPLES)
    result = _scipy_stats.mannwhitneyu(x, y, alternative=alternative)
    pvalue = float(result.pvalue)
    if math.isnan(pvalue):  # every value tied: no evidence of any difference
        pvalue = 1.0
    return MannWhitney(float(result.statistic), pvalue, alternative)


def min_pvalue(n_a: int, n_b: int, alternative: Alternative = "two-sided") -> float:
    """The smallest p-value an exact Mann–Whitney test of ``n_a`` vs ``n_b`` samples can give.

    Reached when the two sets do not overlap at all: ``1 / C(n_a + n_b, n_a)``, doubled
    for a two-sided test. With 3 trials each that is 0.1, so no difference can ever be
    "significant" at 0.05: this tells the user how many trials a claim needs.
    """
    if n_a < 1 or n_b < 1:
        raise InsufficientSamplesError(f"min_pvalue needs at least 1 sample per set, got {n_a} and {n_b}")
    p = 1.0 / math.comb(n_a + n_b, n_a)
    return min(1.0, 2 * p) if alternative == "two-sided" else p


def faster_test(a: Samples, b: Samples, *, lower_is_better: bool) -> MannWhitney:
    """One-sided Mann–Whitney U test of "A is faster than B".

    Faster means smaller values for a time (``lower_is_better``) and larger ones for a
    rate. A small p-value is evidence that A is faster.
    """
    return mann_whitney(a, b, "less" if lower_is_better else "greater")


def summarize(
    target: str,
    size: int,
    samples: Samples,
    baseline: Samples | None = None,
    *,
    lower_is_better: bool,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Summary:
    """The :class:`Summary` of one target at one size, compared with ``baseline`` if given.

    Pass ``baseline=None`` for the baseline target itself. A ratio against a baseline with
    a non-positive value (a 0 MB/s row, say) is left ``None`` rather than failing the
    whole comparison; the p-values are still computed.
    """
    own = _as_samples(samples, f"summary of {target} at size {size}", MIN_SAMPLES)
    point = float(np.median(own))
    ci = median_ci(own, confidence=confidence, n_resamples=n_resamples, seed=seed)
    if baseline is None:
        return Summary(target, size, int(own.size), point, ci)
    base = _as_samples(baseline, f"baseline samples at size {size}", MIN_SAMPLES)
    ratio: float | None = None
    rci: Interval | None = None
    if np.all(base > 0):
        ratio = point / float(np.median(base))
        rci = ratio_ci(own, base, confidence=confidence, n_resamples=n_resamples, seed=seed)
    return Summary(
        target,
        size,
        int(own.size),
        point,
        ci,
        ratio,
        rci,
        mann_whitney(own, base, "two-sided").pvalue,
        faster_test(own, base, lower_is_better=lower_is_better).pvalue,
    )
