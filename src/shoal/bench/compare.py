"""``shoal bench compare <test>``: several targets, interleaved trials, statistics, a figure.

Each *trial* is one ``shoal bench micro <test> --target … --json`` process (its own MPI
job), so trials are independent launches, as the benchmark methodology asks (DESIGN
§6). For ``--trials N`` the comparison runs N *rounds*; every round runs each target
once, in a **fresh random order per round** (a new shuffle each round, seeded by
``--seed``), so drift of the machine over time spreads evenly over the targets instead
of favouring whichever runs first, and each target gets exactly N trials.

Per message size it reports each target's median over trials, a bootstrap 95% CI of
the median, the ratio of medians to the ``--baseline`` target with its bootstrap CI,
and Mann–Whitney U p-values against the baseline (two-sided, and one-sided for "faster
than the baseline"). Everything, with every sample, goes to ``<out>/compare.json``; the
curves go to ``<out>/compare.png``.

The layers: :func:`parse_targets` and :func:`schedule` decide, a :data:`TrialRunner`
runs one trial (:class:`MicroRunner` by default; tests inject a fake), :func:`collect`
and :func:`summarize_all` turn results into statistics, and :func:`main` is the loop.
scipy, rich and matplotlib (the ``bench`` extra) are imported inside the functions that
use them, so without them ``main`` prints a one-line install hint instead of a traceback.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .micro.targets import TARGETS as MICRO_TARGETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console

    from .stats import Summary

__all__ = [
    "VALID_TARGETS",
    "UNITS",
    "CompareError",
    "Target",
    "TrialRequest",
    "TrialResult",
    "TrialFailed",
    "TrialRunner",
    "MicroRunner",
    "parse_targets",
    "schedule",
    "collect",
    "summarize_all",
    "main",
]

#: target name -> the APIs it accepts (``None``: no ``--api`` flag, the suite's default),
#: read from the micro-benchmarks' own table (``shoal bench micro --target/--api``)
VALID_TARGETS: dict[str, tuple[str | None, ...]] = {
    t.name: (None, *(api for api in t.apis if api is not None)) for t in MICRO_TARGETS.values()
}
#: unit of the micro-benchmark JSON -> whether lower values are better
UNITS: dict[str, bool] = {"us": True, "MB/s": False}
#: what the results record says about the run order
ORDER = "a fresh random order of the targets every round"
SCHEMA = "shoal.bench.compare/1"


class CompareError(Exception):
    """A comparison cannot go on; the message says why and what to do."""


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class Target:
    """A system under test: ``name`` with an optional ``api`` (``shoal:channel``)."""

    name: str
    api: str | None = None

    @property
    def label(self) -> str:
        return self.name if self.api is None else f"{self.name}:{self.api}"


def _valid_target_list() -> str:
    return ", ".join(
        name if api is None else f"{name}:{api}" for name, apis in VALID_TARGETS.items() for api in apis
    )


def parse_targets(spec: str) -> list[Target]:
    """``"shoal:entry,mpi4py"`` -> targets; unknown or repeated ones are rejected by name."""
    targets: list[Target] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, _, api = item.partition(":")
        target = Target(name, api or None)
        if name not in VALID_TARGETS or target.api not in VALID_TARGETS[name]:
            raise CompareError(f"unknown target {item!r}; valid targets: {_valid_target_list()}")
        if target in targets:
            raise CompareError(f"target {item!r} is listed twice in --targets")
        targets.append(target)
    if len(targets) < 2:
        raise CompareError(
            f"--targets needs at least two targets to compare, got {spec!r}; "
            f"for example --targets shoal:entry,mpi4py (valid: {_valid_target_list()})"
        )
    return targets


def schedule(targets: Sequence[Target], rounds: int, seed: int) -> list[list[Target]]:
    """The run order: ``rounds`` rounds, each a fresh seeded shuffle of all ``targets``."""
    rng = random.Random(seed)
    plan = []
    for _ in range(rounds):
        order = list(targets)
        rng.shuffle(order)
        plan.append(order)
    return plan


# --------------------------------------------------------------------------- one trial


@dataclass(frozen=True, slots=True)
class TrialRequest:
    """One trial to run: ``test`` on ``target`` with the micro flags every trial shares."""

    test: str
    target: Target
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Row:
    size: int
    value: float
    iterations: int


@dataclass(frozen=True, slots=True)
class TrialResult:
    """The JSON object ``shoal bench micro … --json`` prints, validated."""

    test: str
    target: str
    api: str | None
    buffer: str
    pes: int
    unit: str
    rows: tuple[Row, ...]

    @classmethod
    def from_json(cls, obj: Any, where: str) -> "TrialResult":
        """Validate a decoded micro-benchmark record; ``where`` names its source in errors."""
        try:
            if not isinstance(obj, dict):
                raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
            unit = obj["unit"]
            if unit not in UNITS:
                raise ValueError(f"unit {unit!r} is not one of {sorted(UNITS)}")
            rows = tuple(
                Row(int(r["size"]), float(r["value"]), int(r["iterations"])) for r in obj["rows"]
            )
            if not rows:
                raise ValueError("no rows")
            api = obj.get("api")
            return cls(
                str(obj["test"]), str(obj["target"]), None if api is None else str(api),
                str(obj.get("buffer", "")), int(obj["pes"]), unit, rows,
            )
        except (KeyError, TypeError, ValueError) as exc:
            missing = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CompareError(f"{where}: malformed micro-benchmark JSON: {missing}") from None


class TrialFailed(CompareError):
    """A trial exited non-zero, timed out or printed no usable JSON."""

    def __init__(self, target: Target, command: Sequence[str], reason: str, stderr: str = "", stdout: str = ""):
        self.target = target
        self.command = list(command)
        self.reason = reason
        self.stderr = stderr
        self.stdout = stdout
        super().__init__(f"target {target.label} failed: {reason}")


#: runs one trial and returns its result, or raises :class:`TrialFailed`
TrialRunner = Callable[[TrialRequest], TrialResult]


class MicroRunner:
    """Runs a trial as a ``shoal bench micro`` subprocess and parses its JSON.

    ``command`` is the program to run with the micro flags appended (default:
    ``python -m shoal bench micro``); tests point it at a fake script. Each trial runs in
    its own process group so a timeout also ends the ``mpiexec`` it started.
    """

    def __init__(self, command: Sequence[str] | None = None, *, timeout: float | None = 600.0):
        self.command = list(command) if command else [sys.executable, "-m", "shoal", "bench", "micro"]
        self.timeout = timeout

    def argv(self, request: TrialRequest) -> list[str]:
        api = [] if request.target.api is None else ["--api", request.target.api]
        return [*self.command, request.test, "--target", request.target.name, *api, *request.options, "--json"]

    def __call__(self, request: TrialRequest) -> TrialResult:
        cmd = self.argv(request)
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise TrialFailed(request.target, cmd, f"timed out after {self.timeout:g} s", err, out) from None
        except BaseException:  # Ctrl-C: do not leave an MPI job behind
            _kill_group(proc)
            raise
        if proc.returncode != 0:
            raise TrialFailed(request.target, cmd, f"exit status {proc.returncode}", err, out)
        lines = [line for line in out.splitlines() if line.strip()]
        try:
            obj = json.loads(lines[-1] if lines else "")
        except json.JSONDecodeError:
            raise TrialFailed(request.target, cmd, "printed no JSON object on its last line", err, out) from None
        return TrialResult.from_json(obj, " ".join(cmd))


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --------------------------------------------------------------------------- statistics


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


def _check_trial(request: TrialRequest, result: TrialResult) -> None:
    """The micro suite answered what was asked (catches a wrong or stale suite early)."""
    asked = request.target
    if result.test != request.test or result.target != asked.name or (asked.api and result.api != asked.api):
        got = Target(result.target, result.api).label
        raise CompareError(f"asked micro for {request.test} on {asked.label}, it reported {result.test} on {got}")


_NATIVE_BUFFER = "malloc"  # what the C baseline reports as its buffer


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
    from . import stats

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


# --------------------------------------------------------------------------- output


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3f}"


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def print_tables(console: "Console", summaries: Sequence["Summary"], unit: str, baseline: str) -> None:
    """One table per message size, targets in the order given on the command line."""
    from rich import box
    from rich.table import Table

    by_size: dict[int, list[Summary]] = {}
    for s in summaries:
        by_size.setdefault(s.size, []).append(s)
    better = "lower" if UNITS[unit] else "higher"
    for size, rows in by_size.items():
        table = Table(title=f"size {_size(size)}", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("target")
        table.add_column(f"median {unit}", justify="right")
        table.add_column("95% CI", justify="right")
        table.add_column(f"÷ {baseline}", justify="right")
        table.add_column("95% CI", justify="right")
        table.add_column("p≠", justify="right")
        table.add_column("p faster", justify="right")
        for s in rows:
            ratio = "—" if s.ratio is None else f"{s.ratio:.2f}x"
            rci = "—" if s.ratio_ci is None else f"{s.ratio_ci.low:.2f}–{s.ratio_ci.high:.2f}"
            style = "bold" if s.target == baseline else None
            table.add_row(
                s.target, _num(s.median), f"{_num(s.ci.low)}–{_num(s.ci.high)}",
                ratio, rci, _p(s.p_differs), _p(s.p_faster), style=style,
            )
        console.print(table)
        console.print()
    console.print(
        f"[dim]{unit}: {better} is better. ÷ {baseline}: target median / {baseline} median with a bootstrap "
        f"95% CI. p≠: two-sided Mann–Whitney U vs {baseline}; p faster: one-sided, small = faster.[/dim]"
    )


def make_figure(summaries: Sequence["Summary"], *, unit: str, baseline: str, title: str) -> "Figure":
    """The comparison figure: curves with CIs, and ratios to the baseline below."""
    from . import plot

    curves: list[plot.Curve] = []
    ratios: list[plot.Curve] = []
    for label in dict.fromkeys(s.target for s in summaries):
        mine = [s for s in summaries if s.target == label]
        curves.append(plot.Curve(
            label, [s.size for s in mine], [s.median for s in mine],
            [s.ci.low for s in mine], [s.ci.high for s in mine],
        ))
        pts = [(s.size, s.ratio, s.ratio_ci) for s in mine if s.ratio is not None and s.ratio_ci is not None]
        if pts:
            ratios.append(plot.Curve(
                label, [p[0] for p in pts], [p[1] for p in pts], [p[2].low for p in pts], [p[2].high for p in pts],
            ))
    return plot.curves_figure(curves, unit=unit, title=title, ratios=ratios, baseline=baseline)


def _environment() -> dict[str, str]:
    from .. import __version__

    return {
        "shoal": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


def results_document(
    *,
    argv: Sequence[str],
    targets: Sequence[Target],
    baseline: str,
    plan: Sequence[Sequence[Target]],
    trials: Sequence[Trial],
    data: Collected,
    summaries: Sequence["Summary"],
    notes: Sequence[str],
    seed: int,
    resamples: int,
    options: Sequence[str],
    started: str,
) -> dict[str, Any]:
    """Everything a later analysis needs: configuration, the order run, samples, summary."""
    return {
        "schema": SCHEMA,
        "test": data.test,
        "unit": data.unit,
        "lower_is_better": data.lower_is_better,
        "pes": data.pes,
        "buffer": data.buffer,
        "targets": [t.label for t in targets],
        "baseline": baseline,
        "trials": len(plan),
        "seed": seed,
        "order": ORDER,
        "rounds": [[t.label for t in order] for order in plan],
        "micro_options": list(options),
        "confidence": 0.95,
        "bootstrap": {"method": "percentile", "resamples": resamples, "seed": seed},
        "command": ["shoal", "bench", "compare", *argv],
        "environment": _environment(),
        "started": started,
        "finished": _now(),
        "runs": [
            {"round": t.round, "position": t.position, "target": t.target.label, "wall_s": round(t.wall_s, 3)}
            for t in trials
        ],
        "samples": [
            {"round": t.round, "target": t.target.label, "size": row.size, "value": row.value,
             "iterations": row.iterations}
            for t in trials for row in t.result.rows
        ],
        "summary": [s.to_dict() for s in summaries],
        "notes": list(notes),
    }


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    from ..cli import OptionParser

    p = OptionParser(
        prog="shoal bench compare",
        description="Run micro-benchmark targets interleaved for N rounds (a fresh random order each "
        "round); report medians, bootstrap 95%% CIs, ratios to a baseline and Mann–Whitney p-values.",
        epilog="Arguments after `--` are passed to every `shoal bench micro` trial (e.g. -- --buffer numpy).",
    )
    p.add_argument("test", help="micro-benchmark test, e.g. latency, bw, allreduce")
    p.add_argument("--targets", required=True, help=f"comma-separated targets; valid: {_valid_target_list()}")
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
    started = _now()
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
                _check_trial(request, result)
                trials.append(Trial(rnd, pos, target, result, time.perf_counter() - t0))
                progress.advance(task)

    data = collect(trials)
    from . import stats

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
        from . import plot

        title = f"{data.test}: {data.pes} PEs, {ns.trials} trials, median and 95% CI"
        fig = make_figure(summaries, unit=data.unit, baseline=baseline, title=title)
        png = plot.save(fig, out_dir / "compare.png")
        out.print(f"wrote {png}", markup=False, soft_wrap=True)
    return 0

