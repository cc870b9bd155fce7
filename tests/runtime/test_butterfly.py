"""The butterfly all-reduce's state machine, without processes: N PEs in one list,
their messages delivered by hand in an order the test picks."""

from __future__ import annotations

import random

import pytest

from shoal._runtime.butterfly import LAST, RECV, SEND, SENDRECV, Butterflies, steps_of
from shoal._runtime.reducers import reducers


class _PE:
    """Enough of a runtime for :class:`Butterflies`: its number, the job's size, a mailbox."""

    def __init__(self, pe: int, npes: int, mail: list):
        self.pe, self.npes, self.mail = pe, npes, mail
        self.results: dict = {}
        self.butterflies = Butterflies(self, self.results.__setitem__)  # type: ignore[arg-type]

    def post_value(self, dest: int, kind: int, round: int, seq: int, coll: int, value: object) -> None:
        self.mail.append((dest, round, seq, coll, value))


def _run(npes: int, values: list, seed: int) -> list:
    mail: list = []
    pes = [_PE(pe, npes, mail) for pe in range(npes)]
    key = ((7,), 0)
    order = list(range(npes))
    rng = random.Random(seed)
    rng.shuffle(order)
    for pe in order:  # each PE's elements are in, in a random order; messages arrive in another
        pes[pe].butterflies.start(key, values[pe], reducers.sum)
        while mail and rng.random() < 0.5:
            dest, round, seq, coll, value = mail.pop(rng.randrange(len(mail)))
            pes[dest].butterflies.arrive(((coll,), seq), round, value)
    while mail:
        dest, round, seq, coll, value = mail.pop(rng.randrange(len(mail)))
        pes[dest].butterflies.arrive(((coll,), seq), round, value)
    assert all(not pe.butterflies.under_way for pe in pes), "an exchange was left under way"
    return [pe.results[key] for pe in pes]


@pytest.mark.parametrize("npes", [1, 2, 3, 4, 5, 6, 7, 8, 13])
def test_every_pe_gets_the_same_bits_whatever_the_order_of_messages(npes):
    values = [0.1 * (pe + 1) + 1e-17 * pe for pe in range(npes)]
    first = _run(npes, values, seed=1)
    assert len(set(first)) == 1, f"PEs disagree: {first}"
    assert first[0] == pytest.approx(sum(values))
    for seed in range(2, 8):
        assert _run(npes, values, seed) == first, "another order of messages gave other bits"


@pytest.mark.parametrize("npes", [2, 3, 5, 8, 12])
def test_every_send_meets_a_receive_of_the_partner_in_the_same_round(npes):
    sends = {(pe, peer, rnd) for pe in range(npes) for what, peer, rnd in steps_of(pe, npes) if what in (SEND, SENDRECV)}
    recvs = {(peer, pe, rnd) for pe in range(npes) for what, peer, rnd in steps_of(pe, npes) if what in (RECV, SENDRECV)}
    assert sends == recvs
    beyond = [pe for pe in range(npes) if pe >= 1 << (npes.bit_length() - 1)]
    for pe in beyond:  # PEs past the power of two fold in first and hear the result last
        assert steps_of(pe, npes)[-1][2] == LAST
