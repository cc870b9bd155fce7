"""A held (``@shoal.when``) threaded call that a thread's resumption lets run, and that
then blocks: it must block as a thread (the PE serves meanwhile), never run the main
program's loop inside the greenlet (Charm4py's test1_when deadlocked at 4 PEs so)."""

from __future__ import annotations

import shoal


class Source(shoal.Chare):
    def value(self) -> int:
        return 100 + self.index


class Turns(shoal.Chare):
    def __init__(self, source: shoal.CollectionProxy) -> None:
        self.turn = 0
        self.source = source

    @shoal.when(lambda self, t: self.turn == t)
    @shoal.threaded
    def take(self, t: int) -> int:
        # blocks; its resumption ends the call, whose recheck starts the next held turn,
        # which blocks in turn
        v = self.source[(self.index[0] + 1) % shoal.num_pes()].value(ret=True).get()
        self.turn += 1
        return v * 10 + t

    def plain_turn(self, t: int) -> int:
        return t


def test_a_held_threaded_call_started_by_a_resumption_blocks_as_a_thread() -> None:
    got: list = []

    def main(args: list) -> None:
        source = shoal.Group(Source)
        turns = shoal.Array(Turns, 3, args=(source,))
        futures = []
        for i in range(3):
            futures.extend(turns[i].take(t, ret=True) for t in reversed(range(6)))
        got.extend(f.get() for f in futures)

    assert shoal.run(main, [], transport="inproc", pes=3) == 0
    want = []
    for i in range(3):
        want.extend((100 + (i + 1) % 3) * 10 + t for t in reversed(range(6)))
    assert got == want
