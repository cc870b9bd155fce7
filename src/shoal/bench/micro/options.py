"""Options of ``shoal bench micro``: one validated table, turned into a :class:`Config`.

Every check that can fail does so here, before a job starts, with a message that
names the bad value and the valid ones: an unknown test, target, API or buffer, a
test the target does not have, a PE count the test cannot use, a bad size range.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from . import buffers, catalog, osu, targets
from .catalog import Test

__all__ = ["Config", "UsageError", "parse", "build_parser"]

QUICK_SIZES = (1, 65536)  # every 4th power of two: 1, 16, 256, 4096, 65536
QUICK_COUNTS = (10, 2, 3, 1)  # iterations, warm-up, large iterations, large warm-up
QUICK_WINDOW = 4


class UsageError(Exception):
    """A bad command line; the message names the value and the valid choices."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (listing the valid options) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        options = sorted({o for a in self._actions for o in a.option_strings if a.help != argparse.SUPPRESS})
        raise UsageError(f"{message}\nvalid options: {', '.join(options)}")


def build_parser() -> argparse.ArgumentParser:
    """The option table (also what ``--help`` prints)."""
    p = _Parser(
        prog="shoal bench micro",
        description="OSU-style micro-benchmarks of shoal, mpi4py, charm4py and a C baseline.",
        epilog="tests: " + ", ".join(catalog.TESTS) + "; 'all' runs every test the target has "
        "for the PE count; a comma-separated list runs several in one job.",
    )
    p.add_argument("tests", metavar="TEST", help="a test, a comma-separated list, or 'all'")
    p.add_argument("-n", "--pes", type=int, default=2, help="number of PEs (default 2)")
    p.add_argument("--target", default="shoal", help="shoal (default), mpi4py, charm4py or c")
    p.add_argument("--api", default=None, help="shoal/charm4py: entry (default) or channel; mpi4py: buffer (default) or pickle")
    p.add_argument("--pickle", action="store_true", help="mpi4py: the lower-case, pickle-based methods (= --api pickle)")
    p.add_argument("--buffer", default=None, help="bytearray, numpy (default), cupy, numba, pycuda or torch")
    p.add_argument("--device", default=None, help="cpu (default) or cuda")
    p.add_argument("--gpu-path", default="auto", choices=("auto", "aware", "staged", "ipc"),
                   help="GPU buffers: CUDA-aware MPI (aware; shoal's mpi path), staging through host memory "
                        "(staged), or, for --target shoal, CUDA IPC (ipc); for shoal it sets SHOAL_GPU_PATH "
                        "(default: the best the job can take)")
    p.add_argument("-m", "--message-size", default=None, metavar="[MIN:]MAX", help="message sizes in bytes, doubling from MIN (default 1:4194304; 1:1048576 for collectives)")
    p.add_argument("-i", "--iterations", type=int, default=None, help="timed iterations for messages up to --large-size")
    p.add_argument("-x", "--warmup", type=int, default=None, help="untimed warm-up iterations for messages up to --large-size")
    p.add_argument("--iterations-large", type=int, default=None, help="timed iterations above --large-size (default: -i divided as OSU does)")
    p.add_argument("--warmup-large", type=int, default=None, help="warm-up iterations above --large-size (default: -x divided as OSU does)")
    p.add_argument("--large-size", type=int, default=catalog.LARGE_MESSAGE, help="large-message threshold in bytes (default 8192)")
    p.add_argument("-W", "--window", type=int, default=None, help="bw/bibw: messages in flight per iteration (default 64)")
    p.add_argument("--lend", action="store_true",
                   help="shoal bw/bibw: lend the window's buffer (shoal.lend: no send waits for its receiver), "
                        "as OSU's window of MPI_Isend does, instead of sending it by value")
    p.add_argument("--validate", action="store_true", help="check every received buffer; failures exit non-zero")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per test on stdout instead of the OSU table")
    out.add_argument("--csv", action="store_true", help="CSV rows on stdout instead of the OSU table")
    p.add_argument("--quick", action="store_true", help="tiny sizes and iteration counts (for tests)")
    p.add_argument("--mpiexec", default=None, help="launcher to use (default: $SHOAL_MPIEXEC, then PATH)")
    p.add_argument("--corrupt-for-testing", action="store_true", help=argparse.SUPPRESS)
    return p


