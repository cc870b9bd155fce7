"""shoal: message-driven, migratable Python objects (chares) over MPI."""

from __future__ import annotations

from . import pool
from .errors import (
    BlockingCallError,
    ChannelError,
    DeadlockError,
    NotRunningError,
    ReductionError,
    RemoteError,
    ShoalError,
)
from .pool import BrokenPool, Executor
from .runtime.attach import attach, detach
from .runtime.channels import Channel
from .runtime.chare import Chare
from .runtime.collections import Array, Group
from .runtime.context import my_pe, num_pes
from .runtime.engine import exit, mpi_comm, quiescence, run, start
from .runtime.futures import Future, gather
from .runtime.proxy import CollectionProxy, ElementProxy, SectionProxy
from .runtime.receive_sets import ReceiveSet
from .runtime.reductions import Reducer, reducers

__version__ = "0.1.0"

__all__ = [
    "start",
    "run",
    "attach",
    "detach",
    "exit",
    "my_pe",
    "num_pes",
    "Chare",
    "Group",
    "Array",
    "ElementProxy",
    "CollectionProxy",
    "SectionProxy",
    "Future",
    "gather",
    "Channel",
    "ReceiveSet",
    "reducers",
    "Reducer",
    "quiescence",
    "mpi_comm",
    "pool",
    "Executor",
    "BrokenPool",
    "ShoalError",
    "NotRunningError",
    "BlockingCallError",
    "DeadlockError",
    "RemoteError",
    "ReductionError",
    "ChannelError",
    "__version__",
]
