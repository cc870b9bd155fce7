"""Known-answer tests of the benchmark statistics (no processes, no MPI)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("scipy", reason="benchmark statistics need scipy: pip install 'shoal[bench]'")

from shoal.bench import stats  # noqa: E402
from shoal.bench.stats import InsufficientSamplesError, Interval  # noqa: E402

FAST = 999  # resamples: plenty for these tests, a tenth of the default's time


def normal(seed: int, loc: float, scale: float, n: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(loc, scale, n)


# ------------------------------------------------------------------ median and its CI


def test_median_known_answers() -> None:
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert stats.median([7.0]) == 7.0


def test_ci_of_seeded_normal_sample_contains_true_median() -> None:
    sample = normal(seed=1, loc=10.0, scale=1.0, n=60)
    ci = stats.median_ci(sample, n_resamples=FAST, seed=0)
    assert 10.0 in ci
    assert ci.low <= stats.median(sample) <= ci.high
    assert 0.1 < ci.high - ci.low < 1.5  # about 2 * 1.96 * 1.25 / sqrt(60) = 0.63 wide


def test_ci_covers_true_median_at_about_the_nominal_rate() -> None:
    covered = sum(
        3.0 in stats.median_ci(normal(seed, 3.0, 0.5, 40), n_resamples=FAST, seed=seed) for seed in range(60)
    )
    assert covered >= 51  # nominal 95% of 60 = 57; the percentile bootstrap runs a little narrow


def test_ci_is_reproducible_for_a_seed() -> None:
    sample = normal(seed=2, loc=5.0, scale=1.0, n=15)
    assert stats.median_ci(sample, n_resamples=FAST, seed=7) == stats.median_ci(sample, n_resamples=FAST, seed=7)


def test_ci_narrows_with_lower_confidence() -> None:
    sample = normal(seed=3, loc=5.0, scale=1.0, n=30)
    wide = stats.median_ci(sample, n_resamples=FAST)
    narrow = stats.median_ci(sample, confidence=0.5, n_resamples=FAST)
    assert wide.low <= narrow.low <= narrow.high <= wide.high


def test_ci_of_identical_samples_is_a_point() -> None:
    assert stats.median_ci([2.5, 2.5, 2.5], n_resamples=FAST) == Interval(2.5, 2.5)


def test_ci_of_two_samples_spans_them() -> None:
    ci = stats.median_ci([1.0, 3.0], n_resamples=FAST)
    assert ci == Interval(1.0, 3.0)


# ------------------------------------------------------------------ ratio of medians


def test_ratio_ci_around_two_for_samples_scaled_by_two() -> None:
    base = normal(seed=4, loc=8.0, scale=0.4, n=30)
    scaled = 2.0 * normal(seed=5, loc=8.0, scale=0.4, n=30)
    assert stats.ratio_of_medians(scaled, base) == pytest.approx(2.0, rel=0.05)
    ci = stats.ratio_ci(scaled, base, n_resamples=FAST)
    assert 2.0 in ci
    assert 1.85 < ci.low < ci.high < 2.15


def test_ratio_ci_of_exactly_scaled_samples_contains_two() -> None:
    base = normal(seed=6, loc=8.0, scale=0.4, n=20)
    assert stats.ratio_of_medians(2.0 * base, base) == pytest.approx(2.0)
    assert 2.0 in stats.ratio_ci(2.0 * base, base, n_resamples=FAST)


def test_ratio_ci_allows_different_sample_counts() -> None:
    ci = stats.ratio_ci([2.0, 2.1, 1.9], [1.0, 1.05, 0.95, 1.0, 1.02], n_resamples=FAST)
    assert 2.0 in ci


def test_ratio_needs_a_nonzero_baseline() -> None:
    with pytest.raises(ValueError, match="baseline median is 0"):
        stats.ratio_of_medians([1.0, 2.0], [0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="positive baseline"):
        stats.ratio_ci([1.0, 2.0], [0.0, 1.0])


# ------------------------------------------------------------------ Mann–Whitney U


def test_mann_whitney_detects_a_clear_shift() -> None:
    fast = normal(seed=8, loc=1.0, scale=0.1, n=10)
    slow = normal(seed=9, loc=2.0, scale=0.1, n=10)
    assert stats.mann_whitney(fast, slow).pvalue < 1e-3
    # latency: lower is better, so "fast is faster than slow" has a tiny p, the reverse does not
    assert stats.faster_test(fast, slow, lower_is_better=True).pvalue < 1e-3
    assert stats.faster_test(slow, fast, lower_is_better=True).pvalue > 0.99
    # bandwidth: higher is better, the same numbers read the other way round
    assert stats.faster_test(slow, fast, lower_is_better=False).pvalue < 1e-3
    result = stats.faster_test(fast, slow, lower_is_better=True)
    assert result.alternative == "less" and result.statistic == 0.0


def test_mann_whitney_finds_nothing_in_a_null() -> None:
    # under the null a 5% test rejects about 5% of the time (one pair in 20 is a false alarm,
    # so test the rate over many seeded pairs rather than a single pair)
    pairs = [(normal(2 * k, 5.0, 1.0, 10), normal(2 * k + 1, 5.0, 1.0, 10)) for k in range(300)]
    two_sided = sum(stats.mann_whitney(a, b).pvalue < 0.05 for a, b in pairs)
    one_sided = sum(stats.faster_test(a, b, lower_is_better=True).pvalue < 0.05 for a, b in pairs)
    assert 3 <= two_sided <= 27 and 3 <= one_sided <= 27  # 15 expected of 300
    assert stats.mann_whitney([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]).pvalue == 1.0


def test_mann_whitney_smallest_p_with_two_samples_each() -> None:
    # with 2 vs 2 samples the exact one-sided p cannot go below 1/C(4,2) = 1/6
    assert stats.faster_test([1.0, 2.0], [3.0, 4.0], lower_is_better=True).pvalue == pytest.approx(1 / 6)


def test_min_pvalue_is_what_non_overlapping_sets_give() -> None:
    assert stats.min_pvalue(3, 3) == pytest.approx(0.1)
    assert stats.min_pvalue(5, 5) == pytest.approx(2 / 252)
    assert stats.min_pvalue(5, 5, "less") == pytest.approx(1 / 252)
    assert stats.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]).pvalue == pytest.approx(stats.min_pvalue(5, 5))
    assert stats.min_pvalue(1, 1) == 1.0
    with pytest.raises(InsufficientSamplesError):
        stats.min_pvalue(0, 3)


def test_mann_whitney_rejects_an_unknown_alternative() -> None:
    with pytest.raises(ValueError, match="alternative"):
        stats.mann_whitney([1.0, 2.0], [3.0, 4.0], "smaller")  # type: ignore[arg-type]


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "call",
    [
        lambda: stats.median([]),
        lambda: stats.median_ci([1.0]),
        lambda: stats.ratio_ci([1.0, 2.0], [1.0]),
        lambda: stats.ratio_ci([1.0], [1.0, 2.0]),
        lambda: stats.mann_whitney([1.0], [1.0, 2.0]),
        lambda: stats.summarize("shoal", 8, [1.0], None, lower_is_better=True),
    ],
)
def test_too_few_samples_is_a_clear_error(call) -> None:
    with pytest.raises(InsufficientSamplesError, match=r"at least \d sample.*got [01]; collect more trials"):
        call()


def test_insufficient_samples_is_a_value_error() -> None:
    assert issubclass(InsufficientSamplesError, ValueError)


def test_non_finite_and_non_flat_samples_are_rejected() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        stats.median_ci([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="flat sequence"):
        stats.median([[1.0, 2.0], [3.0, 4.0]])  # type: ignore[list-item]


# ------------------------------------------------------------------ summary record


def test_summary_of_the_baseline_has_no_ratio() -> None:
    s = stats.summarize("mpi4py", 8, [1.0, 1.2, 1.1], None, lower_is_better=True, n_resamples=FAST)
    assert (s.target, s.size, s.n, s.median) == ("mpi4py", 8, 3, 1.1)
    assert s.ratio is None and s.ratio_ci is None and s.p_differs is None and s.p_faster is None
    assert s.median in s.ci


def test_summary_against_a_baseline() -> None:
    base = [1.0, 1.1, 1.2, 1.05, 1.15]
    mine = [2.0, 2.2, 2.4, 2.1, 2.3]
    s = stats.summarize("shoal:entry", 8, mine, base, lower_is_better=True, n_resamples=FAST)
    assert s.ratio == pytest.approx(2.2 / 1.1)
    assert s.ratio_ci is not None and s.ratio in s.ratio_ci
    assert s.p_differs == pytest.approx(2 / 252)  # exact: the two sets do not overlap
    assert s.p_faster == pytest.approx(1.0)
    json.dumps(s.to_dict())  # JSON-ready
    assert s.to_dict()["ci"] == [s.ci.low, s.ci.high]


def test_summary_with_a_zero_baseline_keeps_p_values_but_no_ratio() -> None:
    s = stats.summarize("shoal:entry", 0, [1.0, 2.0, 3.0], [0.0, 0.0, 0.0], lower_is_better=False, n_resamples=FAST)
    assert s.ratio is None and s.ratio_ci is None
    assert s.p_faster is not None and s.p_faster < 0.1
