"""PEs on several nodes, simulated with MPICH's ``MPIR_CVAR_NUM_CLIQUES``: one machine
seen by MPI as N nodes (the shared-memory split follows it, and messages between cliques
go through the network module), so traffic between nodes is tested here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import pytest
from support import PROGRAMS, SRC

pytestmark = pytest.mark.mpi

FEATURES = PROGRAMS / "features.py"


def _mpich() -> bool:
    from mpi4py import MPI

    return "MPICH" in MPI.Get_library_version()


needs_mpich = pytest.mark.skipif(not _mpich(), reason="MPIR_CVAR_NUM_CLIQUES (simulated nodes) is MPICH's")
TWO_NODES = {"MPIR_CVAR_NUM_CLIQUES": "2"}
#: one node even where the whole run sees two (make test-nodes): the one-node cases
ONE_NODE = {"MPIR_CVAR_NUM_CLIQUES": "1"}


@needs_mpich
@pytest.mark.parametrize("native", ["1", "0"])
def test_every_feature_works_with_the_pes_on_two_nodes(mpi_job: Callable[..., Any], native: str) -> None:
    """The program that hung at a different step each run (a stream of calls, a reduction
    of arrays) before frames were received by matched probe across nodes."""
    job = mpi_job(FEATURES.read_text(), n=2, env={**TWO_NODES, "SHOAL_NATIVE": native}, timeout=120)
    assert job.returncode == 0 and "ALL OK" in job.stdout, job


@needs_mpich
def test_three_pes_on_two_nodes_mix_shared_memory_and_network(mpi_job: Callable[..., Any]) -> None:
    job = mpi_job(FEATURES.read_text(), n=3, env=TWO_NODES, timeout=120)
    assert job.returncode == 0 and "ALL OK" in job.stdout, job


_RECEIVE = """
import shoal
from shoal._runtime.context import current

class W(shoal.Chare):
    def how(self):
        t = current().transport
        return shoal.my_pe(), t.local_size, t.probe

def main(args):
    print("RECEIVE", sorted(shoal.Group(W).how(ret=True).get()))

shoal.start(main)
"""


@needs_mpich
def test_receives_are_probed_across_nodes_and_standing_within_one(mpi_job: Callable[..., Any]) -> None:
    across = mpi_job(_RECEIVE, n=2, env=TWO_NODES)
    assert across.returncode == 0, across
    assert "RECEIVE [(0, 1, True), (1, 1, True)]" in across.stdout, across
    one = mpi_job(_RECEIVE, n=2, env=ONE_NODE)
    assert one.returncode == 0, one
    assert "RECEIVE [(0, 2, False), (1, 2, False)]" in one.stdout, one
    forced = mpi_job(_RECEIVE, n=2, env={**ONE_NODE, "SHOAL_RECEIVE": "probe"})
    assert "RECEIVE [(0, 2, True), (1, 2, True)]" in forced.stdout, forced


@pytest.mark.parametrize("receive", ["probe", "standing"])
def test_every_feature_works_with_either_way_of_receiving(mpi_job: Callable[..., Any], receive: str) -> None:
    job = mpi_job(FEATURES.read_text(), n=2, env={**ONE_NODE, "SHOAL_RECEIVE": receive}, timeout=120)
    assert job.returncode == 0 and "ALL OK" in job.stdout, job


_CROSSINGS = """
import shoal
from mpi4py import MPI
from shoal._runtime.context import current
from shoal._runtime.message import KIND_MASK, Kind

crossed = {"broadcast": 0, "reduce": 0}


def count_crossings():
    # wrap this PE's transport send: count the broadcasts and reductions sent off the node
    transport, top = current().transport, shoal.topology()
    send = transport.send

    def counting(dest, header, segments):
        if top.node_of(dest) != top.my_node:
            kind = header[0] & KIND_MASK
            if kind == Kind.BROADCAST:
                crossed["broadcast"] += 1
            elif kind == Kind.REDUCE:
                crossed["reduce"] += 1
        return send(dest, header, segments)

    transport.send = counting


class W(shoal.Chare):
    def __init__(self):
        count_crossings()

    def where(self):
        split = shoal.mpi_comm().Split_type(MPI.COMM_TYPE_SHARED)  # what MPI says, asked anew
        first = split.bcast(shoal.my_pe())
        split.Free()
        top = shoal.topology()
        return shoal.my_pe(), top.my_node, top.pes_on(top.my_node)[0] == first

    def touch(self):
        return shoal.my_pe()

    def counts(self):
        return dict(crossed)


def main(args):
    g = shoal.Group(W)
    top = shoal.topology()
    print("NODES", top.num_nodes, top.nodes)
    print("WHERE", g.where(ret=True).get())
    before = g.counts(ret=True).get()
    for _ in range(10):
        assert sorted(g.touch(ret=True).get()) == list(range(shoal.num_pes()))
    after = g.counts(ret=True).get()
    for kind in ("broadcast", "reduce"):
        print("CROSSED", kind, sum(a[kind] - b[kind] for a, b in zip(after, before)))

shoal.start(main)
"""


@needs_mpich
def test_broadcasts_and_replies_cross_between_nodes_once_per_node(mpi_job: Callable[..., Any]) -> None:
    """10 ret=True broadcasts over 4 PEs on 2 nodes: each goes down the tree and its
    replies come up it, so each crosses between the nodes once each way (a flat tree from
    PE 0 with fan-out 4 would cross twice). Counted on the Python path, where every
    message passes through the transport's send."""
    job = mpi_job(_CROSSINGS, n=4, env={**TWO_NODES, "SHOAL_NATIVE": "0"}, timeout=120)
    assert job.returncode == 0, job
    nodes = eval(job.stdout.split("NODES 2 ", 1)[1].splitlines()[0])
    assert sorted(pe for node in nodes for pe in node) == [0, 1, 2, 3] and len(nodes) == 2, job
    where = eval(job.stdout.split("WHERE ", 1)[1].splitlines()[0])
    assert all(agrees for _, _, agrees in where), where  # the topology is MPI's split
    assert {pe: node for pe, node, _ in where} == {pe: n for n, node in enumerate(nodes) for pe in node}
    # 11: the ten, the second `counts` broadcast (counted as it leaves PE 0, before the
    # counters are read) and the first one's replies (counted after it read them)
    assert "CROSSED broadcast 11" in job.stdout, job
    assert "CROSSED reduce 11" in job.stdout, job


