"""shoal: message-driven, migratable Python objects (chares) over MPI."""

_TYPE_CHECKING = False  # typing is for type checkers: `shoal run` and a PE's start-up skip its import
if _TYPE_CHECKING:
    from typing import Any as _Any

from .errors import (
    BlockingCallError,
    ChannelError,
    CheckpointError,
    DeadlockError,
    GPUError,
    MigrationError,
    NotRunningError,
    ReductionError,
    RemoteError,
    ShoalError,
)

if _TYPE_CHECKING:  # the same names, loaded on first use (below) so that `shoal run` starts fast
    from . import pool
    from .pool import BrokenPool, Executor
    from ._runtime.attach import attach, detach
    from ._runtime.channels import Channel
    from ._runtime.chare import Chare
    from ._runtime.collections import Array, Group
    from ._runtime.lifecycle import destroy
    from ._runtime.context import my_pe, num_pes
    from ._runtime.devices import my_device
    from ._runtime.engine import exit as exit  # qualified only (see below)
    from ._runtime.engine import call_later, mpi_comm, quiescence, run, start
    from ._runtime.futures import Future, gather
    from ._runtime.loans import Loan, lend
    from ._runtime.proxy import CollectionProxy as CollectionProxy, ElementProxy as ElementProxy, SectionProxy as SectionProxy
    from ._runtime.receive_sets import ReceiveSet
    from ._runtime.reducers import Reducer, reducers
    from ._runtime.checkpoint import checkpoint, checkpoint_point, checkpoint_point_sync, checkpoint_sync, restarted
    from ._runtime.strategies import register_strategy
    from ._runtime.threads import threaded
    from ._runtime.topology import topology
    from ._runtime.conditions import when, wait_until

#: public name -> the module that defines it. The runtime is imported (NumPy only once the program uses it)
#: when a program first touches one of these, not by ``import shoal``: the launcher of
#: ``shoal run`` and the command line need none of it.
_LAZY = {
    "pool": ".pool",
    "BrokenPool": ".pool",
    "Executor": ".pool",
    "attach": "._runtime.attach",
    "detach": "._runtime.attach",
    "Channel": "._runtime.channels",
    "Chare": "._runtime.chare",
    "Array": "._runtime.collections",
    "Group": "._runtime.collections",
    "destroy": "._runtime.lifecycle",
    "my_pe": "._runtime.context",
    "num_pes": "._runtime.context",
    "my_device": "._runtime.devices",
    "exit": "._runtime.engine",
    "call_later": "._runtime.engine",
    "mpi_comm": "._runtime.engine",
    "quiescence": "._runtime.engine",
    "run": "._runtime.engine",
    "start": "._runtime.engine",
    "Future": "._runtime.futures",
    "gather": "._runtime.futures",
    "Loan": "._runtime.loans",
    "lend": "._runtime.loans",
    "CollectionProxy": "._runtime.proxy",
    "ElementProxy": "._runtime.proxy",
    "SectionProxy": "._runtime.proxy",
    "ReceiveSet": "._runtime.receive_sets",
    "Reducer": "._runtime.reducers",
    "reducers": "._runtime.reducers",
    "checkpoint": "._runtime.checkpoint",
    "checkpoint_point": "._runtime.checkpoint",
    "checkpoint_point_sync": "._runtime.checkpoint",
    "checkpoint_sync": "._runtime.checkpoint",
    "restarted": "._runtime.checkpoint",
    "register_strategy": "._runtime.strategies",
    "threaded": "._runtime.threads",
    "topology": "._runtime.topology",
    "when": "._runtime.conditions",
    "wait_until": "._runtime.conditions",
}


def __getattr__(name: str) -> "_Any":
    """Load a public name of the runtime on first use (PEP 562), then keep it here."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'shoal' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(where, __name__)
    value = module if where == "." + name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


from .version import __version__


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
    "my_device",
    "num_pes",
    "topology",
    "Chare",
    "Group",
    "Array",
    "destroy",
    "Future",
    "gather",
    "lend",
    "Loan",
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
    "GPUError",
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
