"""The targets a micro-benchmark can run on, and what each of them supports.

A pure table, read by option checking before any job starts: the module that runs
the target, its APIs and the tests each API has, the package it needs (and how to
install it), and the buffers it can use. Importing a target's module is left to the
job itself, so that asking ``--help`` never initializes MPI.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from .buffers import KINDS
from .catalog import POINT_TO_POINT, TESTS

__all__ = ["Target", "TARGETS", "get"]

_ALL = tuple(TESTS)
_NO_PICKLE = ("reduce_scatter", "allgatherv", "alltoallv", "gatherv", "scatterv")


@dataclass(frozen=True, slots=True)
class Target:
    """One system under test."""

    name: str
    module: str  # has run(config) -> int, run on every PE of the job
    apis: dict  # api (or None) -> the tests it supports, in catalogue order
    package: str | None  # import name that must be installed
    install: str  # how to install it
    launcher: str  # "mpi": re-run under mpiexec; "charmrun"; "native": the C program
    buffers: tuple[str, ...]

    @property
    def default_api(self) -> str | None:
        """The API used when ``--api`` is not given (the first listed)."""
        return next(iter(self.apis))

    def missing(self) -> str | None:
        """One line saying how to install this target's package, or None if it is there."""
        if self.package is None or importlib.util.find_spec(self.package) is not None:
            return None
        return f"--target {self.name} needs the {self.package} package, which is not installed: {self.install}"


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target(
            "shoal",
            "shoal.bench.micro.shoal_target",
            {"entry": _ALL, "channel": POINT_TO_POINT},
            None,
            "",
            "mpi",
            tuple(k for k in KINDS if k != "pycuda"),  # device arrays: shoal/gpu/kinds.py
        ),
        Target(
            "mpi4py",
            "shoal.bench.micro.mpi4py_target",
            {"buffer": _ALL, "pickle": tuple(t for t in _ALL if t not in _NO_PICKLE)},
            "mpi4py",
            "pip install mpi4py",
            "mpi",
            tuple(KINDS),
        ),
        Target(
            "charm4py",
            "shoal.bench.micro.charm4py_target",
            {"entry": ("latency", "bw")},
            "charm4py",
            "pip install charm4py (or pip install 'shoal[charm4py]')",
            "charmrun",
            ("numpy", "bytearray"),
        ),
        Target("c", "shoal.bench.micro.c_baseline", {None: _ALL}, None, "", "native", ("malloc",)),
    ]
}


def get(name: str) -> Target:
    """The target called ``name``; a KeyError naming the valid ones otherwise."""
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; valid targets: {', '.join(TARGETS)}") from None
