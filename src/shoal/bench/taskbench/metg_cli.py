"""``shoal bench metg``: sweep task granularity on several systems and report METG.

1. **Peak.** The same kernel runs on every core with no dependencies
   (``-type trivial``, mpi4py, the largest ``-iter`` of the sweep), once per round;
   the best FLOP/s is the peak (or give ``--peak``).
2. **Sweep.** Each job runs the graph once per ``-iter`` value, from ``--iter-max``
   halving down to ``--iter-min`` (``--iter-sweep`` of ``shoal bench taskbench``),
   each value run twice and the second run reported, as the reference does.
   ``--steps-for SYSTEM=N`` and ``--iters-for SYSTEM=MAX:MIN`` give one system its
   own steps and ``-iter`` range, so systems whose overheads differ by orders of
   magnitude (Dask, Ray: milliseconds) still run in the same interleaved rounds.
   ``--repeats`` rounds; every round runs each system (and the peak job) once, in a
   fresh random order, so drift of a shared machine spreads over the systems.
3. **METG.** Per system the repeats are pooled (mean elapsed per ``-iter``),
   efficiency is FLOP/s over the peak, and METG(50%) follows the reference's rule
   (:mod:`.metg`), with a bootstrap confidence interval over the repeats.

Writes ``<out>/metg.json`` (every run), ``<out>/<system>.log`` (the raw reports, in
the reference's format) and ``<out>/metg.png`` (efficiency vs granularity, one line
per system). ``--json`` ends the output with one line of JSON (:func:`json_line`: each
system's METG in µs), the result ``shoal bench experiment`` reads from a run; without
``--out`` those files then go to a scratch folder that is removed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from .metg import POOLS, Metg, Point, Run, curve, metg, metg_ci, parse_reports

__all__ = ["SYSTEMS", "main", "sweep_values", "plan", "build_parser", "json_line"]

_PROG = "shoal bench metg"
#: seconds a timed-out job gets to stop its workers after SIGTERM, before SIGKILL
_GRACE = 30.0
#: the systems a sweep can run (`--systems`)
SYSTEMS = ("shoal", "shoal:entry", "shoal:channel", "mpi4py", "charm4py", "dask", "ray")


class MetgError(Exception):
    """The sweep cannot go on; the message says why."""


def sweep_values(high: int, low: int) -> list[int]:
    """``high``, ``high / 2``, … down to ``low`` (powers of two when ``high`` is one)."""
    if low < 1 or high < low:
        raise MetgError(f"--iter-max ({high}) must be >= --iter-min ({low}) >= 1")
    values = []
    v = high
    while v >= low:
        values.append(v)
        v //= 2
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=_PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--systems", default="shoal,mpi4py", help=f"comma-separated, from {', '.join(SYSTEMS)}")
    p.add_argument("-n", "--pes", type=int, default=2, help="processes (cores) per job (default 2)")
    p.add_argument("--tasks-per-core", type=int, default=1, help="over-decomposition: -width = n x this (default 1)")
    p.add_argument("-width", type=int, default=None, help="graph width (overrides --tasks-per-core)")
    p.add_argument("-steps", type=int, default=1000, help="timesteps (default 1000)")
    p.add_argument("-type", default="stencil_1d", help="dependence pattern (default stencil_1d)")
    p.add_argument("-radix", type=int, default=None)
    p.add_argument("-kernel", default="compute_bound", help="kernel (default compute_bound)")
    p.add_argument("--iter-max", type=int, default=1 << 16, help="largest -iter (default 65536)")
    p.add_argument("--iter-min", type=int, default=1, help="smallest -iter (default 1)")
    p.add_argument("--steps-for", action="append", default=[], metavar="SYSTEM=N",
                   help="-steps for one system (repeatable), e.g. dask=20")
    p.add_argument("--iters-for", action="append", default=[], metavar="SYSTEM=MAX:MIN",
                   help="-iter range for one system (repeatable), e.g. ray=4194304:16384")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the sweep (default 3)")
    p.add_argument("--peak", type=float, default=None, help="peak FLOP/s of the job (default: measured)")
    p.add_argument("--threshold", type=float, default=0.5, help="efficiency of METG (default 0.5)")
    p.add_argument("--pool", choices=sorted(POOLS), default="mean",
                   help="how repeats at one -iter combine: mean (the reference's; default), median or min")
    p.add_argument("--reanalyze", metavar="METG_JSON", default=None,
                   help="recompute METG, the table and the figure from a metg.json without running anything")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the run order and the bootstrap")
    p.add_argument("--out", default=None, help="output directory (default results/metg-<time>)")
    p.add_argument("--mpiexec", default=None, help="launcher (default: $SHOAL_MPIEXEC, then PATH)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one job may take (default 1800)")
    p.add_argument("--json", action="store_true",
                   help="end the output with one line of JSON, each system's METG in µs (files: only with --out)")
    return p


def _job(system: str, args: argparse.Namespace, width: int, graph: list[str], iters: Sequence[int]) -> list[Run]:
    name, _, api = system.partition(":")
    cmd = [sys.executable, "-m", "shoal", "bench", "taskbench", "-n", str(args.pes), "--system", name]
    if api:
        cmd += ["--api", api]
    if args.mpiexec:
        cmd += ["--mpiexec", args.mpiexec]
    cmd += [*graph, "-width", str(width), "-iter", str(iters[0]), "--iter-sweep", ",".join(map(str, iters))]
    env = {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM first: a killed Ray driver leaves Ray's agent processes behind
            proc.terminate()
            try:
                proc.communicate(timeout=_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            raise MetgError(f"{system}: the job took more than {args.timeout:g} s: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        raise MetgError(f"{system}: the job failed (exit {proc.returncode}): {' '.join(cmd)}\n{stderr.strip()[-3000:]}")
    runs = parse_reports(stdout)
    if [r.iterations for r in runs] != list(iters):
        raise MetgError(f"{system}: expected reports for -iter {list(iters)}, got {[r.iterations for r in runs]}")
    _job.last_stdout = stdout  # type: ignore[attr-defined]
    return runs


def plan(args: argparse.Namespace, systems: Sequence[str]) -> dict[str, tuple[int, list[int]]]:
    """Each system's ``(-steps, -iter values)``: the common ones unless ``--steps-for``/``--iters-for`` say otherwise."""
    steps = {s: args.steps for s in systems}
    iters = {s: sweep_values(args.iter_max, args.iter_min) for s in systems}
    for flag, items in (("--steps-for", args.steps_for), ("--iters-for", args.iters_for)):
        for item in items:
            system, sep, value = item.partition("=")
            if not sep or system not in steps:
                raise MetgError(f"{flag} {item!r}: expected SYSTEM=VALUE with SYSTEM one of --systems ({', '.join(systems)})")
            try:
                if flag == "--steps-for":
                    steps[system] = int(value)
                    if steps[system] < 1:
                        raise ValueError
                else:
                    high, _, low = value.partition(":")
                    iters[system] = sweep_values(int(high), int(low))
            except ValueError:
                form = "a positive integer" if flag == "--steps-for" else "MAX:MIN, two integers"
                raise MetgError(f"{flag} {item!r}: the value must be {form}") from None
    return {s: (steps[s], iters[s]) for s in systems}


