"""Order across moves: channel messages taken by number, and messages for an element
that is already here, waiting to land, held rather than sent round a stale pointer.

Both were found by the soak (tests/bench/test_soak.py) on 3 PEs: a channel message sent after
its sender moved overtook one still on its way from the PE it left, and a call that
reached a PE holding the MIGRATE of its element (which waited for the balancing plan
that moved it) went on along the pointer its last stay there had left, round a loop of
PEs and back, behind the same sender's later calls.
"""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from support.commands import soak, soak_ok

from shoal._runtime.channels import SEQ_MASK, Channel
from shoal._runtime.location import Locations, Route


def _channel() -> Any:
    ch: Any = Channel.__new__(Channel)
    ch.chare, ch.remote, ch.tag = None, None, 1
    ch.waiting, ch.into, ch.landed, ch.inbox, ch.ahead, ch.arrived = None, None, False, deque(), None, 0
    return ch


def test_channel_messages_are_taken_in_send_order_whatever_order_they_come_in():
    ch = _channel()
    for seq in (2, 0, 3, 1):
        ch.arrive(seq, 0, [f"m{seq}"])
    assert [segments[0] for _, segments in ch.inbox] == ["m0", "m1", "m2", "m3"]
    assert ch.arrived == 4 and ch.ahead is None  # None again: the compiled fast path may take the next one


def test_a_channel_message_ahead_of_a_gap_waits_for_it():
    ch = _channel()
    ch.arrive(1, 0, ["m1"])
    assert not ch.inbox and ch.ahead == {1: (0, ["m1"])} and ch.arrived == 0
    ch.arrive(0, 0, ["m0"])
    assert [s[0] for _, s in ch.inbox] == ["m0", "m1"] and ch.ahead is None


def test_channel_numbers_wrap_around():
    ch = _channel()
    ch.arrived = SEQ_MASK
    ch.arrive(0, 0, ["after"])
    ch.arrive(SEQ_MASK, 0, ["before"])
    assert [s[0] for _, s in ch.inbox] == ["before", "after"] and ch.arrived == 1


def _info() -> Any:
    return SimpleNamespace(id=7, home=lambda index, npes: 0)


def test_a_parked_element_holds_its_messages_despite_a_stale_pointer():
    locations = Locations(pe=2, npes=3)
    info = _info()
    locations.depart(info, (5,), 0, 1)  # an earlier stay here left a pointer to PE 0
    assert locations.route_missing(info, (5,), True) == (Route.FORWARD, 0)
    locations.expect(info, (5,))  # on its way here, still away: it may wait for a FENCE that comes this way
    assert locations.route_missing(info, (5,), True) == (Route.FORWARD, 0)
    locations.expect(info, (5,), parked=True)  # here, waiting for the plan that moved it
    assert locations.route_missing(info, (5,), True) == (Route.HOLD, -1)
    locations.arrive(info, (5,), 2)
    assert not locations.parked and not locations.incoming and not locations.pointers


@pytest.mark.mpi
@pytest.mark.parametrize("native", ["1", "0"])
def test_calls_and_channels_keep_their_order_on_three_pes(native):
    """Seed 602 (strategy comm) broke per-sender order within seconds on both paths
    before the fixes (a call round a stale pointer, a channel message overtaken)."""
    soak_ok(soak("--seed", "602", "--jobs", "1", "--job-seconds", "8", "--native", native, "--pes", "3"), 602)
