"""Cost at scale: message counts of collective operations, and large collections.

A broadcast, a reduction or a collection's creation over P PEs must send O(P) messages
in O(log P) hops, never O(P) from one PE (DESIGN.md: no PE talks to all others). The
in-process transport is instrumented here to count every message by kind, by sender and
by causal depth (a message sent while a PE handles a message of depth d has depth d+1).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from support import TESTS
from support.jobs import run_inproc, tree_levels

import shoal
from shoal._runtime.message import KIND_MASK, Kind
from shoal._transport.inproc import InprocTransport
from shoal._runtime.partials import PENDING, Block, in_order


class Recorder:
    """Counts messages sent on the in-process transport: by kind, by sender, and the
    deepest causal chain of each kind."""

    def __init__(self) -> None:
        self.handling: dict[int, int] = {}  # PE -> depth of the message it handles now
        self.arrival: dict[int, int] = {}  # id of a queued message's segment list -> its depth
        self.reset()

    def reset(self) -> None:
        self.sent: Counter = Counter()  # kind -> messages
        self.by_sender: Counter = Counter()  # (kind, pe) -> messages
        self.depth: Counter = Counter()  # kind -> deepest

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        send, poll = InprocTransport.send, InprocTransport.poll
        recorder = self

        def counting_send(transport, dest, header, segments):  # type: ignore[no-untyped-def]
            send(transport, dest, header, segments)
            kind = Kind(header[0] & KIND_MASK)
            depth = recorder.handling.get(transport.rank, 0) + 1
            recorder.sent[kind] += 1
            recorder.by_sender[kind, transport.rank] += 1
            recorder.depth[kind] = max(recorder.depth[kind], depth)
            recorder.arrival[id(transport.hub.mailboxes[dest][-1][1])] = depth

        def depth_poll(transport, deliver):  # type: ignore[no-untyped-def]
            def tracked(header, segments):  # type: ignore[no-untyped-def]
                saved = recorder.handling.get(transport.rank, 0)
                recorder.handling[transport.rank] = recorder.arrival.pop(id(segments), 0)
                try:
                    deliver(header, segments)
                finally:
                    recorder.handling[transport.rank] = saved

            return poll(transport, tracked)

        monkeypatch.setattr(InprocTransport, "send", counting_send)
        monkeypatch.setattr(InprocTransport, "poll", depth_poll)

    def most_from_one(self, kind: Kind) -> int:
        return max((n for (k, _), n in self.by_sender.items() if k == kind), default=0)


class Element(shoal.Chare):
    def value(self, x):
        return x + self.index[0]

    def total(self, target):
        self.contribute(1, shoal.reducers.sum, target)

    async def everywhere(self):
        return await self.allreduce(1)


class Member(shoal.Chare):
    def pe(self):
        return shoal.my_pe()


@pytest.mark.parametrize("pes", [64])
def test_collective_operations_send_o_p_messages_in_o_log_p_hops(monkeypatch, pes):
    """Each operation over P PEs: at most a few messages per PE in all, at most
    fan-out + 1 of a kind from any one PE, and a causal depth of one tree height."""
    recorder = Recorder()
    recorder.install(monkeypatch)
    fanout = 4
    height = tree_levels(pes, fanout)
    assert height == math.ceil(math.log(pes * (fanout - 1) + 1, fanout)) - 1 == 3
    seen: dict[str, tuple] = {}

    def measure(name, op):  # type: ignore[no-untyped-def]
        recorder.reset()
        result = op()
        seen[name] = (dict(recorder.sent), {k: recorder.most_from_one(k) for k in recorder.sent}, dict(recorder.depth))
        return result

    def main(args):  # type: ignore[no-untyped-def]
        group = measure("group+bcast", lambda: shoal.Group(Member).pe(ret=True).get())
        assert group == list(range(pes))
        arr = shoal.Array(Element, 10 * pes)
        values = measure("array create+bcast", lambda: arr.value(1, ret=True).get())  # creation runs meanwhile
        assert values == [1 + i for i in range(10 * pes)]
        f = shoal.Future()
        assert measure("reduction", lambda: (arr.total(f), f.get())[1]) == 10 * pes
        assert measure("allreduce", lambda: arr.everywhere(ret=True).get()) == [10 * pes] * (10 * pes)

    assert run_inproc(main, pes=pes, tree_fanout=fanout, deadlock_timeout=5) == 0
    sent, most, depth = seen["group+bcast"]
    assert sent[Kind.CREATE] == sent[Kind.BROADCAST] == pes - 1  # down the tree, once to each PE
    assert sent[Kind.REDUCE] == pes - 1 and Kind.FUTURE not in sent  # values up the tree to main's PE
    assert most[Kind.BROADCAST] <= fanout and most[Kind.REDUCE] == 1
    assert depth[Kind.BROADCAST] == height
    for name in ("array create+bcast", "reduction"):
        sent, most, depth = seen[name]
        assert sent[Kind.BROADCAST] == sent[Kind.REDUCE] == pes - 1, (name, sent)
        assert sent.pop(Kind.CREATE, pes - 1) == pes - 1, (name, sent)
        assert sum(sent.values()) == 2 * (pes - 1), (name, sent)
        assert most[Kind.BROADCAST] <= fanout and most[Kind.REDUCE] == 1, (name, most)
        assert depth[Kind.BROADCAST] == height and depth[Kind.REDUCE] == 2 * height, (name, depth)
    sent, most, depth = seen["allreduce"]
    # the butterfly: log2(P) rounds of one message per PE, then the ret=True values up the tree
    assert sent[Kind.EXCHANGE] == pes * int(math.log2(pes)), sent
    assert most[Kind.EXCHANGE] == int(math.log2(pes)), most
    assert depth[Kind.EXCHANGE] == height + int(math.log2(pes)), depth  # after the broadcast, one hop a round
    assert sum(sent.values()) == 2 * (pes - 1) + pes * int(math.log2(pes)), sent


def test_a_simulated_1024_pe_job_completes(monkeypatch):
    """The same operations on 1024 in-process PEs: every count stays linear in P."""
    recorder = Recorder()
    recorder.install(monkeypatch)
    pes = 1024
    out: list = []

    def main(args):  # type: ignore[no-untyped-def]
        recorder.reset()
        arr = shoal.Array(Element, 2 * pes)
        out.append(arr.value(0, ret=True).get())
        f = shoal.Future()
        arr.total(f)
        out.append(f.get())
        out.append((dict(recorder.sent), max(recorder.by_sender.values()), max(recorder.depth.values())))

    assert run_inproc(main, pes=pes, deadlock_timeout=10) == 0
    assert out[:2] == [list(range(2 * pes)), 2 * pes]
    sent, most, deepest = out[2]
    assert sent == {Kind.CREATE: pes - 1, Kind.BROADCAST: 2 * (pes - 1), Kind.REDUCE: 2 * (pes - 1)}, sent
    assert most == 2 * 4  # two broadcasts of fan-out 4: no PE sends more of a kind
    assert deepest <= 2 * tree_levels(pes, 4)  # down the tree and back up


# -- a ret=True broadcast's values, gathered as blocks ------------------------------
def test_in_order_joins_blocks_by_their_first_element():
    blocks = [Block(4, ["e", "f"], (6,)), Block(0, ["a", "b", "c", "d"], (6,))]
    assert in_order(blocks) == (["a", "b", "c", "d", "e", "f"], True)


def test_in_order_merges_pending_values_that_came_as_pairs():
    block = Block(2, ["c", PENDING, "e"], (2, 3))  # elements (0,2), (1,0), (1,1)
    values, plain = in_order([block, ((1, 0), "d"), ((0, 0), "a"), ((0, 1), "b")])
    assert values == ["a", "b", "c", "d", "e"] and not plain
    assert block.pairs() == [((0, 2), "c"), ((1, 1), "e")]


class Mixed(shoal.Chare):
    """Elements whose calls return at once, suspend, or raise, by index."""

    async def slow(self, i):
        return ("async", i)

    def mixed(self):
        i = self.index[0] * 4 + self.index[1]
        if i % 5 == 0:
            return self.slow(i)
        return ("plain", i)

    def maybe_raise(self):
        if self.index == (2, 1):
            raise ValueError("element (2, 1) says no")
        return self.index


def _mixed_main(out):  # type: ignore[no-untyped-def]
    def main(args):  # type: ignore[no-untyped-def]
        arr = shoal.Array(Mixed, (5, 4))
        out.append(arr.mixed(ret=True).get())
        try:
            arr.maybe_raise(ret=True).get()
        except ValueError as exc:
            out.append(str(exc))
        arr.migrate((0, 1), shoal.num_pes() - 1)  # off its home: the next values come as pairs
        out.append(arr.mixed(ret=True).get())

    return main


def test_ret_broadcast_keeps_index_order_with_suspended_and_failing_elements():
    """Coroutines and errors leave the compiled path's block for pairs; the result is
    still in index order, before and after an element moved."""
    out: list = []
    assert run_inproc(_mixed_main(out), pes=2) == 0
    expect = [("async" if i % 5 == 0 else "plain", i) for i in range(20)]
    assert out[0] == expect and out[2] == expect
    assert "element (2, 1) says no" in out[1]


def test_ret_broadcast_on_the_compiled_path_under_mpi(mpi_job):
    """The same under MPI, where the compiled core gathers each PE's values as a block."""
    job = mpi_job(
        f"""
        import sys
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(TESTS)!r}]  # the test and support
        import shoal
        from test_scale import _mixed_main

        out = []

        def main(args):
            _mixed_main(out)(args)
            expect = [("async" if i % 5 == 0 else "plain", i) for i in range(20)]
            assert out[0] == expect and out[2] == expect, out
            assert "element (2, 1) says no" in out[1], out
            print("OK", len(out[0]))

        shoal.start(main)
        """
    )
    assert job.returncode == 0 and "OK 20" in job.stdout, job