def test_one_node_has_one_topology_node(mpi_job: Callable[..., Any]) -> None:
    job = mpi_job(_CROSSINGS, n=2, env={**ONE_NODE, "SHOAL_NATIVE": "0"}, timeout=120)
    assert job.returncode == 0 and "NODES 1 [[0, 1]]" in job.stdout, job
    assert "CROSSED broadcast 0" in job.stdout, job


_PLACEMENT = """
import shoal

class Cell(shoal.Chare):
    def where(self):
        return self.index[0], shoal.topology().my_node

def main(args):
    where = shoal.Array(Cell, 8).where(ret=True).get()
    print("NODES", [node for _, node in sorted(where)])
    print("TOPOLOGY", shoal.topology().nodes)

shoal.start(main)
"""


@needs_mpich
def test_a_block_map_keeps_its_neighbours_on_one_node(mpi_job: Callable[..., Any]) -> None:
    """MPICH deals ranks to cliques round-robin (PEs 0, 2 on one node, 1, 3 on the other):
    the default placement gives blocks to PEs node by node, so 8 elements on 4 PEs cross
    between nodes once, between elements 3 and 4, not at every block."""
    job = mpi_job(_PLACEMENT, n=4, env=TWO_NODES)
    assert job.returncode == 0, job
    assert "TOPOLOGY [[0, 2], [1, 3]]" in job.stdout, job  # the layout this test is about
    assert "NODES [0, 0, 0, 0, 1, 1, 1, 1]" in job.stdout, job


_ALLREDUCE = """
import numpy as np
import shoal
from shoal._runtime.context import current
from shoal._runtime.message import KIND_MASK, Kind

crossed = [0]


class W(shoal.Chare):
    def __init__(self):
        transport, top = current().transport, shoal.topology()
        send = transport.send

        def counting(dest, header, segments):
            if top.node_of(dest) != top.my_node and header[0] & KIND_MASK in (Kind.EXCHANGE, Kind.REDUCE, Kind.RESULT):
                crossed[0] += 1
            return send(dest, header, segments)

        transport.send = counting

    async def run(self, rounds):
        before = crossed[0]
        total = 0
        for k in range(rounds):
            total += await self.allreduce(np.full(4, shoal.my_pe() + k), shoal.reducers.sum)
        return total.tolist(), crossed[0] - before


def main(args):
    n = shoal.num_pes()
    out = shoal.Group(W).run(10, ret=True).get()
    want = [float(sum(n * (n - 1) // 2 + n * k for k in range(10)))] * 4
    assert all(t == want for t, _ in out), out
    print("CROSSED", sum(c for _, c in out))

shoal.start(main)
"""


@needs_mpich
def test_an_all_reduce_across_nodes_crosses_once_per_node_each_way(mpi_job: Callable[..., Any]) -> None:
    """10 all-reduces of arrays on 4 PEs on 2 nodes: up the node-aware tree and down again,
    one message between the nodes each way (20), where the butterfly sends one from every
    PE in its cross-node round (40)."""
    job = mpi_job(_ALLREDUCE, n=4, env={**TWO_NODES, "SHOAL_NATIVE": "0"}, timeout=120)
    assert job.returncode == 0, job
    assert "CROSSED 20" in job.stdout, job
    compiled = mpi_job(_ALLREDUCE, n=4, env=TWO_NODES, timeout=120)  # the sums, on the compiled path
    assert compiled.returncode == 0 and "CROSSED" in compiled.stdout, compiled


def test_a_node_that_cannot_build_the_compiled_path_says_so_and_runs(mpi_job: Callable[..., Any],
                                                                    tmp_path: Path) -> None:
    """shoal's sources without the install's build, a compiler that fails and an empty
    cache: the PEs cannot have the compiled path. The job still runs (the Python path
    gives the same results) and one line per node names the PE, the host and why."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(SRC, site / "shoal",
                    ignore=shutil.ignore_patterns("*.so", "_native_build.py", "__pycache__"))
    broken = tmp_path / "mpicc"
    broken.write_text("#!/bin/sh\necho 'mpicc: no compiler on this node' >&2\nexit 1\n")
    broken.chmod(0o755)
    env = {"PYTHONPATH": str(site), "MPICC": str(broken), "SHOAL_CACHE_DIR": str(tmp_path / "cache")}
    job = mpi_job(FEATURES.read_text(), n=2, env=env, timeout=180)
    assert job.returncode == 0 and "ALL OK" in job.stdout, job
    lines = [ln for ln in job.stderr.splitlines() if "compiled per-message path is unavailable" in ln]
    nodes = 2 if os.environ.get("MPIR_CVAR_NUM_CLIQUES") == "2" else 1  # make test-nodes runs this too
    lines.sort()  # one line per node, each from its first PE, in whatever order they came
    assert len(lines) == nodes and lines[0].startswith("shoal: PE 0 (host "), job.stderr
    assert nodes == 1 or lines[1].startswith("shoal: PE 1 (host "), job.stderr
    assert all("no compiler on this node" in line or "failed" in line for line in lines), lines
