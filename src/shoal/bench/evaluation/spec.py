"""An experiment file (TOML) and its grid of runs; no I/O beyond reading the file.

::

    app = "jacobi2d"                 # an app of `shoal bench app`
    targets = ["shoal", "mpi4py"]    # the app's targets, or names of [target.NAME] tables
    pes = [1, 2]                     # a grid axis
    size = [1024, 4096]              # any app option: a list is a grid axis,
    steps = 100                      #   a single value is the same in every run
    trials = 5
    warmup = 1                       # untimed runs of each configuration first (1)
    metric = "time_per_step"         # the JSON field compared (time_per_step)
    baseline = "mpi4py"              # ratios are relative to it (the first target)
    seed = 7                         # run order (default: random; recorded in the CSV)
    timeout = 1200                   # seconds one run may take (1200)

    [target.shoal-odf4]              # extra options of one target
    target = "shoal"                 # the app's target (default: the table's name)
    odf = 4

``bench = "micro"`` makes it an experiment of ``shoal bench micro`` instead: ``app``
names the test (``latency``, ``bw``, ``allreduce``, …), the targets are micro's
(``shoal``, ``mpi4py``, ``charm4py``, ``c``; ``api = "channel"`` in a target table),
the other keys are micro's options (``message_size = ["8:8", "4194304:4194304"]``:
one size per run), and the metric is the test's ``value`` (µs, or MB/s for bandwidth).

``bench = "taskbench"``: each run is one METG sweep of ``shoal bench metg`` on one
system; ``app`` names the Task Bench dependence pattern (``-type``: ``stencil_1d``,
``fft``, …), the targets are metg's systems (``shoal``, ``shoal:entry``, ``mpi4py``,
``charm4py``, ``dask``, ``ray``), the other keys its options (``kernel``, ``steps`` for
``-steps``, ``iter_max``, ``repeats``, ``tasks_per_core``, …), and the metric is
``metg_us``, METG(50%) in µs.

``bench = "stencil"``: each run is one round of ``shoal bench stencil`` for one
system; ``app`` names the problem (``jacobi``, ``burgers``, ``laplace3d``), the targets
are ``numpy``, ``c``, ``c-omp``, ``numba`` and ``shoal``, run on ``pes`` cores (shoal on
``pes`` PEs, c-omp and numba on ``pes`` threads; numpy and c use one core whatever
``pes`` says), the other keys its options (``n``, ``n3``, ``steps``, ``odf``), and the
metric is ``time_per_step`` (seconds; reported in ms).

:func:`load` validates everything and raises :class:`ExperimentError` naming the
problem; :func:`plan` expands the grid into :class:`Run` records in a seeded random
order: ``trials`` rounds, each every configuration × target once, shuffled.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import itertools
import random
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BENCHES", "EXPERIMENT_KEYS", "STENCIL_SYSTEMS", "Experiment", "ExperimentError", "Run", "TargetSpec",
           "load", "parse", "plan"]

#: the keys of the experiment itself; any other top-level key is an app option
EXPERIMENT_KEYS = ("bench", "app", "targets", "pes", "trials", "warmup", "metric", "baseline", "seed", "timeout",
                   "target")
#: what an experiment can run: ``shoal bench app`` (the default), ``shoal bench micro``,
#: a METG sweep of ``shoal bench metg`` (Task Bench), or ``shoal bench stencil``
BENCHES = ("app", "micro", "taskbench", "stencil")
_REQUIRED = ("app", "targets", "pes", "trials")
#: common options of `shoal bench app` an experiment sets itself
_RESERVED_DESTS = {"help", "target", "pes", "json"}
#: options of `shoal bench micro` an experiment sets itself, or that make no sense in one
_MICRO_RESERVED = {"help", "tests", "target", "pes", "json", "csv", "quick", "mpiexec", "corrupt_for_testing"}
#: options of `shoal bench metg` an experiment sets itself (app: -type, targets: --systems),
#: that name experiment keys (seed, timeout) or files, or that take lists (``--steps-for``)
_METG_RESERVED = {"help", "systems", "pes", "type", "json", "out", "reanalyze", "seed", "timeout", "mpiexec",
                  "steps_for", "iters_for"}
#: options of `shoal bench stencil` an experiment sets itself (app: --problems, targets:
#: --systems, pes: --pes and --threads, one round a run) or that name files or experiment keys
_STENCIL_RESERVED = {"help", "problems", "systems", "pes", "threads", "trials", "json", "figure", "timeout"}
#: a stencil experiment's target -> the `shoal bench stencil` system it runs on ``pes`` cores
#: (the names :func:`shoal.bench.stencil.cli.systems` gives them)
STENCIL_SYSTEMS = {"numpy": "numpy", "c": "c", "c-omp": "c-omp{pes}", "numba": "numba{pes}", "shoal": "shoal-{pes}pe"}

Scalar = int | float | str | bool


class ExperimentError(ValueError):
    """An experiment file (or a results file) that cannot be used, with the reason."""


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """One column of the comparison: an app target with options of its own."""

    name: str
    app_target: str
    options: tuple[tuple[str, Scalar], ...] = ()


@dataclass(frozen=True, slots=True)
class Run:
    """One trial of one configuration on one target, at its place in the run order."""

    order: int
    trial: int
    app: str
    target: TargetSpec
    pes: int
    options: tuple[tuple[str, Scalar], ...]  # the configuration's app options, sorted by key
    bench: str = "app"  # one of BENCHES; ``app`` is then the app, micro test, Task Bench pattern or stencil problem

    @property
    def configuration(self) -> str:
        """The app options as ``key=value`` words (pes and target apart): a CSV column."""
        return " ".join(f"{k}={_text(v)}" for k, v in self.options)

    @property
    def key(self) -> tuple[str, str, int, str, int]:
        """What identifies a trial in a results file: configuration, target and trial."""
        return (self.app, self.configuration, self.pes, self.target.name, self.trial)

    @property
    def cell(self) -> tuple[str, str, int, str]:
        """The configuration × target this trial belongs to (warm-up is per cell)."""
        return self.key[:4]

    def argv(self) -> list[str]:
        """The ``shoal bench`` arguments of this run (without ``--json``)."""
        target, pes = self.target.app_target, str(self.pes)
        if self.bench == "taskbench":
            args = ["metg", "-type", self.app, "--systems", target, "-n", pes]
        elif self.bench == "stencil":
            args = ["stencil", "--problems", self.app, "--systems", STENCIL_SYSTEMS[target].format(pes=pes),
                    "--pes", pes, "--threads", pes, "--trials", "1"]
        else:
            args = [self.bench, self.app, "--target", target, "-n", pes]
        flags = _options_of(self.bench, self.app)
        for key, value in (*self.options, *self.target.options):
            flag = max(flags[key].option_strings, key=len)  # --message-size; metg's single-dash -steps
            if isinstance(value, bool):
                if value:
                    args.append(flag)
            else:
                args += [flag, _text(value)]
        return args


@dataclass(frozen=True, slots=True)
class Experiment:
    """A validated experiment file."""

    app: str
    targets: tuple[TargetSpec, ...]
    pes: tuple[int, ...]
    axes: tuple[tuple[str, tuple[Scalar, ...]], ...]  # app options, one or more values each
    trials: int
    warmup: int = 1
    metric: str = "time_per_step"
    baseline: str = ""
    seed: int | None = None
    timeout: float = 1200.0
    source: str = ""
    option_flags: dict[str, bool] = field(default_factory=dict)  # app option -> is a flag
    bench: str = "app"

    @property
    def option_keys(self) -> list[str]:
        return [k for k, _ in self.axes]


def _text(value: Scalar) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _settable(parser: argparse.ArgumentParser, reserved: set[str]) -> dict[str, argparse.Action]:
    """A command's options by dest (``message_size``), less ``reserved`` and the positional arguments."""
    return {a.dest: a for a in parser._actions if a.dest not in reserved and a.option_strings}


