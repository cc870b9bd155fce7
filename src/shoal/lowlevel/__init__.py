"""The small internal API that shoal's own upper layers build on.

The stencil DSL, the benchmarks and the Charm4py layer reach the runtime and the
launcher through these names only, never through ``shoal._runtime`` (as
``trio.lowlevel`` does for trio's ``_core``; ``tests/project/test_layers.py`` holds them
to it). Each name says what a layer may do with it and what it promises; the runtime
keeps those promises when its private modules change. Programs should not need them.

* the job on this PE (``job.py``): whether one runs, a key for a layer's state of it,
  its settings, ending it with an error, the time its restart took;
* futures (``futures.py``): made for a caller, resolved here, outcomes passed on,
  handles of other PEs' futures;
* waiting (``waiting.py``): whether the caller may block, and who is waiting;
* proxies (``proxies.py``): entry-method types with call options of a layer's own, the
  elements a proxy covers, the element objects on this PE;
* checkpoints (``checkpoints.py``): reading them on disk, for the command line;
* launching: whether a launcher started this process, and starting ``mpiexec``.

Importing this package costs nothing: each name loads its module on first use (PEP 562,
``shoal/_lazy_names.py``), so a PE that imports a layer built on it pays only for the
names that layer uses, and a PE never loads the launcher.
"""

from __future__ import annotations

# ruff: noqa: F401  - the imports here are the names this package offers, not names it uses
from .._lazy_names import lazy_names as _lazy_names

_TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
#: the names, each imported from the module that defines it: the one list of them. Type
#: checkers read these imports; a running program skips them and loads each name on first
#: use instead (shoal/_lazy_names.py reads this block), then keeps it here.
if _TYPE_CHECKING:
    from .._runtime.engine import launcher_size, under_mpi_launcher
    from ..launcher import find_mpiexec, launch_mpi
    from .checkpoints import RESTART_AUTO, newest_checkpoint, read_manifest, resume_command, verify_checkpoint
    from .futures import Failure, ask_owner, has_value, local_future, new_future, outcome, owner_key, resolve
    from .job import current_settings, fail_job, in_job, job_key, restore_seconds
    from .proxies import (
        ElementEntry, Entry, EntryRef, add_call_option, call_element, elements_of, local_branch, local_element, union,
    )
    from .waiting import in_thread, may_block, running_element, threads_waiting_in

__getattr__, __dir__ = _lazy_names(globals())  # each name loaded on first use; __all__: all of them
