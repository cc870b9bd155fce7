"""The shoal program of ``shoal bench scale broadcast``: a ``ret=True`` broadcast of one
float to a Group, answered by every element (``group.echo(x, ret=True).get()``), timed
over ``calls`` calls after a warm-up; prints the best of 5 repeats in µs per call."""

from __future__ import annotations

import sys
import timeit

import shoal


class Echo(shoal.Chare):
    """One per PE: returns what it is sent."""

    def echo(self, x: float) -> float:
        return x


def main(args: list) -> None:
    calls = int(args[1])
    group = shoal.Group(Echo)
    for _ in range(max(calls // 10, 100)):
        group.echo(1.0, ret=True).get()
    best = min(timeit.repeat(lambda: group.echo(1.0, ret=True).get(), number=calls, repeat=5))
    print(f"us_per_call {best / calls * 1e6:.4f}")
    sys.stdout.flush()
    shoal.exit()


shoal.start(main)