@functools.cache
def _options_of(bench: str, app: str) -> dict[str, argparse.Action]:
    """The options an experiment of ``bench`` may set (``app``'s own, for ``bench = "app"``)."""
    if bench == "micro":
        from ..micro.options import build_parser as micro_parser

        return _settable(micro_parser(), _MICRO_RESERVED)
    if bench == "taskbench":
        from ..taskbench.metg_cli import build_parser as metg_parser

        return _settable(metg_parser(), _METG_RESERVED)
    if bench == "stencil":
        from ..stencil.cli import build_parser as stencil_parser

        return _settable(stencil_parser(), _STENCIL_RESERVED)
    from ..apps.cli import APPS, build_parser as app_parser

    return _settable(app_parser(app, importlib.import_module(APPS[app][0])), _RESERVED_DESTS)


def _bench_of(bench: str, app: str, source: str) -> tuple[dict[str, argparse.Action], list[str], str, str]:
    """The options, the targets and the default metric of ``app`` of ``bench``, and what
    ``app`` names there (for messages)."""
    if bench == "micro":
        from ..micro import catalog, targets as micro_targets

        if app not in catalog.TESTS:
            raise ExperimentError(f"{source}: unknown micro-benchmark test {app!r}; tests: {', '.join(catalog.TESTS)}")
        return _options_of(bench, app), list(micro_targets.TARGETS), "value", f"micro-benchmark {app!r}"
    if bench == "taskbench":
        from ..taskbench.graph import DependenceType
        from ..taskbench.metg_cli import SYSTEMS

        patterns = [d.value for d in DependenceType]
        if app not in patterns:
            raise ExperimentError(f"{source}: unknown Task Bench dependence pattern {app!r} (app names the -type "
                                  f"of a METG sweep); patterns: {', '.join(patterns)}")
        return _options_of(bench, app), list(SYSTEMS), "metg_us", f"METG sweep (shoal bench metg -type {app})"
    if bench == "stencil":
        from ..stencil.problems import PROBLEMS

        if app not in PROBLEMS:
            raise ExperimentError(f"{source}: unknown stencil problem {app!r}; problems: {', '.join(PROBLEMS)}")
        return _options_of(bench, app), list(STENCIL_SYSTEMS), "time_per_step", f"stencil problem {app!r}"
    from ..apps.cli import APPS

    if app not in APPS:
        raise ExperimentError(f"{source}: unknown app {app!r}; apps: {', '.join(APPS)}")
    return (_options_of(bench, app), list(importlib.import_module(APPS[app][0]).TARGETS), "time_per_step",
            f"app {app!r}")


