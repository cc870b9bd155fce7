"""Which PEs share a host: MPI's shared-memory split, asked once at start on every PE."""

from __future__ import annotations

from typing import Any

__all__ = ["Topology"]


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
        """(parent, children) of ``pe`` in a spanning tree of ``pes`` (default: all) rooted at
        ``root``: hosts form a ``bfactor``-ary tree of their first PEs, each host's PEs a
        ``bfactor``-ary tree under it, so that most edges stay inside a host."""
        members = list(range(len(self.host_of))) if pes is None else list(pes)
        parent_of, children_of = self._tree(root, members, bfactor)
        return parent_of.get(pe, -1), children_of.get(pe, [])

    def subtrees(self, root: int, pes: list, bfactor: int) -> list:
        """The PEs under each child of ``root`` in that tree, one list per child."""
        _, children_of = self._tree(root, list(pes), bfactor)

        def below(p: int) -> list:
            out = [p]
            for c in children_of.get(p, []):
                out.extend(below(c))
            return out

        return [below(c) for c in children_of.get(root, [])]

    def _tree(self, root: int, members: list, bfactor: int) -> tuple[dict, dict]:
        by_host: dict[int, list[int]] = {}
        for p in [root] + [m for m in members if m != root]:
            by_host.setdefault(self.host_of[p], []).append(p)
        parent_of: dict[int, int] = {root: -1}
        children_of: dict[int, list[int]] = {}

        def kary(nodes: list) -> None:
            for i in range(1, len(nodes)):
                parent = nodes[(i - 1) // bfactor]
                parent_of[nodes[i]] = parent
                children_of.setdefault(parent, []).append(nodes[i])

        kary([group[0] for group in by_host.values()])
        for group in by_host.values():
            kary(group)
        return parent_of, children_of


def _world() -> Any:
    from ..._runtime.engine import under_mpi_launcher

    if not under_mpi_launcher():
        return None
    from mpi4py import MPI

    return MPI.COMM_WORLD
