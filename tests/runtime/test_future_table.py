"""The future table's decisions, without processes: numbers, arrivals, travellers, handles."""

from __future__ import annotations

import gc

from shoal._runtime.future_table import DROP, LAST_FID, TWICE, FutureTable


class _Fut:
    """A stand-in future: the table reads only ``owner`` and ``fid``."""

    def __init__(self, owner: int = 0, fid: int = 0):
        self.owner, self.fid = owner, fid


def test_numbers_count_up_and_wrap_to_one_past_the_header_field():
    table = FutureTable()
    assert [table.register(_Fut()) for _ in range(3)] == [1, 2, 3]
    table.next_fid = LAST_FID
    assert table.register(_Fut()) == LAST_FID and table.register(_Fut()) == 1


def test_a_value_resolves_the_pending_future_once():
    table = FutureTable()
    fut = _Fut()
    fid = table.register(fut)
    assert table.arrival(fid, failed=False) is fut
    table.forget(fid)  # resolving it forgets it
    assert table.arrival(fid, failed=False) is TWICE  # a second value is an error
    assert table.arrival(fid, failed=True) is DROP  # a second error is dropped: the first wins
    assert table.arrival(12345, failed=False) is TWICE


def test_a_travelled_future_is_found_while_it_lives_and_not_after():
    table = FutureTable()
    fut = _Fut()
    fut.fid = table.register(fut)
    table.travelled(fut)
    table.forget(fut.fid)
    assert table.owned(fut.fid) is fut  # resolved, but another PE may still await it
    fid = fut.fid
    del fut
    gc.collect()
    assert table.owned(fid) is None  # dropped here: an await for it gets an error


def test_one_handle_per_other_pes_future_held_weakly():
    table = FutureTable()
    h = _Fut(owner=1, fid=7)
    assert table.handle(1, 7) is None
    table.keep_handle(h)
    assert table.handle(1, 7) is h and table.handle(0, 7) is None
    del h
    gc.collect()
    assert table.handle(1, 7) is None


def test_the_owner_is_asked_once_until_it_answers():
    table = FutureTable()
    assert table.ask(1, 7) is True
    assert table.ask(1, 7) is False and table.ask(2, 7) is True
    table.answered(1, 7)
    assert table.ask(1, 7) is True
