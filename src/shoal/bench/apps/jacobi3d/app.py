"""``shoal bench app jacobi3d``: its options, its targets, how each cuts the grid, its report.

The problem (:mod:`.kernels`): ``--size N`` or ``NxMxK`` interior points with a fixed
boundary held at zero, a deterministic initial state (a sine mode plus a hot spot), and
``--steps S`` 7-point Jacobi sweeps (each point becomes the mean of its six neighbours).
The checksum is the exact sum of the final interior rounded once to a float, so it is
the same number (``==``) for every target and PE count.

Sizes need not divide by the block counts (blocks differ by at most one point along an
axis); a grid with fewer points along an axis than blocks is refused.

Verification, as jacobi2d's: when the problem is small (at most :data:`CHECK_LIMIT` point
updates), PE 0 reruns it sequentially and the checksums must be equal; otherwise it
checks the maximum principle (the checksum is finite and no larger than the initial sum).

``--device cuda`` puts the blocks on the GPU as CuPy arrays (:mod:`.arrays`; each PE's
GPU: ``shoal.my_device()`` for shoal, the rank on its node for mpi4py) and sweeps them
with a CUDA kernel that gives the CPU kernel's bits (:mod:`.kernels`), so the checksum
is the same as on the CPU. ``--staging`` says how halos go between PEs: ``host`` (the
default) copies each face to host memory, sends it as a NumPy array and copies it back
to the device on the other side; ``direct`` sends the device arrays themselves (shoal:
through its channels, CUDA IPC between PEs of one node; mpi4py: to MPI, only where the
library says it is CUDA-aware). Targets sequential, shoal and mpi4py; charm4py is
refused. Without CuPy or a CUDA device the option stops the command before any job
starts, naming what is missing (exit code 2).
"""

from __future__ import annotations

import argparse
import importlib
import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Sequence

from ..blocks import BlockGrid, split
from ..report import AppReport, jacobi_report

if TYPE_CHECKING:
    from .arrays import BlockArrays

__all__ = ["TARGETS", "DEFAULT_STEPS", "HELP", "Config", "add_options", "configure", "parse_size", "layout",
           "cuda_missing", "make_report"]

HELP = "3-D Jacobi 7-point stencil with halo exchange (six neighbours)"

#: target -> (module with run(cfg) -> int, "mpi": runs under mpiexec / "local": in this process)
TARGETS: dict[str, tuple[str, str]] = {
    "shoal": ("shoal.bench.apps.jacobi3d.shoal_target", "mpi"),
    "mpi4py": ("shoal.bench.apps.jacobi3d.mpi4py_target", "mpi"),
    "charm4py": ("shoal.bench.apps.jacobi3d.charm4py_target", "local"),  # launches its own charmrun job
    "sequential": ("shoal.bench.apps.jacobi3d.sequential", "local"),
}
DEFAULT_STEPS = 100
DEFAULT_SIZE = "128"
#: above this many point updates (N * M * K * S) the report checks bounds instead of rerunning sequentially
CHECK_LIMIT = 250_000_000
AXES = "xyz"
#: --staging: how halos travel between devices
STAGING = ("host", "direct")


@dataclass(frozen=True)
class Config:
    """One run of jacobi3d: the problem and how the chosen target runs it."""

    shape: tuple[int, int, int] = (128, 128, 128)
    steps: int = DEFAULT_STEPS
    target: str = "shoal"
    pes: int = 2
    json: bool = False
    mpiexec: str | None = None
    transport: str = "mpi"  # shoal: "inproc" runs every PE in this process
    odf: int = 1  # shoal, charm4py: blocks per PE
    device: str = "cpu"  # where the blocks live: a key of .arrays.ARRAYS
    staging: str | None = None  # how halos travel between devices: "host" or "direct"; None on the CPU

    def with_pes(self, pes: int) -> "Config":
        return replace(self, pes=pes)

    @property
    def points(self) -> int:
        return math.prod(self.shape)


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("jacobi3d")
    g.add_argument("--size", default=DEFAULT_SIZE, metavar="N|NxMxK",
                   help=f"interior points: N for N x N x N, or NxMxK ({DEFAULT_SIZE})")
    g.add_argument("--odf", type=int, default=Config.odf, help=f"shoal, charm4py: blocks (chares) per PE ({Config.odf})")
    g.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the blocks live: cpu (NumPy, a Numba kernel), or cuda (CuPy arrays on each "
                        "PE's GPU, a CUDA kernel with the CPU kernel's bits; targets shoal, mpi4py, "
                        "sequential; needs CuPy and a CUDA GPU) (cpu)")
    g.add_argument("--staging", choices=STAGING, default=None,
                   help="--device cuda, shoal and mpi4py: how halos travel. host: device to host, sent as "
                        "host arrays, host to device; direct: shoal sends the device arrays through its "
                        "channels (CUDA IPC between PEs of a node), mpi4py hands them to MPI (needs a "
                        "CUDA-aware MPI, else refused) (host)")