def _scalar(where: str, value: Any, action: argparse.Action) -> Scalar:
    flag = action.nargs == 0
    if flag and not isinstance(value, bool):
        raise ExperimentError(f"{where}: {action.option_strings[-1]} is a flag; give true or false, not {value!r}")
    if not isinstance(value, (bool, int, float, str)) or (isinstance(value, bool) and not flag):
        raise ExperimentError(f"{where}: give a number or a string (or a list of them), not {value!r}")
    if action.choices is not None and not flag and value not in action.choices and str(value) not in action.choices:
        raise ExperimentError(f"{where}: {value!r} is not one of {list(action.choices)}")
    return value


def _option_key(key: str, options: dict[str, argparse.Action], where: str, what: str) -> str:
    dest = key.replace("-", "_")
    if dest not in options:
        valid = ", ".join(sorted(options))
        raise ExperimentError(f"{where}: unknown key {key!r}; experiment keys: {', '.join(EXPERIMENT_KEYS)}; "
                              f"options of {what}: {valid}")
    return dest


def _int_list(where: str, value: Any, minimum: int) -> tuple[int, ...]:
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < minimum for v in values):
        raise ExperimentError(f"{where}: give a whole number ≥ {minimum} or a list of them, not {value!r}")
    return tuple(dict.fromkeys(values))


