"""The system group: one internal chare per PE for job-wide control.

Exit, quiescence waves, the insertion count of sparse arrays and the deadlock report
are broadcasts and reductions on this group, so they reuse the ordinary message
paths. Its messages (collection id 0) are not counted by quiescence detection.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from .chare import Chare
from .context import current
from .kinds import NO_COLL, SYSTEM_ID
from .quiescence import combine_reports

if TYPE_CHECKING:
    from typing import Any, Callable

    from .futures import Future

__all__ = ["System", "SYSTEM_ID", "NO_COLL"]

_WAVE_PAUSE = 0.0005  # seconds between quiescence waves that found activity
_COUNT_PAUSE = 0.001  # seconds between insertion counts that did not balance


def _combine_waves(values: list) -> tuple:
    return values[0][0], combine_reports([v[1] for v in values])


def _combine_counts(values: list) -> tuple:
    hosts: list = []
    for v in values:
        hosts.extend(v[2])
    return sum(v[0] for v in values), sum(v[1] for v in values), hosts


def _concat(values: list) -> list:
    out: list = []
    for v in values:
        out.extend(v)
    return out


def _first_failure(values: list) -> tuple:
    """Reducer of exit wishes ``(code != 0, -pe, code)``: the non-zero code of the lowest PE."""
    return max(values)


class System(Chare):
    """Control entry methods; element 0 (on PE 0) coordinates."""

    ending = False

    # -- ending the job ----------------------------------------------------------
    def end_job(self) -> None:
        """Some PE asked to end the job (on PE 0): collect every PE's exit wish once."""
        if not self.ending:
            self.ending = True
            self.collection.exit_wish()

    def exit_wish(self) -> None:
        rt = current()
        code = rt.exit_code if rt.exit_requested else 0
        self.contribute((code != 0, -rt.pe, code), _first_failure, self.collection[0].exit_decided)

    def exit_decided(self, wish: tuple) -> None:
        if current().tracer is not None:  # every PE's timeline to PE 0 first (SHOAL_TRACE)
            self.collection.trace_export(wish[2])
        else:
            self.collection.stop(wish[2])

    def trace_export(self, code: int) -> None:
        from .tracing import clock_offset  # a job that traces: the others never need it

        tracer = current().tracer
        record = tracer.export(offset=clock_offset()) if tracer is not None else None
        self.contribute([record], _concat, self.collection[0].trace_write.bind(code))

    def trace_write(self, code: int, records: list) -> None:
        """Write the job's timeline (one file, every PE a track), then end the job."""
        rt = current()
        path = rt.settings.trace
        try:
            from .trace_file import write_trace  # only a job that traces writes one

            dropped = write_trace(path, [r for r in records if r is not None],
                                  meta={"pes": rt.npes, "exit_code": code})
            events = sum(len(r["entries"]) + sum(map(sum, r["bins"]["calls"] if "bins" in r else ()))
                         for r in records if r is not None)  # summary mode: its bins' calls
            lost = f" ({dropped.sentence()}: a fault of shoal's recorder, please report it)" if dropped.total else ""
            print(f"shoal: timeline of {rt.npes} PEs ({events} entry-method runs) written to {path}{lost}; "
                  f"`shoal trace summary {path}` or https://ui.perfetto.dev shows it", file=sys.stderr, flush=True)
        except Exception as exc:  # noqa: BLE001 - the job's own result stands: say why there is no trace
            print(f"shoal: PE 0: no timeline written: {exc}", file=sys.stderr, flush=True)
        self.collection.stop(code)

    def stop(self, code: int) -> None:
        current().stop(code)

    # -- quiescence --------------------------------------------------------------
    def qd_request(self, fut: "Future") -> None:
        rt = current()
        if rt.detector.request(fut):
            self.collection.qd_probe(rt.detector.wave)

    def qd_probe(self, wave: int) -> None:
        rt = current()
        report = (rt.counts.sent, rt.counts.received, bool(rt.ready) or rt.program_timers > 0)
        self.contribute((wave, report), _combine_waves, self.collection[0].qd_result)

    def qd_result(self, result: tuple) -> None:
        rt = current()
        state, callbacks = rt.detector.report(*result)
        if state == "again":
            wave = rt.detector.wave
            rt.call_later(_WAVE_PAUSE, lambda: self.collection.qd_probe(wave))
        for cb in callbacks:
            cb.send(None)

    # -- sparse arrays -----------------------------------------------------------
    def count_inserts(self, coll: int) -> None:
        rt = current()
        sent, received = rt.lifecycle.insert_counts.get(coll, (0, 0))
        cs = rt.colls.get(coll)
        hosted = [rt.pe] if cs is not None and cs.elements else []
        self.contribute((sent, received, hosted), _combine_counts, self.collection[0].inserts_counted.bind(coll))

    def inserts_counted(self, coll: int, counts: tuple) -> None:
        sent, received, hosts = counts
        if sent == received:
            self.collection.finish_inserting(coll, sorted(hosts), sent)
        else:
            current().call_later(_COUNT_PAUSE, lambda: self.collection.count_inserts(coll))

    def finish_inserting(self, coll: int, hosts: list, size: int) -> None:
        current().lifecycle.finish_inserting(coll, hosts, size)

    # -- destroying collections ------------------------------------------------------
    def destroy_collection(self, coll: int, root: int) -> None:
        current().lifecycle.destroy_here(coll, root)

    # -- work of every PE, gathered --------------------------------------------------
    def collect(self, fn: Callable[..., Any], args: tuple, fut: "Future") -> None:
        """Call ``fn(runtime, *args)`` on this PE and contribute its value; ``fut`` gets every
        PE's, in PE order. ``fn`` is a runtime function (it travels by reference), such as
        checkpoint.py's writing of a PE's elements."""
        self.contribute([fn(current(), *args)], _concat, fut)

    # -- deadlock report ---------------------------------------------------------
    def report_waiting(self, fut: "Future") -> None:
        self.contribute(current().waiting_report(), _concat, fut)
