"""``shoal bench metg``: the METG rule, pooling and CIs, reading reports, the sweep plan,
and (marked ``mpi``) a small end-to-end sweep on shoal and mpi4py.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys

import numpy as np
import pytest
from support.commands import clean_env

from shoal.bench.taskbench import kernels, metg
from shoal.bench.taskbench.app import parse


def _run(iterations: int, elapsed: float, tasks: int = 100, flops_per_iter: int = 1000) -> metg.Run:
    return metg.Run(iterations, 10, 10, tasks, iterations * flops_per_iter * tasks, elapsed)


def test_metg_follows_the_reference_rule():
    # peak 2e9 FLOP/s on 2 cores; tasks of `it` * 1000 FLOPs take it * 1 µs of work plus 20 µs overhead each
    runs = [_run(it, (it * 1e-6 + 20e-6) * 100 / 2) for it in (1024, 512, 256, 128, 64, 32, 16, 8)]
    points = metg.curve(runs, peak_flops=2e9, cores=2)
    assert [p.iterations for p in points] == [1024, 512, 256, 128, 64, 32, 16, 8]
    for p in points:
        assert p.granularity == pytest.approx(p.iterations * 1e-6 + 20e-6)
        assert p.efficiency == pytest.approx(p.iterations * 1e-6 / (p.iterations * 1e-6 + 20e-6))
    result = metg.metg(points, 0.5)
    # smallest granularity >= 50% is -iter 32 (52 µs, 61.5%); -iter 16 (36 µs, 44.4%) is below:
    # interpolate linearly in efficiency to exactly 50%
    e_hi, e_lo = 32 / 52, 16 / 36
    expected = 36e-6 + (0.5 - e_lo) / (e_hi - e_lo) * (52e-6 - 36e-6)
    assert result.status == "ok" and result.value == pytest.approx(expected)


def test_metg_pools_repeats_by_mean_and_reports_edge_cases():
    runs = [_run(8, 1.0), _run(8, 3.0), _run(4, 1.0)]
    points = metg.curve(runs, peak_flops=1.0, cores=1)
    assert points[0].reps == 2 and points[0].elapsed == 2.0
    runs.append(_run(8, 1.5))
    assert metg.curve(runs, 1.0, 1, pool="median")[0].elapsed == 1.5
    assert metg.curve(runs, 1.0, 1, pool="min")[0].elapsed == 1.0
    slow = [_run(it, 1.0) for it in (4, 2, 1)]  # efficiency far below 50% everywhere
    assert metg.metg(metg.curve(slow, 1e9, 1)).status == "never efficient"
    fast = [_run(it, 1e-9) for it in (4, 2, 1)]  # efficient down to the smallest task measured
    m = metg.metg(metg.curve(fast, 1e6, 1))
    assert m.status == "not crossed" and m.value == pytest.approx(1e-9 / 100)


def test_metg_confidence_interval_covers_the_estimate():
    rng = np.random.default_rng(3)
    runs = [_run(it, (it * 1e-6 + 20e-6) * 50 * rng.uniform(0.9, 1.1)) for _ in range(4)
            for it in (1024, 512, 256, 128, 64, 32, 16, 8)]
    point = metg.metg(metg.curve(runs, 2e9, 2)).value
    low, high = metg.metg_ci(runs, 2e9, 2, n_resamples=300)
    assert low <= point <= high and high - low < point


def test_parse_reports_reads_our_report():
    app = parse("-steps 3 -width 4 -type stencil_1d -kernel compute_bound -iter 10 --iter-sweep 10,5".split())
    out = io.StringIO()
    for one in app.sweep():
        one.display(out)
        one.report_timing(0.25, out)
    runs = metg.parse_reports(out.getvalue())
    assert [(r.iterations, r.tasks, r.steps, r.width, r.elapsed) for r in runs] == [(10, 12, 3, 4, 0.25), (5, 12, 3, 4, 0.25)]
    assert runs[1].flops == 12 * (2 * 64 * 5 + 64)


def test_metg_plan_gives_a_system_its_own_steps_and_iterations():
    from shoal.bench.taskbench.metg_cli import MetgError, build_parser, plan

    flags = "-steps 100 --iter-max 64 --iter-min 16 --steps-for ray=5 --iters-for ray=1024:256".split()
    assert plan(build_parser().parse_args(flags), ["shoal", "ray"]) == {"shoal": (100, [64, 32, 16]),
                                                                        "ray": (5, [1024, 512, 256])}
    for bad, says in (("--steps-for dask=5", "one of --systems (shoal, ray)"), ("--steps-for ray=0", "positive"),
                      ("--iters-for ray=5", "MAX:MIN")):
        with pytest.raises(MetgError, match=re.escape(says)):
            plan(build_parser().parse_args(bad.split()), ["shoal", "ray"])


def _kernels_build() -> bool:
    try:
        kernels.library()
    except kernels.NativeError:  # pragma: no cover - machines without a C compiler
        return False
    return True


@pytest.mark.mpi
@pytest.mark.skipif(not _kernels_build(), reason="Task Bench kernels cannot be built")
def test_metg_end_to_end_small(tmp_path):
    env = clean_env()
    proc = subprocess.run(
        [sys.executable, "-m", "shoal", "bench", "metg", "-n", "2", "-steps", "20", "--iter-max", "512", "--iter-min", "64",
         "--repeats", "2", "--resamples", "100", "--out", str(tmp_path), "--systems", "shoal,mpi4py"],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = __import__("json").loads((tmp_path / "metg.json").read_text())
    assert set(record["systems"]) == {"shoal", "mpi4py"} and record["iterations"] == [512, 256, 128, 64]
    assert all(len(s["runs"]) == 8 for s in record["systems"].values())
    assert sorted(map(sorted, record["order"])) == [["mpi4py", "peak", "shoal"]] * 2
    assert len(record["peak_runs"]) == 2 and record["peak_flops"] > 0
    assert (tmp_path / "metg.png").stat().st_size > 0 and "METG(50%)" in proc.stdout
    again = subprocess.run(
        [sys.executable, "-m", "shoal", "bench", "metg", "--reanalyze", str(tmp_path / "metg.json"), "--pool", "median",
         "--resamples", "100", "--out", str(tmp_path / "re")], capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "median of repeats" in again.stdout and (tmp_path / "re" / "metg.png").exists()
