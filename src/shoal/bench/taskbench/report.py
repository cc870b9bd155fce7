"""The report a Task Bench run prints: the reference's configuration block and lines."""

from __future__ import annotations

from typing import TextIO

from .app import App

__all__ = ["print_report"]


def print_report(app: App, elapsed: float, out: TextIO) -> None:
    """``app``'s configuration and timing report for a run of ``elapsed`` seconds."""
    app.display(out)
    app.report_timing(elapsed, out)
    out.flush()
