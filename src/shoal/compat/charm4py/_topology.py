"""Which PEs share a host: MPI's shared-memory split, asked once at start on every PE."""

from __future__ import annotations

from typing import Any

__all__ = ["Topology", "topo_subtrees"]


class Topology:
    """PEs grouped by host; hosts numbered in the order of their first PE."""

    def __init__(self, host_of: list[int]):
        self.host_of = host_of
        self.num_hosts = max(host_of) + 1
        self._pes: list[list[int]] = [[] for _ in range(self.num_hosts)]
        for pe, h in enumerate(host_of):
            self._pes[h].append(pe)

    @classmethod
    def of_job(cls) -> "Topology":
        """This job's topology: from MPI when the job runs on it (a collective: every PE
        calls it at start), else one host (the in-process transport)."""
        import shoal

        comm = _world()
        if comm is None:
            return cls([0] * shoal.num_pes())
        from mpi4py import MPI

        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        first = node.allreduce(comm.Get_rank(), op=MPI.MIN)  # the lowest world rank on my host
        node.Free()
        firsts = comm.allgather(first)
        order = {f: h for h, f in enumerate(sorted(set(firsts)))}
        return cls([order[f] for f in firsts])

    @staticmethod
    def collective() -> bool:
        """Whether :meth:`of_job` is a collective (MPI), to be called on every PE at start."""
        return _world() is not None

    def pes_of(self, host: int) -> list[int]:
        return list(self._pes[host])

    def tree_edges(self, pe: int, root: int, pes: Any, bfactor: int) -> tuple:
        """(parent, children) of ``pe`` in Charm++'s spanning tree of ``pes`` (default: all)
        rooted at ``root`` (:func:`topo_subtrees`); the root's parent is None."""
        members = self._members(root, pes)
        if pe not in members:
            raise ValueError(f"getTopoTreeEdges: PE {pe} is not one of the PEs of the tree {members}")
        parent = None
        while members[0] != pe:
            for sub in self._split(members, bfactor):
                if pe in sub:
                    parent, members = members[0], sub
                    break
        return parent, [sub[0] for sub in self._split(members, bfactor)]

    def subtrees(self, root: int, pes: Any, bfactor: int) -> list:
        """The PEs under each child of ``root`` in that tree, one list per child (its root first)."""
        return self._split(self._members(root, pes), bfactor)

    def _members(self, root: int, pes: Any) -> list:
        """The tree's PEs, its root first (Charm4py asks for ``pes`` with the root first; the
        others keep their order)."""
        others = range(len(self.host_of)) if pes is None else pes
        return [root] + [p for p in others if p != root]

    def _split(self, members: list, bfactor: int) -> list:
        if not isinstance(bfactor, int) or bfactor < 1:
            raise ValueError(f"the branching factor of a topology tree must be an int of at least 1, not {bfactor!r}")
        return topo_subtrees(members, [self.host_of[p] for p in members], bfactor)


def topo_subtrees(members: list, hosts: list, bfactor: int) -> list:
    """The subtrees under ``members[0]`` in Charm++'s spanning tree of ``members`` (its
    ``ST_RecursivePartition``, where every PE is a process of its own, as Charm4py's are);
    ``hosts[i]`` is the host of ``members[i]``. Each subtree is a list of PEs, its root first;
    the tree below a subtree's root is that subtree split again.

    At most ``b = min(bfactor, len(members) - 1)`` subtrees hold the other PEs of the root's
    host, in order: ``b`` runs of ``k // b`` PEs (``k`` of them), the last run taking the
    rest (4 PEs on one host, root 0, ``bfactor=2``: ``[[1], [2, 3]]``). The other hosts,
    each whole and in order of first appearance, are cut into at most ``b`` more subtrees
    by recursive halving: ``parts`` parts of ``n`` hosts are ``parts // 2`` parts of the
    first ``n // 2`` hosts and the rest of the rest (thirds, when ``parts`` is a multiple
    of 3: ``n // 3``, ``n // 3`` and the rest, ``parts // 3`` parts each)."""
    if len(members) < 2:
        return []
    branches = min(bfactor, len(members) - 1)
    groups: dict[Any, list] = {}
    for pe, host in zip(members, hosts):
        groups.setdefault(host, []).append(pe)
    first, *others = groups.values()
    out = []
    local = first[1:]  # the root's host, without the root
    if local:
        parts = min(branches, len(local))
        size = len(local) // parts
        out += [local[i * size:(i + 1) * size] for i in range(parts - 1)] + [local[(parts - 1) * size:]]
    for part in _partition(others, branches):
        out.append([pe for group in part for pe in group])
    return out


def _partition(groups: list, parts: int) -> list:
    """``groups`` cut into at most ``parts`` runs, by recursive halving (or thirds)."""
    if not groups:
        return []
    if parts <= 1 or len(groups) == 1:
        return [groups]
    if parts % 3 == 0:
        third = len(groups) // 3
        return (_partition(groups[:third], parts // 3) + _partition(groups[third:2 * third], parts // 3)
                + _partition(groups[2 * third:], parts // 3))
    half, left = len(groups) // 2, parts // 2
    return _partition(groups[:half], left) + _partition(groups[half:], parts - left)


def _world() -> Any:
    from ...lowlevel import under_mpi_launcher

    if not under_mpi_launcher():
        return None
    from mpi4py import MPI

    return MPI.COMM_WORLD
