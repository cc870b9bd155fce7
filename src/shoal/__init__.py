"""shoal: message-driven, migratable Python objects (chares) over MPI."""

_TYPE_CHECKING = False  # typing is for type checkers: `shoal run` and a PE's start-up skip its import

from ._lazy_names import lazy_names as _lazy_names
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

if _TYPE_CHECKING:  # for type checkers: the names of _LAZY below, which load on first use
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

#: the runtime's public names, by the module that defines each (".pool" gives the module
#: itself as ``pool``). They load when a program first touches one (PEP 562), not with
#: ``import shoal``: the launcher of ``shoal run`` and the command line need none of it.
#: Type checkers read the same names from the imports under ``_TYPE_CHECKING`` above;
#: tests/project/test_exports.py checks that the two agree.
_LAZY = {
    ".pool": ("pool", "BrokenPool", "Executor"),
    "._runtime.attach": ("attach", "detach"),
    "._runtime.channels": ("Channel",),
    "._runtime.chare": ("Chare",),
    "._runtime.collections": ("Array", "Group"),
    "._runtime.lifecycle": ("destroy",),
    "._runtime.context": ("my_pe", "num_pes"),
    "._runtime.devices": ("my_device",),
    "._runtime.engine": ("exit", "call_later", "mpi_comm", "quiescence", "run", "start"),
    "._runtime.futures": ("Future", "gather"),
    "._runtime.loans": ("Loan", "lend"),
    "._runtime.proxy": ("CollectionProxy", "ElementProxy", "SectionProxy"),
    "._runtime.receive_sets": ("ReceiveSet",),
    "._runtime.reducers": ("Reducer", "reducers"),
    "._runtime.checkpoint": ("checkpoint", "checkpoint_point", "checkpoint_point_sync", "checkpoint_sync", "restarted"),
    "._runtime.strategies": ("register_strategy",),
    "._runtime.threads": ("threaded",),
    "._runtime.topology": ("topology",),
    "._runtime.conditions": ("when", "wait_until"),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}


__getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)  # the runtime's names, loaded on first use


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


#: public, but not in __all__, on purpose: ``exit`` (``from shoal import *`` would shadow
#: the builtin; the documented spelling is ``shoal.exit(code)``), the proxy classes, which
#: users never construct (importable for type hints and isinstance checks), and the
#: IPython hook
_QUALIFIED_ONLY = {"exit", "CollectionProxy", "ElementProxy", "SectionProxy", "load_ipython_extension"}

__all__ = [
    *(name for name, value in globals().items() if isinstance(value, type) and issubclass(value, Exception)),
    *(name for name in _WHERE if name not in _QUALIFIED_ONLY),
    "connect",
    "__version__",
]
