"""Printing results as each test finishes, and the exit code of the run.

Output goes to stdout in the chosen format and nothing else does, so ``--json`` and
``--csv`` can be piped; validation failures go to stderr, one line each, and make the
exit code 1.
"""

from __future__ import annotations

import sys
from typing import TextIO

from . import osu
from .options import Config

__all__ = ["Reporter"]

_SHOWN_FAILURES = 10


class Reporter:
    """Emits results on PE 0 and remembers whether any validation failed."""

    def __init__(self, cfg: Config, out: TextIO | None = None, err: TextIO | None = None):
        self.cfg = cfg
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.count = 0
        self.failed: list[str] = []

    def emit(self, result: osu.Result) -> None:
        """Print one test's result now (progress for long runs), failures to stderr."""
        text = osu.render(result, self.cfg.fmt, first=self.count == 0)
        if self.cfg.fmt == "text" and self.count:
            text = "\n" + text
        self.out.write(text)
        self.out.flush()
        self.count += 1
        if result.failures:
            self.failed.append(result.test)
            for line in result.failures[:_SHOWN_FAILURES]:
                print(f"shoal bench micro: validation failed: {line}", file=self.err)
            if len(result.failures) > _SHOWN_FAILURES:
                print(f"shoal bench micro: ... and {len(result.failures) - _SHOWN_FAILURES} more failures", file=self.err)
            self.err.flush()

    def finish(self) -> int:
        """The exit code: 1 if any validation failed (with a summary line), else 0."""
        if self.failed:
            print(f"shoal bench micro: validation FAILED in {', '.join(self.failed)}", file=self.err)
            return 1
        if self.cfg.validate:
            print(f"shoal bench micro: validation passed ({self.count} tests)", file=self.err)
        return 0
