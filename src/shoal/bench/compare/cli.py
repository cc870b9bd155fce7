"""``shoal bench compare``: the command line and the loop over rounds and targets.

:func:`main` parses the options (everything after ``--`` goes to every micro trial),
checks that the ``bench`` extra is installed, and runs :func:`_compare`: the schedule
of :mod:`.plan`, one :data:`.trial.TrialRunner` call per trial, then the statistics of
:mod:`.analysis` and the output of :mod:`.report`. Exit codes: 0, 1 (a trial failed), 2
(bad options, or a missing package), 130 (interrupted).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from .analysis import Trial, check_trial, collect, summarize_all
from .plan import ORDER, CompareError, parse_targets, schedule, valid_target_list
from .report import make_figure, now, print_tables, results_document
from .trial import MicroRunner, TrialFailed, TrialRequest, TrialRunner

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from ...commands import OptionParser

    p = OptionParser(
        prog="shoal bench compare",
        description="Run micro-benchmark targets interleaved for N rounds (a fresh random order each "
        "round); report medians, bootstrap 95%% CIs, ratios to a baseline and Mann–Whitney p-values.",
        epilog="Arguments after `--` are passed to every `shoal bench micro` trial (e.g. -- --buffer numpy).",
    )
    p.add_argument("test", help="micro-benchmark test, e.g. latency, bw, allreduce")
    p.add_argument("--targets", required=True, help=f"comma-separated targets; valid: {valid_target_list()}")
    p.add_argument("--baseline", help="target the ratios and p-values are relative to (default: mpi4py if listed, else the first)")
    p.add_argument("--trials", type=int, default=10, help="rounds; each runs every target once (default 10, at least 2)")
    p.add_argument("--seed", type=int, help="seed of the run order and the bootstrap (default: random, recorded)")
    p.add_argument("-n", "--pes", dest="pes", help="PEs per trial, passed to micro")
    p.add_argument("-m", dest="sizes", metavar="MIN:MAX", help="message size range, passed to micro")
    p.add_argument("-i", dest="iterations", metavar="N", help="iterations, passed to micro")
    p.add_argument("-x", dest="warmup", metavar="N", help="warm-up iterations, passed to micro")
    p.add_argument("--quick", action="store_true", help="micro's quick mode (tiny sizes, few iterations)")
    p.add_argument("--out", help="results directory (default results/compare-<test>-<UTC time>)")
    p.add_argument("--no-plot", action="store_true", help="do not write compare.png")
    p.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (default 9999)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one trial may take (default 600)")
    return p


def _micro_options(ns: argparse.Namespace, extra: Sequence[str]) -> tuple[str, ...]:
    opts: list[str] = []
    for flag, value in (("-n", ns.pes), ("-m", ns.sizes), ("-i", ns.iterations), ("-x", ns.warmup)):
        if value is not None:
            opts += [flag, str(value)]
    if ns.quick:
        opts.append("--quick")
    return (*opts, *extra)


def _missing_dependencies(plot: bool) -> list[str]:
    import importlib.util

    needed = ["scipy", "rich", *(["matplotlib"] if plot else [])]
    return [name for name in needed if importlib.util.find_spec(name) is None]


def _report_failure(exc: TrialFailed) -> None:
    """The failed trial's reason, command and output, unwrapped, on stderr."""
    lines = [f"shoal bench compare: {exc}", f"command: {' '.join(exc.command)}"]
    if exc.stderr.strip():
        lines += [f"--- stderr of {exc.target.label}", exc.stderr.rstrip()]
    elif exc.stdout.strip():
        lines += [f"--- stdout of {exc.target.label}", exc.stdout.rstrip()[-4000:]]
    print("\n".join(lines), file=sys.stderr)


