"""The job that runs on this PE, as the upper layers see it: its settings, and how long
its restart from a checkpoint took."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from .._runtime.context import current

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["current_settings", "restore_seconds"]


def current_settings(what: str = "this call") -> "Settings":
    """The settings of the job running on this PE (a clear error outside a running job)."""
    return current(what).settings


def restore_seconds() -> float:
    """How long this PE took to rebuild its elements from the checkpoint this run
    restarted from (0 in a fresh run)."""
    return current("shoal.lowlevel.restore_seconds()").restore_seconds
