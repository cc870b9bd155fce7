"""What a comparison runs: the targets named on the command line and the order of trials.

Pure decisions, no I/O: :func:`parse_targets` checks ``--targets`` against the
micro-benchmarks' own table of targets and APIs, and :func:`schedule` lays out the
rounds, each a fresh seeded shuffle of the targets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from ..micro.targets import TARGETS as MICRO_TARGETS

__all__ = ["VALID_TARGETS", "ORDER", "CompareError", "Target", "parse_targets", "schedule", "valid_target_list"]

#: target name -> the APIs it accepts (``None``: no ``--api`` flag, the suite's default),
#: read from the micro-benchmarks' own table (``shoal bench micro --target/--api``)
VALID_TARGETS: dict[str, tuple[str | None, ...]] = {
    t.name: (None, *(api for api in t.apis if api is not None)) for t in MICRO_TARGETS.values()
}
#: what the results record says about the run order
ORDER = "a fresh random order of the targets every round"


class CompareError(Exception):
    """A comparison cannot go on; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Target:
    """A system under test: ``name`` with an optional ``api`` (``shoal:channel``)."""

    name: str
    api: str | None = None

    @property
    def label(self) -> str:
        return self.name if self.api is None else f"{self.name}:{self.api}"


def valid_target_list() -> str:
    """Every valid ``--targets`` item, for help and error messages."""
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
            raise CompareError(f"unknown target {item!r}; valid targets: {valid_target_list()}")
        if target in targets:
            raise CompareError(f"target {item!r} is listed twice in --targets")
        targets.append(target)
    if len(targets) < 2:
        raise CompareError(
            f"--targets needs at least two targets to compare, got {spec!r}; "
            f"for example --targets shoal:entry,mpi4py (valid: {valid_target_list()})"
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
