"""Which PEs share a node: ``shoal.topology()``, answered from MPI's shared-memory split
(``MPI_Comm_split_type``), not from host names, so it is what MPI itself sees."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Sequence

from .context import current

__all__ = ["Topology", "topology"]


class Topology:
    """The job's nodes and their PEs. Nodes are numbered 0, 1, … in the order of their
    first PEs; each PE holds one small int per PE (no PE holds more)."""

    __slots__ = ("_nodes", "_npes", "my_node")

    def __init__(self, nodes: Sequence[int] | None, npes: int, me: int):
        self._nodes, self._npes = nodes, npes
        #: the node of the PE this code runs on
        self.my_node = self.node_of(me)

    @property
    def num_nodes(self) -> int:
        """How many nodes the job's PEs are on."""
        return 1 if self._nodes is None else max(self._nodes) + 1

    def node_of(self, pe: int) -> int:
        """The node PE ``pe`` runs on."""
        if not 0 <= pe < self._npes:
            raise ValueError(f"shoal.topology().node_of({pe!r}): the job has PEs 0 to {self._npes - 1}")
        return 0 if self._nodes is None else self._nodes[pe]

    def pes_on(self, node: int) -> list[int]:
        """The PEs of node ``node``, in order."""
        if not 0 <= node < self.num_nodes:
            raise ValueError(f"shoal.topology().pes_on({node!r}): the job has nodes 0 to {self.num_nodes - 1}")
        if self._nodes is None:
            return list(range(self._npes))
        return [pe for pe, n in enumerate(self._nodes) if n == node]

    @property
    def nodes(self) -> list[list[int]]:
        """The PEs of each node, node by node."""
        return [self.pes_on(node) for node in range(self.num_nodes)]

    def __repr__(self) -> str:
        return f"Topology({self.num_nodes} nodes, {self._npes} PEs, this PE on node {self.my_node})"


def topology() -> Topology:
    """The job's nodes: how many, the PEs of each, the node of any PE."""
    rt = current("shoal.topology()")
    return Topology(rt.nodes, rt.npes, rt.pe)
