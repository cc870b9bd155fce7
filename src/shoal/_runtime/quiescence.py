"""Quiescence detection: no message in flight anywhere and nothing runnable.

The four-counter method: PE 0 runs waves over all PEs; each PE reports how many
program messages it has sent and received and whether it has runnable work. The job
is quiescent when two consecutive waves both see ``sent == received``, no work, and
the same counts. :class:`Detector` is the pure state machine; the system group
(:mod:`shoal._runtime.system`) does the messaging.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

if TYPE_CHECKING:
    from .futures import Future

__all__ = ["Detector", "WaveReport", "combine_reports"]

WaveReport = tuple[int, int, bool]  # (sent, received, active)


def combine_reports(reports: list) -> WaveReport:
    """Reducer of wave reports: sums and any-active."""
    sent = sum(r[0] for r in reports)
    received = sum(r[1] for r in reports)
    return sent, received, any(r[2] for r in reports)


class Detector:
    """Decides, wave by wave, whether the job is quiescent."""

    def __init__(self) -> None:
        self.waiters: list["Future"] = []
        self.wave = 0
        self.running = False
        self._previous: tuple[int, int] | None = None

    def request(self, on_quiet: "Future") -> bool:
        """Resolve ``on_quiet`` at quiescence; True if a new series of waves must start."""
        self.waiters.append(on_quiet)
        if self.running:
            return False
        self.running = True
        self._previous = None
        self.wave += 1
        return True

    def report(self, wave: int, result: WaveReport) -> tuple[str, list["Future"]]:
        """Feed one wave's combined report.

        Returns ``("quiet", callbacks)`` when the job is quiescent, ``("again", [])``
        when the next wave (``self.wave``) must run, ``("stale", [])`` for an old wave.
        """
        if wave != self.wave or not self.running:
            return "stale", []
        sent, received, active = result
        counts = (sent, received)
        if not active and sent == received and self._previous == counts:
            self.running = False
            done, self.waiters = self.waiters, []
            return "quiet", done
        self._previous = counts if (not active and sent == received) else None
        self.wave += 1
        return "again", []