def parse_size(text: str) -> tuple[int, int, int]:
    """``"N"`` -> (N, N, N), ``"NxMxK"`` -> (N, M, K); ValueError naming the option otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*)?", text)
    if m is None:
        raise ValueError(f"--size {text!r}: give N or NxMxK, positive integers (e.g. 128 or 64x128x256)")
    n = int(m.group(1))
    shape = (n, int(m.group(2)), int(m.group(3))) if m.group(2) is not None else (n, n, n)
    if min(shape) < 1:
        raise ValueError(f"--size {text!r}: the grid needs at least 1 x 1 x 1 interior points")
    return shape


def cuda_missing() -> str | None:
    """Why ``--device cuda`` cannot run here (CuPy or a CUDA device missing), or None."""
    try:
        cupy: Any = importlib.import_module("cupy")
    except ImportError:
        return "--device cuda needs CuPy and a CUDA GPU; CuPy is not installed (pip install cupy-cuda12x)"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - any driver error means "no usable GPU"
        return f"--device cuda needs a CUDA GPU; CuPy found none ({type(exc).__name__}: {exc})"
    if count < 1:
        return "--device cuda needs a CUDA GPU; CuPy found none"
    return None


def configure(ns: argparse.Namespace) -> Config:
    """The validated configuration; ValueError naming a bad option otherwise."""
    shape = parse_size(str(ns.size))
    if ns.steps < 1:
        raise ValueError(f"--steps {ns.steps}: need at least 1 step")
    if ns.pes < 1:
        raise ValueError(f"-n {ns.pes}: need at least 1 PE")
    if ns.odf < 1:
        raise ValueError(f"--odf {ns.odf}: need at least 1 block per PE")
    if ns.device == "cpu" and ns.staging is not None:
        raise ValueError(f"--staging {ns.staging}: only with --device cuda (halos on the CPU need no staging)")
    staging = None
    if ns.device == "cuda":
        if ns.target == "charm4py":
            raise ValueError("--target charm4py --device cuda: the Charm4py program keeps its blocks in host "
                             "memory (its channels carry NumPy arrays); use --target shoal, mpi4py or "
                             "sequential on the GPU, or charm4py without --device")
        if ns.target == "sequential" and ns.staging is not None:
            raise ValueError(f"--staging {ns.staging}: --target sequential has one block and no halos to "
                             "stage; leave --staging out")
        why = cuda_missing()
        if why is not None:
            raise ValueError(f"{why}; run without --device (the CPU) instead")
        staging = None if ns.target == "sequential" else ns.staging or "host"
    cfg = Config(shape, ns.steps, ns.target, ns.pes, ns.json, ns.mpiexec, ns.transport, ns.odf,
                 ns.device, staging)
    try:
        layout(cfg)
    except ValueError as exc:
        raise ValueError(f"--size {ns.size} with -n {cfg.pes}"
                         f"{f' --odf {cfg.odf}' if cfg.target in ('shoal', 'charm4py') else ''}: {exc}") from None
    return cfg


def layout(cfg: Config) -> tuple[BlockGrid, tuple[int, ...], tuple[int, ...]]:
    """``(blocks, per_pe, pe_grid)``: how the target cuts the grid; block ``b`` is on the
    PE of PE-grid cell ``b[d] // per_pe[d]`` (PEs in C order, as a Cartesian communicator
    without reordering numbers its ranks).

    sequential: one block. mpi4py: a ``q1 x q2 x q3`` grid of ranks (:func:`..blocks.split`).
    shoal, charm4py: the same PE grid, each PE's share cut again into ``odf = a1 x a2 x a3`` blocks."""
    if cfg.target == "sequential":
        return BlockGrid(cfg.shape, (1, 1, 1)), (1, 1, 1), (1, 1, 1)
    q = split(cfg.pes, cfg.shape)
    if cfg.target == "mpi4py":
        return BlockGrid(cfg.shape, q), (1, 1, 1), q
    a = split(cfg.odf, tuple(max(1, n // qd) for n, qd in zip(cfg.shape, q)))
    grid = tuple(qd * ad for qd, ad in zip(q, a))
    if any(g > n for g, n in zip(grid, cfg.shape)):
        raise ValueError(f"a {'x'.join(map(str, cfg.shape))} grid cannot be cut into "
                         f"{' x '.join(map(str, grid))} non-empty blocks")
    return BlockGrid(cfg.shape, grid), a, q


def shape_text(shape: Sequence[int]) -> str:
    return " x ".join(map(str, shape))


def reference(cfg: Config) -> float:
    """The sequential checksum of ``cfg``'s problem, on the CPU."""
    from .sequential import simulate

    return simulate(cfg.shape, cfg.steps)[0]


def _initial_sum(cfg: Config) -> float:
    from .kernels import exact_sum, initial_block, to_float

    return to_float(exact_sum(initial_block(cfg.shape, tuple((0, n) for n in cfg.shape))))


def make_report(cfg: Config, pes: int, elapsed: float, compute: Sequence[float], checksum: float,
                decomposition: str, extra: dict[str, Any] | None = None,
                lines: list[tuple[str, str]] | None = None,
                arrays: type[BlockArrays] | None = None) -> AppReport:
    """The report of a run: ``elapsed`` seconds over the timed steps, ``compute`` the
    seconds each PE spent in the kernel, ``checksum`` the exact-sum checksum; ``arrays``
    the :class:`.arrays.BlockArrays` class the blocks lived in (``cfg.device``'s by default),
    which names the device and the kernel. A GPU run is checked against the CPU's checksum."""
    from .arrays import arrays_for

    arrays = arrays or arrays_for(cfg.device)
    fields = {"device": arrays.name, "staging": cfg.staging, **(extra or {})}
    where = [("device", f"{arrays.name}{f' (--staging {cfg.staging})' if cfg.staging else ''}")]
    return jacobi_report("jacobi3d", cfg, tuple(cfg.shape), pes, elapsed, list(compute), checksum, decomposition,
                         lambda: reference(cfg), lambda: _initial_sum(cfg), arrays.kernels, CHECK_LIMIT, fields,
                         [*where, *(lines or [])])
