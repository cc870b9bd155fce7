"""The job that runs on this PE, as the upper layers see it: whether there is one, a key
for a layer's own state of it, its settings, ending it with an error, and how long its
restart from a checkpoint took."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from .._runtime import context
from .._runtime.context import current

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["in_job", "job_key", "current_settings", "fail_job", "restore_seconds"]


def in_job() -> bool:
    """Whether this PE runs a job now (from :func:`shoal.start` or :func:`shoal.attach` to
    its end): a layer may ask before it touches its state of the job."""
    return context._current is not None


def job_key(what: str = "this call") -> object:
    """An opaque key for the job this PE runs: hashable, weakly referable and alive as long
    as the job, so that a layer keeps its own state of the job in a
    ``weakref.WeakKeyDictionary`` under it (in-process PEs each have their own); outside a
    running job a clear error that names ``what``."""
    return current(what)


def current_settings(what: str = "this call") -> "Settings":
    """The settings of the job running on this PE (a clear error outside a running job)."""
    return current(what).settings


def fail_job(exc: BaseException, where: str) -> None:
    """End the whole job with ``exc``, an error nothing can catch, reported as raised on
    this PE at ``where`` (a layer's own abort: Charm4py's ``charm.abort``)."""
    current(where).fail(exc, where)


def restore_seconds() -> float:
    """How long this PE took to rebuild its elements from the checkpoint this run
    restarted from (0 in a fresh run)."""
    return current("shoal.lowlevel.restore_seconds()").restore_seconds
