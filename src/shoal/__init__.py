"""shoal: message-driven, migratable Python objects (chares) over MPI."""

from . import pool
from .errors import (
    BlockingCallError,
    ChannelError,
    CheckpointError,
    DeadlockError,
    MigrationError,
    NotRunningError,
    ReductionError,
    RemoteError,
    ShoalError,
)
from .pool import BrokenPool, Executor
from ._runtime.attach import attach, detach
from ._runtime.channels import Channel
from ._runtime.chare import Chare
from ._runtime.collections import Array, Group, destroy
from ._runtime.context import my_pe, num_pes
from ._runtime.engine import exit as exit  # qualified only (see below)
from ._runtime.engine import call_later, mpi_comm, quiescence, run, start
from ._runtime.futures import Future, gather
from ._runtime.proxy import CollectionProxy as CollectionProxy, ElementProxy as ElementProxy, SectionProxy as SectionProxy
from ._runtime.receive_sets import ReceiveSet
from ._runtime.reducers import Reducer, reducers
from ._runtime.checkpoint import checkpoint, checkpoint_point, checkpoint_point_sync, checkpoint_sync, restarted
from ._runtime.strategies import register_strategy
from ._runtime.threads import threaded
from ._runtime.conditions import when, wait_until

__version__ = "0.1.0"


def connect(target=None, token=None, *, timeout: float = 10.0, tls_cert=None):  # type: ignore[no-untyped-def]
    """Connect to a ``shoal serve`` job (its connection file, ``"host:port"`` with ``token``,
    or None for this user's newest server); a :class:`shoal.remote.Connection`."""
    from .remote.client import connect as connect_

    return connect_(target, token, timeout=timeout, tls_cert=tls_cert)


def load_ipython_extension(ipython) -> None:  # type: ignore[no-untyped-def]
    """``%load_ext shoal``: the ``%%shoal`` cell magic (:mod:`shoal.remote.magic`)."""
    from .remote.magic import load_ipython_extension as load

    load(ipython)

# Not in __all__, on purpose: `exit` (``from shoal import *`` would shadow the builtin;
# the documented spelling is ``shoal.exit(code)``) and the proxy classes, which users
# never construct (they stay importable for type hints and isinstance checks).

__all__ = [
    "start",
    "run",
    "attach",
    "detach",
    "connect",
    "my_pe",
    "num_pes",
    "Chare",
    "Group",
    "Array",
    "destroy",
    "Future",
    "gather",
    "Channel",
    "ReceiveSet",
    "reducers",
    "Reducer",
    "quiescence",
    "call_later",
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
    "MigrationError",
    "CheckpointError",
    "register_strategy",
    "threaded",
    "when",
    "wait_until",
    "checkpoint",
    "checkpoint_sync",
    "checkpoint_point",
    "checkpoint_point_sync",
    "restarted",
    "__version__",
]
