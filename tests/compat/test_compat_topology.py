"""Charm++'s placement and spanning trees through the Charm4py layer (issue 41).

``charm.getTopoTreeEdges``/``getTopoSubtrees`` build Charm++'s tree (4 PEs on one host,
root 0, ``bfactor=2``: subtrees ``[[1], [2, 3]]``), and an Array without a map starts
where Charm++'s default map puts it (6 elements on 4 PEs: PEs 0 0 1 1 2 3). shoal's own
defaults (k-ary, node-aware trees; blocks that spread the remainder) are not changed.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env

from shoal._runtime.collections import block_placement
from shoal.compat.charm4py._chare import CharmBlockMap, RoundRobinMap, charm_block
from shoal.compat.charm4py._topology import Topology, topo_subtrees

# -- the trees -----------------------------------------------------------------------------------


def test_four_pes_on_one_host_give_charm_plus_plus_tree():
    t = Topology([0, 0, 0, 0])
    assert t.subtrees(0, [0, 1, 2, 3], 2) == [[1], [2, 3]]
    assert [t.tree_edges(pe, 0, None, 2) for pe in range(4)] == [(None, [1, 2]), (0, []), (0, [3]), (2, [])]
    assert t.subtrees(0, [0, 1, 2, 3], 4) == [[1], [2], [3]]  # Charm4py's default bfactor


@pytest.mark.parametrize(("members", "hosts", "bfactor", "expected"), [
    ([0, 1, 2, 3, 4, 5, 6], [0] * 7, 4, [[1], [2], [3], [4, 5, 6]]),  # runs of 6 // 4, the last takes the rest
    ([0, 1, 2, 3, 4, 5, 6, 7], [0] * 8, 2, [[1, 2, 3], [4, 5, 6, 7]]),
    ([3, 0, 1, 2], [0] * 4, 2, [[0], [1, 2]]),  # a root other than 0 first, the others in order
    ([0, 2, 4, 6], [0] * 4, 2, [[2], [4, 6]]),
    ([0, 1, 2, 3], [0, 0, 1, 1], 2, [[1], [2, 3]]),  # the other host is one subtree, its first PE the root
    ([0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 1, 1, 2, 2, 3, 3], 2, [[1], [2, 3], [4, 5, 6, 7]]),
    ([0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 1, 1, 2, 2, 3, 3], 3, [[1], [2, 3], [4, 5], [6, 7]]),  # thirds
    ([0, 1, 2, 3], [0, 1, 0, 1], 2, [[2], [1, 3]]),  # hosts dealt round-robin: the root's host first
    ([5], [0], 2, []),
])
def test_subtrees_follow_charm_plus_plus_rules(members, hosts, bfactor, expected):
    assert topo_subtrees(members, hosts, bfactor) == expected


def _layouts(n: int) -> list[list[int]]:
    return [[0] * n, [p // 2 for p in range(n)], [p // 3 for p in range(n)], [p % 3 for p in range(n)]]


def _check_spanning_tree(t: Topology, root: int, pes: list | None, bfactor: int) -> None:
    members = list(range(len(t.host_of))) if pes is None else list(pes)
    edges = {pe: t.tree_edges(pe, root, pes, bfactor) for pe in members}
    assert edges[root][0] is None
    for pe, (parent, children) in edges.items():
        for c in children:
            assert edges[c][0] == pe, (pe, c, edges)
        if pe != root:
            assert pe in edges[parent][1], (pe, parent, edges)
    reached, todo = [], [root]
    while todo:
        pe = todo.pop()
        reached.append(pe)
        todo.extend(edges[pe][1])
    assert sorted(reached) == sorted(members), edges  # each PE once: a tree that spans them all
    subtrees = t.subtrees(root, [root] + [p for p in members if p != root], bfactor)
    assert [s[0] for s in subtrees] == edges[root][1]
    assert sorted(p for s in subtrees for p in s) == sorted(p for p in members if p != root)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 12, 17, 33])
@pytest.mark.parametrize("bfactor", [1, 2, 3, 4, 5])
def test_every_tree_spans_its_pes(n, bfactor):
    for hosts in _layouts(n):
        t = Topology(hosts)
        for root in {0, n // 2, n - 1}:
            _check_spanning_tree(t, root, None, bfactor)
        evens = [p for p in range(n) if p % 2 == 0]
        _check_spanning_tree(t, evens[-1], [evens[-1]] + evens[:-1], bfactor)


def test_exploring_subtrees_finds_every_pe_once():
    """What Charm4py's tests/topo/topo_treeAPI2.py does, on 13 PEs over hosts of 3."""
    t = Topology([p // 3 for p in range(13)])
    found = {0}

    def explore(root: int, pes: list) -> None:
        for sub in t.subtrees(root, pes, 2):
            assert len(set(sub)) == len(sub) and not found & set(sub)
            found.add(sub[0])
            explore(sub[0], sub)

    explore(0, list(range(13)))
    assert found == set(range(13))


def test_a_branching_factor_below_one_is_refused():
    with pytest.raises(ValueError, match="branching factor"):
        Topology([0, 0]).subtrees(0, [0, 1], 0)


# -- the default array map -----------------------------------------------------------------------


def test_six_elements_on_four_pes_as_charm_plus_plus():
    assert [charm_block(i, 6, 4) for i in range(6)] == [0, 0, 1, 1, 2, 3]
    m = CharmBlockMap.unless_same(6, 4)
    assert m is not None and [m(i, 4) for i in range(6)] == [0, 0, 1, 1, 2, 3]
    m2 = CharmBlockMap.unless_same((2, 3), 4)  # row-major, flattened
    assert [m2(i, 4) for i in itertools.product(range(2), range(3))] == [0, 0, 1, 1, 2, 3]


@pytest.mark.parametrize("npes", range(1, 10))
def test_charm_blocks_are_contiguous_with_the_larger_first(npes):
    for n in range(0, 60):
        pes = [charm_block(i, n, npes) for i in range(n)]
        assert pes == sorted(pes) and all(0 <= p < npes for p in pes)
        sizes = [pes.count(p) for p in range(npes)]
        assert sizes == sorted(sizes, reverse=True) and max(sizes) - min(sizes) <= 1, (n, sizes)
        if n % npes == 0:  # where shoal's own blocks agree, shoal's default (and its fast paths) stays
            assert CharmBlockMap.unless_same(n, npes) is None
            assert pes == [block_placement((i,), (n,), npes) for i in range(n)]


def test_sparse_one_dimensional_arrays_are_round_robin():
    assert [RoundRobinMap()(i, 4) for i in range(6)] == [0, 1, 2, 3, 0, 1]


# -- through a program ---------------------------------------------------------------------------

PROGRAM = """
from charm4py import charm, Chare, Array


class W(Chare):
    def where(self):
        return (self.thisIndex, charm.myPe())


def main(args):
    for dims in (6, (2, 3), 8):
        print(dims, sorted(Array(W, dims).where(ret=True).get()))
    s = Array(W, ndims=1)
    for i in range(6):
        s.ckInsert(i)
    s.ckDoneInserting()
    print("sparse", sorted(s.where(ret=True).get()))
    print("subtrees", charm.getTopoSubtrees(0, list(range(charm.numPes())), bfactor=2))
    print("edges", [charm.getTopoTreeEdges(pe, 0, bfactor=2) for pe in range(charm.numPes())])
    exit()


charm.start(main)
"""

EXPECTED = [
    "6 [((0,), 0), ((1,), 0), ((2,), 1), ((3,), 1), ((4,), 2), ((5,), 3)]",
    "(2, 3) [((0, 0), 0), ((0, 1), 0), ((0, 2), 1), ((1, 0), 1), ((1, 1), 2), ((1, 2), 3)]",
    "8 [((0,), 0), ((1,), 0), ((2,), 1), ((3,), 1), ((4,), 2), ((5,), 2), ((6,), 3), ((7,), 3)]",
    "sparse [((0,), 0), ((1,), 1), ((2,), 2), ((3,), 3), ((4,), 0), ((5,), 1)]",
    "subtrees [[1], [2, 3]]",
    "edges [(None, [1, 2]), (0, []), (0, [3]), (2, [])]",
]


def test_placement_and_trees_of_a_program_on_four_pes(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = clean_env()
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "4", "--transport", "inproc", "--compat",
                           "charm4py", "prog.py"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert proc.stdout.splitlines() == EXPECTED, proc.stdout