def _graph_flags(args: argparse.Namespace, steps: int) -> list[str]:
    flags = ["-steps", str(steps), "-type", args.type, "-kernel", args.kernel]
    if args.radix is not None:
        flags += ["-radix", str(args.radix)]
    return flags


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.3g}"


def _figure(curves: dict[str, list[Point]], results: dict[str, Metg], threshold: float, title: str, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for i, (system, points) in enumerate(curves.items()):
        color = f"C{i % 10}"
        m = results[system]
        label = f"{system} (METG {_us(m.value)} µs)" if m.status == "ok" else f"{system} ({m.status})"
        ax.plot([p.granularity * 1e6 for p in points], [p.efficiency * 100 for p in points], marker="o",
                markersize=3, color=color, label=label)
        if m.status == "ok" and m.value is not None:
            ax.axvline(m.value * 1e6, color=color, linewidth=0.8, linestyle=":")
    ax.axhline(threshold * 100, color="red", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
    ax.set_xlabel("task granularity (µs)")
    ax.set_ylabel("efficiency (% of peak FLOP/s)")
    high = max((p.efficiency for c in curves.values() for p in c), default=1.0)
    ax.set_ylim(0, max(110, high * 100 + 10))
    ax.set_title(title, fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=120)


def run(args: argparse.Namespace, keep: bool = True) -> int:
    """Run the sweep and analyse it (:func:`analyze`); ``keep``: the files in ``args.out`` are kept."""
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad or not systems:
        raise MetgError(f"unknown system(s) {bad or systems}; systems: {', '.join(SYSTEMS)}")
    width = args.width or args.pes * args.tasks_per_core
    iters = sweep_values(args.iter_max, args.iter_min)
    plans = plan(args, systems)
    out = Path(args.out or f"results/metg-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731

    # the peak job (same kernel, every core, no dependencies) runs once per round too,
    # in the shuffled order, so a busy spell of the machine cannot set it alone
    peak_graph = ["-steps", str(max(1, min(args.steps, 100))), "-type", "trivial", "-kernel", args.kernel]
    peak_runs: list[Run] = []
    runs: dict[str, list[Run]] = {s: [] for s in systems}
    logs: dict[str, list[str]] = {s: [] for s in systems}
    order_log = []
    for rnd in range(args.repeats):
        order = systems[:] + ([] if args.peak else ["peak"])
        rng.shuffle(order)
        order_log.append(order)
        for system in order:
            if system == "peak":
                say(f"{_PROG}: round {rnd + 1}/{args.repeats}: peak (mpi4py, -type trivial, -iter {iters[0]})")
                peak_runs += _job("mpi4py", args, args.pes, peak_graph, [iters[0]])
                continue
            steps, its = plans[system]
            say(f"{_PROG}: round {rnd + 1}/{args.repeats}: {system} (-steps {steps}, -iter {its[0]} .. {its[-1]})")
            runs[system] += _job(system, args, width, _graph_flags(args, steps), its)
            logs[system].append(_job.last_stdout)  # type: ignore[attr-defined]
    peak = args.peak or max(r.flops / r.elapsed for r in peak_runs)
    say(f"{_PROG}: peak {peak:.4g} FLOP/s ({args.kernel}, {args.pes} cores"
        + (", given)" if args.peak else f", best of {len(peak_runs)} runs)"))

    for s in systems:
        (out / f"{s.replace(':', '-')}.log").write_text("".join(logs[s]))
    record = {
        "schema": "shoal.bench.metg/1",
        "created": _dt.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(),
        "command": [_PROG, *sys.argv[3:]] if sys.argv[1:3] == ["bench", "metg"] else None,
        "config": {k: v for k, v in vars(args).items()},
        "width": width,
        "iterations": iters,
        "peak_flops": peak,
        "peak_runs": [asdict(r) for r in peak_runs],
        "order": order_log,
        "systems": {s: {"steps": plans[s][0], "iterations": plans[s][1], "runs": [asdict(r) for r in runs[s]]}
                    for s in systems},
    }
    return analyze(record, args, out, keep)


def json_line(record: dict) -> dict:
    """The ``--json`` line of an analysed ``record``: the sweep's settings and one row per
    system (``metg_us``, null when never efficient; ``status``; the CI's ends in µs)."""
    cfg = record["config"]
    us = lambda seconds: None if seconds is None else seconds * 1e6  # noqa: E731
    rows = []
    for system, r in record["systems"].items():
        ci = r["ci_seconds"]
        rows.append({"system": system, "metg_us": us(r["metg_seconds"]), "status": r["status"],
                     "ci_low_us": None if ci is None else us(ci[0]), "ci_high_us": None if ci is None else us(ci[1]),
                     "steps": r["steps"]})
    return {"bench": "metg", "type": cfg["type"], "kernel": cfg["kernel"], "pes": cfg["pes"], "width": record["width"],
            "repeats": cfg["repeats"], "threshold": record["analysis"]["threshold"],
            "pool": record["analysis"]["pool"], "peak_flops": record["peak_flops"], "unit": "us", "rows": rows}


def analyze(record: dict, args: argparse.Namespace, out: Path, keep: bool = True) -> int:
    """METG of every system in ``record`` (pooled by ``args.pool``); write JSON and figure, print
    (and the ``--json`` line last); ``keep``: ``out`` is kept, so name its files."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = record["config"]
    systems = list(record["systems"])
    if args.peak:
        record["peak_flops"] = args.peak
    peak, pes = record["peak_flops"], cfg["pes"]
    runs = {s: [Run(**r) for r in record["systems"][s]["runs"]] for s in systems}
    curves = {s: curve(runs[s], peak, pes, args.pool) for s in systems}
    results = {s: metg(curves[s], args.threshold) for s in systems}
    cis = {s: metg_ci(runs[s], peak, pes, args.threshold, n_resamples=args.resamples, seed=args.seed, pool=args.pool)
           for s in systems}
    for s in systems:
        record["systems"][s].update({
            "metg_seconds": results[s].value,
            "status": results[s].status,
            "ci_seconds": cis[s],
            "points": [asdict(p) for p in curves[s]],
        })
    record["analysis"] = {"pool": args.pool, "threshold": args.threshold, "resamples": args.resamples}
    (out / "metg.json").write_text(json.dumps(record, indent=1))
    tpc = record["width"] / pes
    own = [f"{s} {record['systems'][s]['steps']}" for s in systems
           if record["systems"][s].get("steps", cfg["steps"]) != cfg["steps"]]
    steps = f"{cfg['steps']} steps" + (f" ({', '.join(own)})" if own else "")
    title = (f"{cfg['type']}, {cfg['kernel']}, {pes} cores, {tpc:g} task(s)/core\n{steps}, "
             f"{cfg['repeats']} repeat(s), {args.pool} of repeats")
    high = max((p.efficiency for c in curves.values() for p in c), default=0.0)
    if high > 1.05:
        print(f"{_PROG}: warning: a system reached {high:.0%} of the peak: the peak was measured low "
              "(a busy machine?); pass --peak to fix it", file=sys.stderr)
    try:
        _figure(curves, results, args.threshold, title, out / "metg.png")
        figure = str(out / "metg.png")
    except ImportError:
        figure = "(no figure: pip install matplotlib)"

    print(f"# METG({args.threshold:.0%}) — {title.replace(chr(10), ', ')}; peak {peak:.4g} FLOP/s")
    print(f"# {'system':<14} {'METG (µs)':>10} {'95% CI (µs)':>20}  status")
    for s in systems:
        ci = cis[s]
        ci_text = "-" if ci is None else f"{_us(ci[0])} .. {_us(ci[1])}"
        print(f"  {s:<14} {_us(results[s].value):>10} {ci_text:>20}  {results[s].status}")
    print("# efficiency by -iter (granularity µs / efficiency %):")
    for s in systems:
        print(f"  {s}: " + "  ".join(f"{p.iterations}:{p.granularity * 1e6:.3g}/{p.efficiency * 100:.0f}" for p in curves[s]))
    if keep:
        print(f"# results: {out / 'metg.json'}  figure: {figure}")
    if args.json:
        print(json.dumps(json_line(record)), flush=True)
    return 0


def main(argv: Sequence[str]) -> int:
    """Entry point of ``shoal bench metg``; returns the exit code."""
    args = build_parser().parse_args(list(argv))
    try:
        if args.reanalyze:
            path = Path(args.reanalyze)
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise MetgError(f"--reanalyze: cannot read {path}: {exc}") from None
            return analyze(record, args, Path(args.out) if args.out else path.parent)
        if args.json and not args.out:  # the JSON line is the result: the files go to a scratch folder
            with tempfile.TemporaryDirectory(prefix="shoal-metg-") as tmp:
                args.out = tmp
                return run(args, keep=False)
        return run(args)
    except MetgError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 1
