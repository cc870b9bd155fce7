"""``shoal bench experiment FILE.toml --out results.csv``: run an experiment's trials.

The trials run in :func:`.spec.plan`'s seeded random order; each configuration ×
target gets ``warmup`` untimed runs before its first trial of this invocation. Every
finished trial is one CSV row (:mod:`.results`). Rerunning the same command skips the
trials the file already holds (matched by configuration + target + trial) and runs the
rest with the file's seed, so the order continues where it stopped. The machine
(``shoal info``) and the software versions go to ``<out>.machine.json`` once.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from . import results as results_file
from .spec import Experiment, ExperimentError, Run, command, load, plan

__all__ = ["available_cores", "machine_record", "main", "pending"]

_PROG = "shoal bench experiment"


def available_cores() -> int:
    """The cores this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def software_versions() -> dict[str, str]:
    """Versions of Python and the packages a result depends on."""
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("shoal", "numpy", "scipy", "numba", "mpi4py", "mpich", "matplotlib", "charm4py"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def machine_record() -> dict[str, Any]:
    """``shoal info``'s output, the core count and the software versions, now."""
    try:
        proc = subprocess.run([sys.executable, "-m", "shoal", "info"], capture_output=True, text=True, timeout=120)
        info = proc.stdout if proc.returncode == 0 else f"`shoal info` failed: {proc.stderr.strip()[-500:]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        info = f"`shoal info` failed: {exc}"
    return {"shoal_info": info, "cores": available_cores(), "versions": software_versions(),
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def machine_path(out: Path) -> Path:
    return out.with_name(out.name + ".machine.json")


def pending(exp: Experiment, seed: int, done: set[tuple[str, str, int, str, int]]) -> list[Run]:
    """The planned runs whose trial is not in ``done`` (keys of rows already written)."""
    return [run for run in plan(exp, seed) if run.key not in done]


def _seed(exp: Experiment, existing: results_file.Results, out: Path) -> int:
    seeds = {row.get("seed", "") for row in existing.rows} - {""}
    if len(seeds) > 1:
        raise ExperimentError(f"{out}: rows with different seeds {sorted(seeds)}; it mixes experiments")
    if seeds:
        seed = int(seeds.pop())
        if exp.seed is not None and exp.seed != seed:
            raise ExperimentError(f"{out} was started with seed {seed}, {exp.source} says seed = {exp.seed}: "
                                  "give another --out, or the same seed to resume")
        return seed
    return exp.seed if exp.seed is not None else random.SystemRandom().randrange(2**31)


def _check_resume(runs: list[Run], existing: results_file.Results, out: Path) -> set[tuple[str, str, int, str, int]]:
    """Keys of the file's rows; a row of this experiment whose command differs is an error."""
    planned = {run.key: command(run)[1:] for run in runs}
    done: set[tuple[str, str, int, str, int]] = set()
    for n, row in enumerate(existing.rows, start=2):
        try:
            key = results_file.row_key(row)
        except (KeyError, ValueError):
            raise ExperimentError(f"{out}: line {n} is not a row of `{_PROG}` (columns "
                                  f"{', '.join(results_file.REQUIRED)} needed); give another --out") from None
        cmd = row.get("command", "")
        if key in planned and shlex.split(cmd)[1:] != planned[key]:  # the Python may differ
            raise ExperimentError(f"{out}: line {n} ran `{cmd}`, but the experiment now runs "
                                  f"`{shlex.join(planned[key])}` for it: the file is of another experiment; "
                                  "give another --out")
        done.add(key)
    return done


def run_once(cmd: list[str], metric: str, timeout: float) -> dict[str, Any]:
    """Run one command; its last stdout line, parsed as JSON with a number ``metric``."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise RuntimeError(f"`{shlex.join(cmd)}` failed (exit code {proc.returncode}):\n{tail}")
    try:
        record = one_row(json.loads(lines[-1]))
    except (ValueError, TypeError) as exc:
        raise RuntimeError(f"`{shlex.join(cmd)}`: its last line is not the JSON of one result ({exc})") from None
    if not isinstance(record, dict):
        raise RuntimeError(f"`{shlex.join(cmd)}`: its last line is not a JSON object")
    try:
        float(record[metric])
    except (ValueError, KeyError, TypeError) as exc:
        # a METG sweep that never reached the threshold says so in ``status``, a failed stencil system in ``error``
        why = "; ".join(f"{k}: {record[k]}" for k in ("status", "error") if record.get(k))
        raise RuntimeError(f"`{shlex.join(cmd)}`: its last line is not JSON with a number {metric!r} "
                           f"({type(exc).__name__}: {exc}{'; ' + why if why else ''})") from None
    return record


def one_row(record: Any) -> Any:
    """A JSON result with ``rows`` (a micro-benchmark's: one per message size; a METG
    sweep's: one per system; the stencil's: one per problem × system) as one record: its
    only row's fields joined to the top level's; an app's JSON as it is."""
    rows = record.get("rows") if isinstance(record, dict) else None
    if rows is None:
        return record
    if not isinstance(rows, list) or len(rows) != 1 or not isinstance(rows[0], dict):
        raise ValueError(f"{len(rows) if isinstance(rows, list) else 'no'} rows: an experiment run measures one "
                         "message size (give message_size = \"N:N\"), one system or one problem")
    return {**{k: v for k, v in record.items() if k != "rows"}, **rows[0]}


def _row(run: Run, exp: Experiment, seed: int, cores: int, record: dict[str, Any], wall: float,
         cmd: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "order": run.order, "trial": run.trial, "target": run.target.name, "app_target": run.target.app_target,
        "app": run.app, "pes": run.pes, "configuration": run.configuration,
        "oversubscribed": int(run.pes > cores), "cores": cores, "seed": seed, "metric": exp.metric,
        "baseline": exp.baseline,
    }
    if run.bench != "app":
        row.update(bench=run.bench, unit=record.get("unit", ""))
    row.update((k, v) for k, v in run.options)
    for key, value in results_file.numeric_fields(record).items():
        row.setdefault(key, value)  # the configuration's own columns win (pes, steps, size)
    row.update(wall_s=round(wall, 3), finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               command=shlex.join(cmd))
    return row


class _Progress:
    """Progress of the timed trials: a rich bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, done: int, metric: str) -> None:
        self.total, self.done, self.metric = total, done, metric
        self.started = time.monotonic()
        self.finished_here = 0
        self._bar: Any = None
        if sys.stdout.isatty():
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
            self._bar.start()
            self._task = self._bar.add_task("trials", total=total, completed=done)

    def eta(self) -> float:
        left = self.total - self.done
        return (time.monotonic() - self.started) / self.finished_here * left if self.finished_here else float("nan")

    def step(self, run: Run, value: float) -> None:
        self.done += 1
        self.finished_here += 1
        text = (f"{run.app} {run.configuration} pes={run.pes} {run.target.name} trial {run.trial}: "
                f"{self.metric} {value:.6g}")
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=text)
            return
        eta = self.eta()
        left = "?" if eta != eta else time.strftime("%H:%M:%S", time.gmtime(eta))
        print(f"[{self.done}/{self.total}] {text}  (about {left} left)", flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def execute(exp: Experiment, out: Path, *, runner: Callable[[list[str], str, float], dict[str, Any]] = run_once,
            log: Callable[[str], None] = print) -> int:
    """Run the trials of ``exp`` that ``out`` lacks; the exit code."""
    existing = results_file.load(out)
    seed = _seed(exp, existing, out)
    runs = plan(exp, seed)
    done = _check_resume(runs, existing, out)
    todo = [run for run in runs if run.key not in done]
    cores = available_cores()
    over = sorted({run.pes for run in runs if run.pes > cores})
    log(f"{_PROG}: {exp.source}: {len(runs)} trials ({len(runs) - len(todo)} already in {out}), seed {seed}"
        + (f"; pes {over} exceed the {cores} available cores: those rows are flagged oversubscribed" if over else ""))
    if not todo:
        log(f"nothing left to run; `shoal bench report {out}` analyses it")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = machine_path(out)
    if not meta.exists():
        meta.write_text(json.dumps(machine_record(), indent=1))
    warmed: set[tuple[str, str, int, str]] = set()
    progress = _Progress(len(runs), len(runs) - len(todo), exp.metric)
    try:
        for run in todo:
            cmd = command(run)
            if run.cell not in warmed:
                for _ in range(exp.warmup):
                    runner(cmd, exp.metric, exp.timeout)
                warmed.add(run.cell)
            t0 = time.monotonic()
            record = runner(cmd, exp.metric, exp.timeout)
            wall = time.monotonic() - t0
            results_file.append(out, existing, _row(run, exp, seed, cores, record, wall, cmd))
            progress.step(run, float(record[exp.metric]))
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        progress.close()
        print(f"{_PROG}: {exc}\nthe finished trials are in {out}; the same command resumes", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        progress.close()
        print(f"\n{_PROG}: interrupted; the finished trials are in {out}; the same command resumes", file=sys.stderr)
        return 130
    progress.close()
    log(f"{len(runs)} trials in {out}; `shoal bench report {out}` analyses them")
    return 0


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog=_PROG, description="run an experiment file's grid of trials into a CSV file")
    p.add_argument("file", type=Path, help="the experiment (TOML; docs/benchmarks.md)")
    p.add_argument("--out", type=Path, default=None, help="results CSV (default results/<file name>.csv); "
                   "rerunning resumes it")
    ns = p.parse_args(argv)
    out = ns.out or Path("results") / f"{ns.file.stem}.csv"
    try:
        exp = load(ns.file)
        return execute(exp, out)
    except ExperimentError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 2
