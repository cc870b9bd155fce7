"""Threaded entry methods, conditional calls, program timers and until="exit" jobs
(on the in-process transport; the Charm4py suite runs them under mpiexec)."""

from __future__ import annotations

import time

import pytest

import shoal


class Worker(shoal.Chare):
    def __init__(self) -> None:
        self.ready = False
        self.log: list = []

    def value(self) -> int:
        return 10 * self.index[0]

    @shoal.threaded
    def total(self, others: shoal.CollectionProxy) -> int:
        return sum(others[i].value(ret=True).get() for i in range(4))

    @shoal.threaded
    def fails(self, others: shoal.CollectionProxy) -> None:
        others[0].value(ret=True).get()
        raise ValueError("after blocking")

    def plain_get(self, others: shoal.CollectionProxy) -> int:
        return others[0].value(ret=True).get()

    @shoal.when(lambda self, tag: self.ready)
    def held(self, tag: str) -> str:
        self.log.append(tag)
        return tag

    def open(self) -> None:
        self.ready = True

    @shoal.threaded
    def wait_open(self) -> list:
        shoal.wait_until(self, lambda el: el.ready)
        return self.log


class Slow(shoal.Chare):
    @shoal.threaded
    def __init__(self, others: shoal.CollectionProxy) -> None:
        self.first = others[0].value(ret=True).get()

    @shoal.threaded
    def first_value(self) -> int:
        shoal.wait_until(self, lambda el: hasattr(el, "first"))  # messages may come before __init__ ends
        return self.first


def run(main, **options):
    return shoal.run(main, [], transport="inproc", pes=3, **options)


def test_a_threaded_method_blocks_and_the_pe_serves_meanwhile() -> None:
    def main(args: list) -> None:
        a = shoal.Array(Worker, 4)
        assert a[1].total(a, ret=True).get() == 60
        assert a.total(a, ret=True).get() == [60] * 4
        with pytest.raises(ValueError, match="after blocking"):
            a[2].fails(a, ret=True).get()
        s = shoal.Array(Slow, 3, args=(a,))
        assert s.first_value(ret=True).get() == [0, 0, 0]

    assert run(main) == 0


def test_a_plain_entry_method_may_not_block() -> None:
    def main(args: list) -> None:
        a = shoal.Array(Worker, 4)
        with pytest.raises(shoal.BlockingCallError, match="shoal.threaded"):
            a[1].plain_get(a, ret=True).get()

    assert run(main) == 0


def test_held_calls_run_in_order_once_the_condition_holds() -> None:
    def main(args: list) -> None:
        a = shoal.Array(Worker, 2)
        first = a[1].held("a", ret=True)
        second = a[1].held("b", ret=True)
        again = a[1].held("b", ret=True)  # equal to the one before: each runs once
        waited = a[1].wait_open(ret=True)
        assert not first.done() and not waited.done()
        a[1].open()
        assert (first.get(), second.get(), again.get()) == ("a", "b", "b")
        assert waited.get() == ["a", "b", "b"]

    assert run(main) == 0


def test_quiescence_waits_for_program_timers() -> None:
    fired: list = []

    def main(args: list) -> None:
        started = time.monotonic()
        shoal.call_later(0.3, lambda: fired.append(time.monotonic() - started))
        shoal.quiescence().get()
        assert fired and fired[0] >= 0.3

    assert run(main) == 0


class Relay(shoal.Chare):
    def go(self, n: int, code: int) -> None:
        if n == 0:
            if code:
                shoal.exit(code)
            return
        self.collection[(self.index[0] + 1) % 3].go(n - 1, code)


def test_until_exit_runs_past_main_and_ends_at_exit() -> None:
    def main(args: list) -> None:
        shoal.Array(Relay, 3)[0].go(20, 7)

    assert run(main, until="exit") == 7


def test_until_exit_without_exit_ends_with_a_deadlock_report() -> None:
    def main(args: list) -> None:
        shoal.Array(Relay, 3)[0].go(20, 0)

    with pytest.raises(shoal.DeadlockError, match="ends only when a PE calls exit"):
        run(main, until="exit", deadlock_timeout=0.2)