@dataclass(frozen=True, slots=True)
class Config:
    """A validated benchmark request; the same on every PE of the job."""

    tests: tuple[str, ...]
    target: str
    api: str | None
    buffer: str
    device: str
    gpu_path: str
    pes: int
    min_size: int
    max_size: int | None  # None: each test's own default
    quick: bool
    iterations: int | None
    warmup: int | None
    iterations_large: int | None
    warmup_large: int | None
    large_size: int
    window: int
    lend: bool
    validate: bool
    fmt: str
    mpiexec: str | None
    corrupt: bool

    def sizes(self, test: Test) -> list[int]:
        """The message sizes ``test`` runs: powers of two from MIN to MAX (one row for barrier)."""
        if not test.sized:
            return [0]
        top = self.max_size if self.max_size is not None else (QUICK_SIZES[1] if self.quick else test.max_size)
        out = [0] if self.min_size == 0 and test.elem == 1 else []
        size = max(self.min_size, 1)
        while size <= top:
            if size >= test.elem:
                out.append(size)
            size *= 2
        if self.quick and self.max_size is None:
            out = out[::4]
        return out

    def counts(self, test: Test, size: int) -> tuple[int, int]:
        """(timed iterations, warm-up iterations) for ``size``-byte messages of ``test``."""
        iters, warm, iters_l, warm_l = (
            QUICK_COUNTS if self.quick else (test.iters, test.warmup, test.iters_large, test.warmup_large)
        )
        if self.iterations is not None:
            iters_l = max(1, self.iterations * iters_l // iters)
            iters = self.iterations
        if self.warmup is not None:
            warm_l = self.warmup * warm_l // max(warm, 1)
            warm = self.warmup
        if self.iterations_large is not None:
            iters_l = self.iterations_large
        if self.warmup_large is not None:
            warm_l = self.warmup_large
        return (iters_l, warm_l) if size > self.large_size else (iters, warm)

    def meta(self, test: str) -> tuple[str, str, str | None, str, int]:
        """(test, target, api, buffer, pes): what the outputs say ran."""
        return (test, self.target, self.api, self.buffer, self.pes)

    def result(self, test: str) -> osu.Result:
        """An empty result for ``test`` to fill with rows."""
        return osu.Result(*self.meta(test), catalog.TESTS[test].unit)


def _sizes(text: str | None) -> tuple[int, int | None]:
    if text is None:
        return 1, None
    lo_text, _, hi_text = text.rpartition(":")
    try:
        lo = int(lo_text) if lo_text else 1
        hi = int(hi_text)
    except ValueError:
        raise UsageError(f"-m {text!r}: give sizes in bytes as MIN:MAX or MAX, e.g. -m 1:65536") from None
    if lo < 0 or hi < lo:
        raise UsageError(f"-m {text!r}: need 0 <= MIN <= MAX")
    if lo and lo & (lo - 1):
        raise UsageError(f"-m {text!r}: MIN must be 0 or a power of two (sizes double from MIN), e.g. -m {1 << (lo.bit_length() - 1)}:{hi}")
    return lo, hi


def _positive(name: str, value: int | None, least: int = 1) -> None:
    if value is not None and value < least:
        raise UsageError(f"{name} must be at least {least}, not {value}")


def _select(names: str, target: targets.Target, api: str | None, pes: int) -> tuple[str, ...]:
    supported = target.apis[api]
    api_text = f" --api {api}" if api else ""
    if names == "all":
        picked = tuple(t for t in supported if catalog.TESTS[t].check_pes(pes) is None)
        if not picked:
            raise UsageError(f"no test of --target {target.name}{api_text} runs on {pes} PEs")
        return picked
    picked = tuple(n for n in names.split(",") if n)
    for name in picked:
        try:
            test = catalog.get(name)
        except KeyError as exc:
            raise UsageError(exc.args[0]) from None
        if name not in supported:
            raise UsageError(f"--target {target.name}{api_text} has no {name} test; it has: {', '.join(supported)}")
        why = test.check_pes(pes)
        if why:
            raise UsageError(why)
    if not picked:
        raise UsageError(f"no test named; valid tests: {', '.join(catalog.TESTS)}, all")
    return picked


def parse(argv: Sequence[str]) -> Config:
    """A :class:`Config` from the command line, or UsageError saying what is wrong."""
    ns = build_parser().parse_args(list(argv))
    try:
        target = targets.get(ns.target)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    api = ns.api
    if ns.pickle:
        if target.name != "mpi4py" or api not in (None, "pickle"):
            raise UsageError("--pickle selects mpi4py's lower-case methods; use it with --target mpi4py (and no other --api)")
        api = "pickle"
    if api is None:
        api = target.default_api
    if api not in target.apis:
        valid = ", ".join(str(a) for a in target.apis if a) or "none (leave --api out)"
        raise UsageError(f"--target {target.name} has no --api {api}; valid APIs: {valid}")
    if ns.pes < 1:
        raise UsageError(f"-n must be at least 1, not {ns.pes}")
    tests = _select(ns.tests, target, api, ns.pes)
    if target.launcher == "native":
        if ns.buffer not in (None, "malloc") or ns.device not in (None, "cpu"):
            raise UsageError("--target c uses its own malloc'd host buffers; leave out --buffer and --device")
        buffer, device = "malloc", "cpu"
    else:
        try:
            buffer, device = buffers.resolve(ns.buffer, ns.device)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if buffer not in target.buffers:
            raise UsageError(f"--target {target.name} has no --buffer {buffer}; valid buffers: {', '.join(target.buffers)}")
    if ns.gpu_path == "ipc" and target.name != "shoal":
        raise UsageError(f"--gpu-path ipc is shoal's (CUDA IPC between its PEs); --target {target.name} takes "
                         "auto, aware or staged")
    if ns.lend and (target.name != "shoal" or buffer != "numpy"):
        raise UsageError("--lend lends a NumPy window buffer to shoal's sends (shoal.lend); use it with "
                         "--target shoal and --buffer numpy")
    lo, hi = _sizes(ns.message_size)
    for name, value, least in [
        ("-i", ns.iterations, 1), ("-x", ns.warmup, 0), ("--iterations-large", ns.iterations_large, 1),
        ("--warmup-large", ns.warmup_large, 0), ("-W", ns.window, 1), ("--large-size", ns.large_size, 0),
    ]:
        _positive(name, value, least)
    window = ns.window if ns.window is not None else (QUICK_WINDOW if ns.quick else 64)
    return Config(
        tests=tests, target=target.name, api=api, buffer=buffer, device=device, gpu_path=ns.gpu_path,
        pes=ns.pes, min_size=lo, max_size=hi, quick=ns.quick, iterations=ns.iterations, warmup=ns.warmup,
        iterations_large=ns.iterations_large, warmup_large=ns.warmup_large, large_size=ns.large_size,
        window=window, lend=ns.lend, validate=ns.validate, fmt="json" if ns.json else "csv" if ns.csv else "text",
        mpiexec=ns.mpiexec, corrupt=ns.corrupt_for_testing,
    )