@pytest.mark.mpi
def test_bench_scale_broadcast_reports_both_systems_and_their_ratio(capsys):
    from shoal.bench.scale.cli import main

    assert main(["broadcast", "--trials", "3", "--calls", "200"]) == 0
    out = capsys.readouterr().out
    assert "8-byte ret=True broadcast on 2 PEs, 3 interleaved trials (best of 5 repeats of 200 calls each):" in out
    for line in ("shoal ret=True broadcast", "mpi4py Bcast + Gather", "shoal / mpi4py:"):
        assert line in out, out


@pytest.mark.mpi
def test_bench_scale_startup_reports_shoal_against_both_baselines(capsys):
    from shoal.bench.scale.cli import main

    assert main(["startup", "--trials", "3"]) == 0
    out = capsys.readouterr().out
    assert "start-up on 2 PEs, 3 interleaved trials" in out, out
    for line in ("shoal run / mpiexec + mpi4py: ", "shoal run / mpiexec + numpy + mpi4py: ", "  mpiexec + shoal PEs  "):
        assert line in out, out


@pytest.mark.mpi
def test_bench_scale_startup_starts_the_program_given(tmp_path, capsys):
    """--program: the job timed is that program (one that fails makes the command fail, saying why)."""
    from shoal.bench.scale.cli import main

    prog = tmp_path / "mine.py"
    prog.write_text("import shoal\n\ndef main(args):\n    raise RuntimeError('the program given ran')\n\nshoal.start(main)\n")
    assert main(["startup", "--trials", "3", "--program", str(prog)]) != 0
    assert "the program given ran" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["startup", "--program", str(tmp_path / "missing.py")])
    assert info.value.code == 2 and "no such file" in capsys.readouterr().err


def test_bench_scale_refuses_bad_options(capsys):
    from shoal.bench.scale.cli import main

    with pytest.raises(SystemExit) as info:
        main(["broadcast", "--calls", "0"])
    assert info.value.code == 2 and "--calls >= 1" in capsys.readouterr().err