def parse(data: dict[str, Any], source: str = "<experiment>") -> Experiment:
    """Validate a parsed TOML document; :class:`ExperimentError` names the first problem."""
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ExperimentError(f"{source}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                              f"(an experiment needs {', '.join(_REQUIRED)})")
    bench = data.get("bench", "app")
    if bench not in BENCHES:
        raise ExperimentError(f"{source}: bench = {bench!r}: give one of {', '.join(map(repr, BENCHES))}")
    app = data["app"]
    options, app_targets, default_metric, what = _bench_of(bench, app, source)

    tables = data.get("target", {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise ExperimentError(f"{source}: [target.NAME] tables hold a target's extra options, e.g. "
                              "[target.shoal-odf4] with target = \"shoal\" and odf = 4")
    names = data["targets"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ExperimentError(f"{source}: targets: give a list of target names, e.g. {app_targets}")
    if len(set(names)) != len(names):
        raise ExperimentError(f"{source}: targets: names must differ, got {names}")
    unused = sorted(set(tables) - set(names))
    if unused:
        raise ExperimentError(f"{source}: [target.{unused[0]}] is not in targets = {names}")
    targets = []
    for name in names:
        table = dict(tables.get(name, {}))
        app_target = table.pop("target", name)
        if app_target not in app_targets:
            hint = "" if name in tables else f", or describe it in a [target.{name}] table with target = \"…\""
            raise ExperimentError(f"{source}: target {app_target!r} is not a target of {what}: "
                                  f"{', '.join(app_targets)}{hint}")
        extra = []
        for key, value in sorted(table.items()):
            where = f"{source}: [target.{name}] {key}"
            dest = _option_key(key, options, f"{source}: [target.{name}]", what)
            extra.append((dest, _scalar(where, value, options[dest])))
        targets.append(TargetSpec(name, app_target, tuple(extra)))

    axes: dict[str, tuple[Scalar, ...]] = {}
    for key, value in data.items():
        if key in EXPERIMENT_KEYS:
            continue
        dest = _option_key(key, options, source, what)
        if dest in axes:
            raise ExperimentError(f"{source}: option {dest!r} given twice")
        values = value if isinstance(value, list) else [value]
        if not values:
            raise ExperimentError(f"{source}: {key} = []: give at least one value")
        axes[dest] = tuple(dict.fromkeys(_scalar(f"{source}: {key}", v, options[dest]) for v in values))

    pes = _int_list(f"{source}: pes", data["pes"], 1)
    trials = data["trials"]
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 2:
        raise ExperimentError(f"{source}: trials = {trials!r}: give a whole number ≥ 2 (a confidence interval needs 2)")
    warmup = data.get("warmup", 1)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ExperimentError(f"{source}: warmup = {warmup!r}: give a whole number ≥ 0")
    metric = data.get("metric", default_metric)
    if not isinstance(metric, str) or not metric:
        raise ExperimentError(f"{source}: metric = {metric!r}: give the name of a field of the app's JSON")
    baseline = data.get("baseline", names[0])
    if not isinstance(baseline, str) or baseline not in names:
        raise ExperimentError(f"{source}: baseline = {baseline!r} is not one of targets = {names}")
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ExperimentError(f"{source}: seed = {seed!r}: give a whole number ≥ 0")
    timeout = data.get("timeout", 1200)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ExperimentError(f"{source}: timeout = {timeout!r}: give seconds > 0")
    flags = {dest: options[dest].nargs == 0 for dest in axes}
    return Experiment(app, tuple(targets), pes, tuple(sorted(axes.items())), trials, warmup, metric, baseline,
                      seed, float(timeout), source, flags, bench)


def load(path: str | Path) -> Experiment:
    """Read and validate an experiment file: TOML, or YAML (``.yaml``/``.yml``, the same
    keys; ``target:`` a mapping of target tables)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ExperimentError(f"{path}: no such experiment file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"{path}: cannot read it ({exc})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        return parse(_yaml(text, path), str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{path}: not valid TOML ({exc})") from None
    return parse(data, str(path))


def _yaml(text: str, path: Path) -> dict[str, Any]:
    """The mapping a YAML experiment file holds (PyYAML's safe loader)."""
    try:
        import yaml
    except ImportError:
        raise ExperimentError(f"{path}: a YAML experiment file needs PyYAML (pip install pyyaml), "
                              "or write it as TOML") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: an experiment file holds a mapping of keys (app, targets, pes, ...), "
                              f"not a {type(data).__name__}")
    return data


def configurations(exp: Experiment) -> list[tuple[int, tuple[tuple[str, Scalar], ...]]]:
    """Every ``(pes, options)`` of the grid, in grid order."""
    keys = [k for k, _ in exp.axes]
    combos = itertools.product(exp.pes, *(values for _, values in exp.axes))
    return [(int(combo[0]), tuple(zip(keys, combo[1:]))) for combo in combos]


def plan(exp: Experiment, seed: int) -> list[Run]:
    """All ``trials`` rounds of every configuration × target, each round shuffled with
    ``random.Random(seed)``. A ``sequential`` target runs in one process, so it runs only
    in the configurations with ``pes = 1``."""
    cells = [(pes, opts, t) for pes, opts in configurations(exp) for t in exp.targets
             if not (t.app_target == "sequential" and pes != 1)]
    rng = random.Random(seed)
    runs: list[Run] = []
    for trial in range(exp.trials):
        round_ = cells[:]
        rng.shuffle(round_)
        runs += [Run(len(runs) + i, trial, exp.app, t, pes, opts, exp.bench) for i, (pes, opts, t) in enumerate(round_)]
    return runs


def command(run: Run) -> list[str]:
    """The exact command line of ``run``: this Python, ``-m shoal bench …``, and the flag
    that makes its last line of output JSON (``--json``; ``--json -`` for the stencil)."""
    return [sys.executable, "-m", "shoal", "bench", *run.argv(), *(("--json", "-") if run.bench == "stencil" else
                                                                   ("--json",))]