def main(argv: Sequence[str], *, runner: TrialRunner | None = None) -> int:
    """``shoal bench compare …``; ``runner`` replaces the micro subprocess (for tests)."""
    argv = list(argv)
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    ns = _parser().parse_args(own)
    missing = _missing_dependencies(plot=not ns.no_plot)
    if missing:
        print(
            f"shoal bench compare: needs {', '.join(missing)}; install them with "
            f"`pip install 'shoal[bench]'` (or `pip install {' '.join(missing)}`)",
            file=sys.stderr,
        )
        return 2
    from rich.console import Console

    # a pipe or file gets 120 columns (rich's 80 would truncate the tables) unless $COLUMNS says
    wide = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120
    out = Console(file=sys.stdout, highlight=False, width=wide)
    err = Console(file=sys.stderr, highlight=False)
    try:
        return _compare(ns, argv, extra, runner or MicroRunner(timeout=ns.timeout), out, err)
    except TrialFailed as exc:
        _report_failure(exc)
        return 1
    except CompareError as exc:
        print(f"shoal bench compare: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("shoal bench compare: interrupted; no results written", file=sys.stderr)
        return 130


def _compare(
    ns: argparse.Namespace, argv: list[str], extra: list[str], runner: TrialRunner, out: "Console", err: "Console"
) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    targets = parse_targets(ns.targets)
    labels = [t.label for t in targets]
    baseline = ns.baseline or ("mpi4py" if "mpi4py" in labels else labels[0])
    if baseline not in labels:
        raise CompareError(f"--baseline {baseline!r} is not one of --targets ({', '.join(labels)})")
    if ns.trials < 2:
        raise CompareError(f"--trials must be at least 2 (a CI or a Mann–Whitney test needs 2 samples), not {ns.trials}")
    if ns.resamples is not None and ns.resamples < 100:
        raise CompareError(f"--resamples must be at least 100, not {ns.resamples}")
    seed = ns.seed if ns.seed is not None else random.SystemRandom().randrange(2**31)
    options = _micro_options(ns, extra)
    started = now()
    out_dir = Path(ns.out or f"results/compare-{ns.test}-{started[:19].replace(':', '').replace('-', '')}")
    plan = schedule(targets, ns.trials, seed)

    out.print(
        f"shoal bench compare {ns.test}: {', '.join(labels)}; baseline {baseline}; "
        f"{ns.trials} rounds in {ORDER} (seed {seed})",
        markup=False, soft_wrap=True,
    )
    trials: list[Trial] = []
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True, disable=not err.is_terminal,
    )
    with progress:
        task = progress.add_task("trials", total=ns.trials * len(targets))
        for rnd, order in enumerate(plan):
            for pos, target in enumerate(order):
                progress.update(task, description=f"round {rnd + 1}/{ns.trials}: {target.label}")
                request = TrialRequest(ns.test, target, options)
                t0 = time.perf_counter()
                result = runner(request)
                check_trial(request, result)
                trials.append(Trial(rnd, pos, target, result, time.perf_counter() - t0))
                progress.advance(task)

    data = collect(trials)
    from .. import stats

    resamples = ns.resamples or stats.DEFAULT_RESAMPLES
    summaries, notes = summarize_all(data, baseline, order=labels, seed=seed, n_resamples=resamples)
    floor = stats.min_pvalue(ns.trials, ns.trials)
    if floor > 0.01:
        notes.append(
            f"with {ns.trials} trials per target the smallest possible two-sided p is {floor:.3g}; "
            f"use --trials 5 or more for p < 0.01"
        )
    print_tables(out, summaries, data.unit, baseline)
    for note in notes:
        out.print(f"note: {note}", markup=False, soft_wrap=True)

    out_dir.mkdir(parents=True, exist_ok=True)
    doc = results_document(
        argv=argv, targets=targets, baseline=baseline, plan=plan, trials=trials, data=data,
        summaries=summaries, notes=notes, seed=seed, resamples=resamples, options=options, started=started,
    )
    json_path = out_dir / "compare.json"
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    out.print(f"wrote {json_path}", markup=False, soft_wrap=True)
    if not ns.no_plot:
        from .. import plot

        title = f"{data.test}: {data.pes} PEs, {ns.trials} trials, median and 95% CI"
        fig = make_figure(summaries, unit=data.unit, baseline=baseline, title=title)
        png = plot.save(fig, out_dir / "compare.png")
        out.print(f"wrote {png}", markup=False, soft_wrap=True)
    return 0
