"""shoal: message-driven, migratable Python objects (chares) over MPI."""

# ruff: noqa: F401  - the imports here are the names this package offers, not names it uses
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

#: the runtime's public names, each imported from the module that defines it: the one list
#: of them. Type checkers read these imports; a running program skips them and loads each
#: name on first use instead (PEP 562, shoal/_lazy_names.py reads this block), so that
#: ``import shoal`` loads none of the runtime: the launcher of ``shoal run`` and the
#: command line need none of it. ``from . import pool`` is the module itself.
if _TYPE_CHECKING:
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
    from ._runtime.strategy_registry import register_strategy
    from ._runtime.threads import threaded
    from ._runtime.topology import topology
    from ._runtime.conditions import when, wait_until

#: the names of the block above, loaded on first use, and ``__all__``, made on first use:
#: the errors, shoal.connect and the version, then the block's names but those public on
#: purpose though not in __all__: ``exit`` (``from shoal import *`` would shadow the
#: builtin; the documented spelling is ``shoal.exit(code)``) and the proxy classes, which
#: users never construct (importable for type hints and isinstance checks). The IPython
#: hook below is not in __all__ either.
__getattr__, __dir__ = _lazy_names(
    globals(),
    public=[*(name for name, value in globals().items() if isinstance(value, type) and issubclass(value, Exception)),
            "connect", "__version__"],
    qualified_only={"exit", "CollectionProxy", "ElementProxy", "SectionProxy"})


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

