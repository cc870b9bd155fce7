"""The errors of failed futures that nobody retrieved: each reported on stderr when its
future goes (as asyncio does), the first of each kind and place in full and the later
ones counted, so that a program that drops thousands writes a few lines."""

from __future__ import annotations

import sys
from time import perf_counter as _clock

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    from .futures import Future
    from .runtime import Runtime

__all__ = ["Unretrieved", "report_repeated_errors", "REPEAT_INTERVAL"]


class Unretrieved:
    """Reports a failed future's error when the future is dropped and nobody retrieved it."""

    __slots__ = ("exc", "origin", "reports")

    def __init__(self, exc: BaseException, rt: "Runtime", fut: "Future"):
        self.exc: BaseException | None = exc
        self.origin = fut.origin
        self.reports = _Reports.of(rt)

    def __del__(self) -> None:
        exc = self.exc
        if exc is None or sys.stderr is None:
            return
        try:
            self.reports.report(exc, self.origin)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


#: a kind of error that keeps coming is counted in one line at most this often (seconds)
REPEAT_INTERVAL = 10.0

_all_reports: Any = None  # a WeakSet of every _Reports of this process, for what is left at exit


class _Reports:
    """One PE's reports of the errors of futures nobody retrieved, in one job: the first
    error of each kind (exception class) and place (where it was raised) in full, the
    later ones counted. The count is written when the job is over (this object goes,
    once the PE's runtime and the last such future have), at exit, or every
    :data:`REPEAT_INTERVAL` seconds while more keep coming: one program that drops
    thousands of failed futures of one kind writes a few lines, not thousands of
    tracebacks."""

    __slots__ = ("pe", "seen", "__weakref__")

    def __init__(self, pe: int):
        self.pe = pe
        self.seen: dict[tuple, list] = {}  # (kind, place) -> [more since the last line, time of that line]

    @staticmethod
    def of(rt: "Runtime") -> "_Reports":
        """The reports of runtime ``rt`` (made on its first failed future)."""
        global _all_reports
        reports = getattr(rt, "_unretrieved_reports", None)
        if reports is None:
            reports = rt._unretrieved_reports = _Reports(rt.pe)  # type: ignore[attr-defined]
            if _all_reports is None:
                import atexit
                import weakref

                _all_reports = weakref.WeakSet()
                atexit.register(_at_exit)
            _all_reports.add(reports)
        return reports

    def report(self, exc: BaseException, origin: str) -> None:
        kind = type(exc)
        key = (kind, _raised_at(exc))
        now = _clock()
        seen = self.seen.get(key)
        if seen is None:
            self.seen[key] = [0, now]
            try:
                import traceback

                text = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
            except ImportError:  # the interpreter is shutting down: no imports any more
                text = f"{kind.__name__}: {exc}\n"
            sys.stderr.write(
                f"shoal: PE {self.pe}: the error of a future nobody retrieved (created at {origin}); "
                f"await it or call .get() to handle it:\n{text}"
            )
            sys.stderr.flush()
            return
        seen[0] += 1
        if now - seen[1] >= REPEAT_INTERVAL:
            self._write(key, seen, " so far")

    def flush(self) -> None:
        """Write how many more errors of each kind and place came since the one reported in
        full (or since the last such line)."""
        for key, seen in self.seen.items():
            if seen[0]:
                self._write(key, seen, "")

    def _write(self, key: tuple, seen: list, when: str) -> None:
        kind, place = key
        n, seen[0], seen[1] = seen[0], 0, _clock()
        what = f"{n:,} more errors like it{when}" if n > 1 else f"1 more error like it{when}"
        where = f"{kind.__qualname__} at {place}" if place else kind.__qualname__
        sys.stderr.write(f"shoal: PE {self.pe}: … and {what} ({where}) from "
                         f"{'futures' if n > 1 else 'a future'} nobody retrieved\n")
        sys.stderr.flush()

    def __del__(self) -> None:  # the job is over on this PE
        if sys.stderr is not None:
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


def report_repeated_errors() -> None:
    """Write, for each kind and place of error from futures nobody retrieved, how many more
    came since the one reported in full (a job's own count comes when it is over)."""
    for reports in list(_all_reports or ()):
        reports.flush()


def _at_exit() -> None:
    """Report the errors of the failed futures still alive at exit (nobody will retrieve
    them; the objects freed at shutdown would report them too late to be counted), then
    every count."""
    import gc

    for obj in gc.get_objects():
        if type(obj) is Unretrieved and obj.exc is not None:
            exc, obj.exc = obj.exc, None
            obj.reports.report(exc, obj.origin)
    report_repeated_errors()


def _raised_at(exc: BaseException) -> str:
    """Where ``exc`` was raised, ``file:line in function``: the innermost frame of the
    traceback that :func:`annotate` noted on it (it travelled from another PE without its
    own), else of its own traceback; "" when neither says."""
    for note in reversed(getattr(exc, "__notes__", None) or ()):
        if isinstance(note, str) and note.startswith("[shoal] raised on PE"):
            for line in reversed(note.splitlines()):
                text = line.strip()
                if text.startswith('File "') and '", line ' in text and ", in " in text:
                    file, rest = text[6:].split('", line ', 1)
                    number, function = rest.split(", in ", 1)
                    return f"{file}:{number} in {function}"
            first = note.split(":\n", 1)[0]
            if " in " in first:
                return first.split(" in ", 1)[1]  # "pool task f", without the PE
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}"
