"""Spanning trees over PEs, for broadcasts and reductions: pure arithmetic, no I/O.

A tree is defined by its members in order (``members[0]`` is the root) and a
fan-out; member at position ``q`` has children ``q*k+1 … q*k+k``. Every PE derives
its parent and children alone, so no PE stores more than its own links.

Across nodes (``nodes``: the node of each PE) the tree has two levels, so that a
broadcast or a reduction crosses between two nodes once per node, not once per PE:
one tree over a *leader* per node (the root on its own node, elsewhere the node's first
member), then within each node a tree from its leader over the node's other members.
A leader has up to ``fanout`` children of each level.
"""

from __future__ import annotations

from bisect import bisect_left

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Sequence

__all__ = ["Tree", "all_pes", "over"]


class Tree:
    """One PE's view of a spanning tree: its parent and children."""

    __slots__ = ("root", "parent", "children", "size")

    def __init__(self, root: int, parent: int, children: tuple, size: int):
        self.root = root
        self.parent = parent  # -1 at the root
        self.children = children
        self.size = size

    def __repr__(self) -> str:
        return f"Tree(root={self.root}, parent={self.parent}, children={self.children}, size={self.size})"


def _links(pos: int, n: int, fanout: int) -> tuple[int, list[int]]:
    parent = (pos - 1) // fanout if pos else -1
    first = pos * fanout + 1
    return parent, list(range(first, min(first + fanout, n)))


def all_pes(npes: int, root: int, me: int, fanout: int, nodes: Sequence[int] | None = None) -> Tree:
    """The tree over every PE, rooted at ``root``; two levels where ``nodes`` (the node of
    each PE) spans more than one node."""
    if nodes is not None:
        return _two_level(range(npes), root, me, fanout, nodes)
    pos = (me - root) % npes
    parent, kids = _links(pos, npes, fanout)
    return Tree(
        root,
        (parent + root) % npes if parent >= 0 else -1,
        tuple((k + root) % npes for k in kids),
        npes,
    )


def over(members: Sequence[int], me: int, fanout: int, nodes: Sequence[int] | None = None) -> Tree | None:
    """The tree over the sorted PE list ``members`` (root: the first); None if ``me`` is
    not in it. Two levels where ``nodes`` (the node of each PE) spans more than one node."""
    pos = bisect_left(members, me)
    if pos == len(members) or members[pos] != me:
        return None
    if nodes is not None:
        return _two_level(members, members[0], me, fanout, nodes)
    parent, kids = _links(pos, len(members), fanout)
    return Tree(members[0], members[parent] if parent >= 0 else -1, tuple(members[k] for k in kids), len(members))


def _two_level(members: Sequence[int], root: int, me: int, fanout: int, nodes: Sequence[int]) -> Tree:
    """``me``'s links in the tree over ``members`` (sorted PEs, ``me`` and ``root`` among
    them) with a level over nodes and one within each (see the module's docstring)."""
    mine, home = nodes[me], nodes[root]
    local: list[int] = []  # my node's members, its leader first
    firsts: dict[int, int] = {}  # node -> its first member
    for pe in members:
        node = nodes[pe]
        if node not in firsts:
            firsts[node] = pe
        if node == mine:
            local.append(pe)
    if mine == home:  # the root leads its node: the members after it, then those before
        at = local.index(root)
        local = local[at:] + local[:at]
    # the leaders, the root's node first and the rest in node order after it
    order = sorted(firsts, key=lambda node: (node - home) % (max(firsts) + 1))
    leaders = [root if node == home else firsts[node] for node in order]
    pos = local.index(me)
    parent, kids = _links(pos, len(local), fanout)
    children = [local[k] for k in kids]
    up = local[parent] if parent >= 0 else -1
    if pos == 0:  # a leader: its links between nodes too
        lparent, lkids = _links(order.index(mine), len(leaders), fanout)
        up = leaders[lparent] if lparent >= 0 else -1
        children = [leaders[k] for k in lkids] + children
    return Tree(root, up, tuple(children), len(members))
