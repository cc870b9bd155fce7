"""``shoal bench app jacobi2d``: its options, its targets, how each cuts the grid, its report.

The problem (:mod:`.kernels`): ``--size N`` or ``NxM`` interior points with a fixed
boundary held at zero, a deterministic initial state (a sine mode plus a hot spot), and
``--steps S`` 5-point Jacobi sweeps ``u'[i,j] = 0.25 (u[i-1,j] + u[i+1,j] + u[i,j-1] +
u[i,j+1])``. The checksum is the exact sum of the final interior rounded once to a float,
so it is the same number (``==``) for every target and PE count.

Verification: when the problem is small (at most :data:`CHECK_LIMIT` point updates),
PE 0 reruns it sequentially and the checksums must be equal; otherwise it checks the
maximum principle (the checksum is finite and no larger than the initial sum, as the
zero boundary only drains a non-negative state).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..report import AppReport, jacobi_report
from .layout import Layout, split

__all__ = ["TARGETS", "DEFAULT_STEPS", "HELP", "Config", "add_options", "configure", "parse_size", "layout",
           "make_report"]

HELP = "2-D Jacobi 5-point stencil with halo exchange"

#: target -> (module with run(cfg) -> int, "mpi": runs under mpiexec / "local": in this process)
TARGETS: dict[str, tuple[str, str]] = {
    "shoal": ("shoal.bench.apps.jacobi2d.shoal_target", "mpi"),
    "mpi4py": ("shoal.bench.apps.jacobi2d.mpi4py_target", "mpi"),
    "charm4py": ("shoal.bench.apps.jacobi2d.charm4py_target", "local"),  # launches its own charmrun job
    "sequential": ("shoal.bench.apps.jacobi2d.sequential", "local"),
}
DEFAULT_STEPS = 100
DEFAULT_SIZE = "1024"
#: above this many point updates (N * M * S) the report checks bounds instead of rerunning sequentially
CHECK_LIMIT = 250_000_000


@dataclass(frozen=True)
class Config:
    """One run of jacobi2d: the problem and how the chosen target runs it."""

    N: int = 1024
    M: int = 1024
    steps: int = DEFAULT_STEPS
    target: str = "shoal"
    pes: int = 2
    json: bool = False
    mpiexec: str | None = None
    transport: str = "mpi"  # shoal: "inproc" runs every PE in this process
    odf: int = 1  # shoal, charm4py: blocks per PE

    def with_pes(self, pes: int) -> "Config":
        return replace(self, pes=pes)


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("jacobi2d")
    g.add_argument("--size", default=DEFAULT_SIZE, metavar="N|NxM",
                   help=f"interior points: N for N x N, or NxM ({DEFAULT_SIZE})")
    g.add_argument("--odf", type=int, default=Config.odf, help=f"shoal, charm4py: blocks (chares) per PE ({Config.odf})")


def parse_size(text: str) -> tuple[int, int]:
    """``"N"`` -> (N, N), ``"NxM"`` -> (N, M); ValueError naming the option otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?", text)
    if m is None:
        raise ValueError(f"--size {text!r}: give N or NxM, positive integers (e.g. 1024 or 512x2048)")
    n = int(m.group(1))
    k = int(m.group(2)) if m.group(2) is not None else n
    if n < 1 or k < 1:
        raise ValueError(f"--size {text!r}: the grid needs at least 1 x 1 interior points")
    return n, k


def configure(ns: argparse.Namespace) -> Config:
    """The validated configuration; ValueError naming a bad option otherwise."""
    N, M = parse_size(str(ns.size))
    if ns.steps < 1:
        raise ValueError(f"--steps {ns.steps}: need at least 1 step")
    if ns.pes < 1:
        raise ValueError(f"-n {ns.pes}: need at least 1 PE")
    if ns.odf < 1:
        raise ValueError(f"--odf {ns.odf}: need at least 1 block per PE")
    cfg = Config(N, M, ns.steps, ns.target, ns.pes, ns.json, ns.mpiexec, ns.transport, ns.odf)
    try:
        layout(cfg)
    except ValueError as exc:
        raise ValueError(f"--size {ns.size} with -n {cfg.pes}"
                         f"{f' --odf {cfg.odf}' if cfg.target in ('shoal', 'charm4py') else ''}: {exc}") from None
    return cfg


def layout(cfg: Config) -> tuple[Layout, int, int]:
    """``(blocks, a1, a2)``: how the target cuts the grid; block ``(bi, bj)`` is on the PE
    of PE-grid cell ``(bi // a1, bj // a2)``.

    sequential: one block. mpi4py: a ``q1 x q2`` grid of ranks (:func:`.layout.split`).
    shoal, charm4py: the same PE grid, each PE's share cut again into ``odf = a1 x a2`` blocks."""
    if cfg.target == "sequential":
        return Layout(cfg.N, cfg.M, 1, 1), 1, 1
    q1, q2 = split(cfg.pes, cfg.N, cfg.M)
    if cfg.target == "mpi4py":
        return Layout(cfg.N, cfg.M, q1, q2), 1, 1
    a1, a2 = split(cfg.odf, max(1, cfg.N // q1), max(1, cfg.M // q2))
    if q1 * a1 > cfg.N or q2 * a2 > cfg.M:
        raise ValueError(f"a {cfg.N}x{cfg.M} grid cannot be cut into {q1 * a1} x {q2 * a2} non-empty blocks")
    return Layout(cfg.N, cfg.M, q1 * a1, q2 * a2), a1, a2


def reference(cfg: Config) -> float:
    """The sequential checksum of ``cfg``'s problem."""
    from .sequential import simulate

    return simulate(cfg.N, cfg.M, cfg.steps)[0]


def _initial_sum(cfg: Config) -> float:
    from .kernels import exact_sum, initial_block, to_float

    return to_float(exact_sum(initial_block(cfg.N, cfg.M, 0, cfg.N, 0, cfg.M)))


def make_report(cfg: Config, pes: int, elapsed: float, compute: Sequence[float], checksum: float,
                decomposition: str, extra: dict[str, Any] | None = None,
                lines: list[tuple[str, str]] | None = None) -> AppReport:
    """The report of a run: ``elapsed`` seconds over the timed steps, ``compute`` the
    seconds each PE spent in the kernel, ``checksum`` the exact-sum checksum."""
    from .kernels import NUMBA

    return jacobi_report("jacobi2d", cfg, (cfg.N, cfg.M), pes, elapsed, list(compute), checksum, decomposition,
                         lambda: reference(cfg), lambda: _initial_sum(cfg), "numba" if NUMBA else "numpy",
                         CHECK_LIMIT, extra, lines)
