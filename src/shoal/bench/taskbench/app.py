"""Task Bench's command line and report: the flags and output lines of the reference.

``parse(argv)`` reads the reference's flags (``-steps -width -type -radix -period
-fraction -kernel -iter -output -scratch -sample -imbalance -and``, plus ``-nodes``,
``-skip-graph-validation``, ``-v``) and shoal's own (``-n``, ``--system``, …) into an
:class:`App`. ``App.display()`` and ``App.report_timing()`` print the same lines the
reference prints, so its analysis scripts (``chart_metg.py``) read shoal's logs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence, TextIO

from .graph import NEEDS_PERIOD, DependenceType, GraphError, Kernel, KernelType, TaskGraph

__all__ = ["App", "UsageError", "parse", "count_flops", "count_bytes", "task_flops", "HELP"]

#: kernels of the reference that shoal does not implement (they need BLAS, I/O, ...)
_UNSUPPORTED_KERNELS = ("compute_dgemm", "memory_daxpy", "io_bound", "compute_and_mem", "dist_imbalance")


class UsageError(ValueError):
    """A bad command line; the message names the flag and what it accepts."""


@dataclass
class App:
    """Graphs to run and how: the parsed command line."""

    graphs: list[TaskGraph]
    system: str = "mpi4py"
    pes: int = 2
    mpiexec: str | None = None
    api: str | None = None  # shoal: "set", "entry" or "channel"
    transport: str | None = None  # shoal: "mpi" or "inproc"
    nodes: int = 0
    verbose: int = 0
    validate_graph: bool = True
    iter_sweep: tuple[int, ...] = ()
    runs: int = 2  # timed runs per configuration; the last one is reported (the reference's warm-up)
    corrupt: tuple[int, int] | None = None  # (timestep, point) whose output is damaged, to test validation

    def sweep(self) -> list["App"]:
        """One App per ``--iter-sweep`` value (every graph's -iter replaced), or [self]."""
        if not self.iter_sweep:
            return [self]
        return [replace(self, graphs=[g.with_iterations(i) for g in self.graphs], iter_sweep=()) for i in self.iter_sweep]

    # ------------------------------------------------------------ output

    def display(self, out: TextIO) -> None:
        """The reference's configuration block."""
        w = out.write
        w("Running Task Benchmark\n")
        w("  Configuration:\n")
        for i, g in enumerate(self.graphs, 1):
            w(f"    Task Graph {i}:\n")
            w(f"      Time Steps: {g.timesteps}\n")
            w(f"      Max Width: {g.max_width}\n")
            w(f"      Dependence Type: {g.dependence.value}\n")
            w(f"      Radix: {g.radix}\n")
            w(f"      Period: {g.period}\n")
            w(f"      Fraction Connected: {g.fraction_connected:f}\n")
            w("      Kernel:\n")
            w(f"        Type: {g.kernel.type.value}\n")
            w(f"        Iterations: {g.kernel.iterations}\n")
            w(f"        Samples: {g.kernel.samples}\n")
            w(f"        Imbalance: {g.kernel.imbalance:f}\n")
            w(f"      Output Bytes: {g.output_bytes_per_task}\n")
            w(f"      Scratch Bytes: {g.scratch_bytes_per_task}\n")
            if self.verbose:
                for t in range(g.timesteps):
                    off, width = g.offset_at_timestep(t), g.width_at_timestep(t)
                    w(f"      Timestep {t} (offset {off}, width {width}, last offset {g.offset_at_timestep(t - 1)}, "
                      f"last width {g.width_at_timestep(t - 1)}):\n")
                    w("        Points:" + "".join(f" {p}" for p in range(off, off + width)) + "\n")
                    w("        Dependencies:\n")
                    for p in range(off, off + width):
                        w(f"          Point {p}:" + "".join(f" {q}" for q in g.inputs(t, p)) + "\n")

    def report_timing(self, elapsed: float, out: TextIO, imbalance_iterations: Callable[[TaskGraph, int, int], int] | None = None) -> None:
        """The reference's report lines for a run that took ``elapsed`` seconds."""
        tasks = deps = local = nonlocal_ = flops = nbytes = local_bytes = nonlocal_bytes = 0
        for g in self.graphs:
            g_local = g_nonlocal = 0
            for t in range(g.timesteps):
                off, width = g.offset_at_timestep(t), g.width_at_timestep(t)
                tasks += width
                for p in range(off, off + width):
                    inputs = g.inputs(t, p)
                    deps += len(inputs)
                    if self.nodes > 0:
                        node = p * self.nodes // g.max_width
                        first, last = node * g.max_width // self.nodes, (node + 1) * g.max_width // self.nodes - 1
                        here = sum(1 for q in inputs if first <= q <= last)
                        g_local += here
                        g_nonlocal += len(inputs) - here
            local += g_local
            nonlocal_ += g_nonlocal
            local_bytes += g_local * g.output_bytes_per_task
            nonlocal_bytes += g_nonlocal * g.output_bytes_per_task
            flops += count_flops(g, imbalance_iterations)
            nbytes += count_bytes(g)
        w = out.write
        w(f"Total Tasks {tasks}\n")
        w(f"Total Dependencies {deps}\n")
        if self.nodes > 0:
            w(f"  Local Dependencies {local} (estimated)\n")
            w(f"  Nonlocal Dependencies {nonlocal_} (estimated)\n")
            w(f"  Number of Nodes (used for estimate) {self.nodes}\n")
        else:
            w("  Unable to estimate local/nonlocal dependencies\n")
        w(f"Total FLOPs {flops}\n")
        w(f"Total Bytes {nbytes}\n")
        w(f"Elapsed Time {elapsed:e} seconds\n")
        w(f"FLOP/s {flops / elapsed if elapsed > 0 else math.inf:e}\n")
        w(f"B/s {nbytes / elapsed if elapsed > 0 else math.inf:e}\n")
        w("Transfer (estimated):\n")
        if self.nodes > 0:
            w(f"  Local Bytes {local_bytes}\n")
            w(f"  Nonlocal Bytes {nonlocal_bytes}\n")
            w(f"  Local Bandwidth {local_bytes / elapsed:e} B/s\n")
            w(f"  Nonlocal Bandwidth {nonlocal_bytes / elapsed:e} B/s\n")
        else:
            w("  Unable to estimate local/nonlocal transfer\n")


# ---------------------------------------------------------------- counts


def task_flops(kernel: Kernel, iterations: int | None = None) -> int:
    """FLOPs of one task of ``kernel`` (``iterations`` overrides, for load_imbalance)."""
    it = kernel.iterations if iterations is None else iterations
    if kernel.type in (KernelType.COMPUTE_BOUND, KernelType.LOAD_IMBALANCE):
        return 2 * 64 * it + 64
    if kernel.type is KernelType.COMPUTE_BOUND2:
        return 2 * 32 * it
    return 0


def count_flops(g: TaskGraph, imbalance_iterations: Callable[[TaskGraph, int, int], int] | None = None) -> int:
    """Total FLOPs of a graph, as the reference counts them."""
    if g.kernel.type is KernelType.LOAD_IMBALANCE:
        from .execute import imbalance_iterations as native_iterations

        iterations = imbalance_iterations or native_iterations
        return sum(
            task_flops(g.kernel, iterations(g, t, p))
            for t in range(g.timesteps)
            for p in range(g.offset_at_timestep(t), g.offset_at_timestep(t) + g.width_at_timestep(t))
        )
    tasks = sum(g.width_at_timestep(t) for t in range(g.timesteps))
    return tasks * task_flops(g.kernel)


def count_bytes(g: TaskGraph) -> int:
    """Total bytes the memory-bound kernel moves, as the reference counts them."""
    if g.kernel.type is not KernelType.MEMORY_BOUND:
        return 0
    tasks = sum(g.width_at_timestep(t) for t in range(g.timesteps))
    return tasks * (g.scratch_bytes_per_task * g.kernel.iterations // g.kernel.samples)


# ---------------------------------------------------------------- parsing

HELP = """\
shoal bench taskbench: Task Bench (Slaughter et al., SC 2020) on shoal, mpi4py and peers

usage: shoal bench taskbench [-n N] [--system NAME] [graph flags] [-and graph flags ...]

Job:
  -n N                 number of processes (PEs/ranks) to launch (default 2); inside an
                       MPI job the job's size is used
  --system NAME        shoal | mpi4py | charm4py | dask | ray (default mpi4py)
  --api NAME           shoal only: set (receive sets) | entry (entry methods) |
                       channel (coroutines awaiting channels) (default: set)
  --transport NAME     shoal only: mpi (default) | inproc (all PEs in one process)
  --mpiexec PATH       launcher to use (default: $SHOAL_MPIEXEC, then PATH)
  --iter-sweep LIST    run once per -iter value in LIST (comma-separated), a report each
  --runs N             timed runs per configuration, the last one reported (default 2)
  --corrupt T,P        damage the output of task (T, P) of every graph: its consumers
                       must fail validation, naming the task and input (a self-test)

Task graph (as the reference; -and starts the next graph):
  -steps INT           height of the task graph (default 4)
  -width INT           width of the task graph (default 4)
  -type DEP            dependence pattern (default trivial): {types}
  -radix INT           radix (nearest, spread, random_nearest; default 3)
  -period INT          period (spread, random_nearest; default 3 for those)
  -fraction FLOAT      fraction of connected dependencies (random_nearest; default 0.25)
  -and                 start configuring the next task graph

Kernel:
  -kernel KERNEL       kernel type (default empty): {kernels}
  -iter INT            kernel iterations (default 0)
  -output INT          output bytes per task, >= 16 (default 16)
  -scratch INT         scratch bytes per task (memory_bound; default 0)
  -sample INT          samples (memory_bound; default 16)
  -imbalance FLOAT     amount of load imbalance, 0..2 (load_imbalance; default 0)

Other:
  -nodes INT           nodes to assume for the local/nonlocal estimates
  -skip-graph-validation   skip the graph's well-formedness check
  -v, -vv              print every timestep's points and dependencies
  -h, --help           this message
""".format(types=", ".join(d.value for d in DependenceType), kernels=", ".join(k.value for k in KernelType))


def _number(flag: str, text: str, kind: type, low: float | None = None, high: float | None = None, strict: bool = False) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise UsageError(f'flag "{flag}" needs {"an integer" if kind is int else "a number"}, got {text!r}') from None
    if low is not None and (value <= low if strict else value < low):
        raise UsageError(f'invalid flag "{flag} {text}": must be {">" if strict else ">="} {low:g}')
    if high is not None and value > high:
        raise UsageError(f'invalid flag "{flag} {text}": must be <= {high:g}')
    return value


_GRAPH_FLAGS = ("-steps", "-width", "-type", "-radix", "-period", "-fraction", "-kernel", "-iter", "-output",
                "-scratch", "-sample", "-imbalance", "-field")
_JOB_FLAGS = ("-n", "--pes", "--system", "--api", "--transport", "--mpiexec", "--iter-sweep", "--runs", "-nodes",
              "--corrupt")
_SWITCHES = ("-and", "-v", "-vv", "-skip-graph-validation")


def parse(argv: Sequence[str]) -> App:
    """The :class:`App` for a command line; :class:`UsageError` names a bad flag."""
    graphs: list[TaskGraph] = []
    current: dict = {}
    job: dict = {}
    verbose = 0
    validate = True

    def finish() -> None:
        kernel = Kernel(
            KernelType(current.pop("kernel", KernelType.EMPTY.value)),
            int(current.pop("iterations", 0)),
            int(current.pop("samples", 16)),
            float(current.pop("imbalance", 0.0)),
        )
        dependence = DependenceType(current.pop("dependence", DependenceType.TRIVIAL.value))
        period = current.pop("period", -1)
        if period < 0:
            period = 3 if dependence in NEEDS_PERIOD else 0
        graphs.append(TaskGraph(graph_index=len(graphs), dependence=dependence, period=period, kernel=kernel, **current))
        current.clear()

    args = list(argv)
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in _SWITCHES:
            if flag == "-and":
                finish()
            elif flag == "-v":
                verbose += 1
            elif flag == "-vv":
                verbose += 2
            else:
                validate = False
            i += 1
            continue
        if flag not in _GRAPH_FLAGS and flag not in _JOB_FLAGS:
            valid = ", ".join((*_JOB_FLAGS, *_GRAPH_FLAGS, *_SWITCHES, "-h"))
            raise UsageError(f"unknown flag {flag!r}; valid flags: {valid}")
        if i + 1 >= len(args):
            raise UsageError(f'flag "{flag}" requires an argument')
        value = args[i + 1]
        i += 2
        if flag == "-steps":
            current["timesteps"] = int(_number(flag, value, int, 0, strict=True))
        elif flag == "-width":
            current["max_width"] = int(_number(flag, value, int, 0, strict=True))
        elif flag == "-type":
            if value == "random_spread":
                raise UsageError('"-type random_spread" is declared by the reference Task Bench but never implemented; '
                                 "use random_nearest or spread")
            if value not in {d.value for d in DependenceType}:
                raise UsageError(f'invalid flag "-type {value}"; patterns: {", ".join(d.value for d in DependenceType)}')
            current["dependence"] = value
        elif flag == "-radix":
            current["radix"] = int(_number(flag, value, int, 0))
        elif flag == "-period":
            current["period"] = int(_number(flag, value, int, 0))
        elif flag == "-fraction":
            current["fraction_connected"] = float(_number(flag, value, float, 0, 1))
        elif flag == "-kernel":
            if value in _UNSUPPORTED_KERNELS:
                raise UsageError(f'kernel "{value}" of the reference is not implemented here; kernels: '
                                 f'{", ".join(k.value for k in KernelType)}')
            if value not in {k.value for k in KernelType}:
                raise UsageError(f'invalid flag "-kernel {value}"; kernels: {", ".join(k.value for k in KernelType)}')
            current["kernel"] = value
        elif flag == "-iter":
            current["iterations"] = int(_number(flag, value, int, 0))
        elif flag == "-output":
            current["output_bytes_per_task"] = int(_number(flag, value, int, 16))
        elif flag == "-scratch":
            current["scratch_bytes_per_task"] = int(_number(flag, value, int, 0))
        elif flag == "-sample":
            current["samples"] = int(_number(flag, value, int, 0))
        elif flag == "-imbalance":
            current["imbalance"] = float(_number(flag, value, float, 0, 2))
        elif flag == "-field":
            _number(flag, value, int, 0, strict=True)  # accepted for compatibility; no effect here
        elif flag in ("-n", "--pes"):
            job["pes"] = int(_number(flag, value, int, 0, strict=True))
        elif flag == "-nodes":
            job["nodes"] = int(_number(flag, value, int, 0, strict=True))
        elif flag == "--runs":
            job["runs"] = int(_number(flag, value, int, 0, strict=True))
        elif flag == "--corrupt":
            parts = value.split(",")
            if len(parts) != 2 or not all(x.strip().isdigit() for x in parts):
                raise UsageError(f"--corrupt needs TIMESTEP,POINT, got {value!r}")
            job["corrupt"] = (int(parts[0]), int(parts[1]))
        elif flag == "--iter-sweep":
            try:
                sweep = tuple(int(v) for v in value.split(",") if v.strip())
            except ValueError:
                raise UsageError(f"--iter-sweep needs comma-separated integers, got {value!r}") from None
            if not sweep or min(sweep) < 0:
                raise UsageError(f"--iter-sweep needs non-negative integers, got {value!r}")
            job["iter_sweep"] = sweep
        else:
            job[flag.lstrip("-")] = value
    finish()
    app = App(graphs=graphs, verbose=verbose, validate_graph=validate, **job)
    if validate:
        for g in app.graphs:
            try:
                g.check()
            except GraphError as exc:
                raise UsageError(f"task graph {g.graph_index + 1}: {exc}") from None
    return app

