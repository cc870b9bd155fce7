"""Tracebacks in the user's words: the frames of shoal's own machinery left out.

An error raised in a user's entry method, task or main program travels through the
runtime's scheduler, futures and engine before anybody sees it; their frames say
nothing to the user and push the user's own frames out of sight. As pytest and Dask
do, the tracebacks shoal prints or attaches leave them out (saying how many), unless
``SHOAL_DEBUG=1`` is set in the environment, which keeps every frame.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path

__all__ = ["format_user", "internal"]

#: shoal's package folder: frames from files under it are shoal's own
_PACKAGE = str(Path(__file__).resolve().parent.parent) + os.sep


def internal(filename: str) -> bool:
    """Whether a frame of ``filename`` is shoal's own machinery (not the user's code)."""
    return filename.startswith(_PACKAGE)


def _trim(te: traceback.TracebackException, seen: set[int]) -> int:
    """Drop shoal's frames from ``te`` and the exceptions chained to it; how many went."""
    if id(te) in seen:
        return 0
    seen.add(id(te))
    frames = list(te.stack)
    kept = [f for f in frames if not internal(f.filename)]
    dropped = 0
    if kept or not frames:  # an error raised inside shoal itself keeps its frames
        dropped = len(frames) - len(kept)
        te.stack = traceback.StackSummary.from_list(kept)
    for other in (te.__cause__, te.__context__):
        if other is not None:
            dropped += _trim(other, seen)
    return dropped


def format_user(exc: BaseException) -> str:
    """``exc``'s traceback as ``traceback.format_exception`` writes it, without shoal's
    internal frames (all of them with ``SHOAL_DEBUG=1``)."""
    if os.environ.get("SHOAL_DEBUG", "") not in ("", "0"):
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    dropped = _trim(te, set())
    text = "".join(te.format())
    if dropped:
        text += f"({dropped} frame(s) of shoal's internals hidden; SHOAL_DEBUG=1 shows them)\n"
    return text
