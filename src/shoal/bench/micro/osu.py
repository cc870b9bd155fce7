"""Results and their three outputs: OSU 7.x text, CSV and JSON; and a parser of the text.

The text output follows OSU 7.x line by line (a ``# OSU MPI… Test v…`` title, a
``# Datatype:`` line, the column header, rows ``%-10d%18.2f``) so that existing OSU
parsers read it; the title names the shoal target after the OSU words. JSON is one
object per test with exactly the keys ``shoal bench compare`` reads. The C baseline
prints its own rows, so :func:`preamble` and :func:`row_prefix` are what it is given
to print around them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .catalog import TESTS

__all__ = ["Row", "Result", "FORMATS", "title", "preamble", "row_prefix", "render", "parse", "split"]

FORMATS = ("text", "csv", "json")
CSV_HEADER = "test,target,api,buffer,pes,unit,size,value,iterations"
SUITE_VERSION = "v7.x"


@dataclass(slots=True)
class Row:
    """One message size: its figure (µs or MB/s) and how many timed iterations made it."""

    size: int
    value: float
    iterations: int


@dataclass(slots=True)
class Result:
    """The outcome of one test on one target."""

    test: str
    target: str
    api: str | None
    buffer: str
    pes: int
    unit: str
    rows: list[Row] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # validation failures, one line each

    def add(self, size: int, value: float | None, iterations: int) -> None:
        """Append the row of one message size (``value`` None: not measured here)."""
        if value is not None:
            self.rows.append(Row(size, float(value), iterations))

    def to_json(self) -> dict:
        """The JSON object of this result (the schema ``shoal bench compare`` reads)."""
        return {
            "test": self.test,
            "target": self.target,
            "api": self.api,
            "buffer": self.buffer,
            "pes": self.pes,
            "unit": self.unit,
            "rows": [{"size": r.size, "value": r.value, "iterations": r.iterations} for r in self.rows],
        }


def title(test: str, target: str, api: str | None, buffer: str, pes: int) -> str:
    """The OSU-style title line naming what ran."""
    what = f"target {target}" + (f", api {api}" if api else "") + f", buffer {buffer}, {pes} PEs"
    suite = "OSU MPI" if target == "c" else "OSU MPI-Python"
    return f"# {suite} {TESTS[test].title} {SUITE_VERSION} (shoal bench micro: {what})"


def _column_header(test: str) -> str:
    t = TESTS[test]
    if not t.sized:
        return "# Avg Latency(us)"
    return "# Size      Bandwidth (MB/s)" if t.unit == "MB/s" else "# Size       Avg Latency(us)"


def preamble(fmt: str, test: str, target: str, api: str | None, buffer: str, pes: int, first: bool = True) -> str:
    """Everything printed before the rows in format ``fmt`` (JSON: up to the rows list)."""
    if fmt == "text":
        t = TESTS[test]
        datatype = [f"# Datatype: {t.mpi_datatype}."] if t.sized else []  # OSU's barrier has none
        return "\n".join([title(test, target, api, buffer, pes), *datatype, _column_header(test)]) + "\n"
    if fmt == "csv":
        return CSV_HEADER + "\n" if first else ""
    head = Result(test, target, api, buffer, pes, TESTS[test].unit).to_json()
    text = json.dumps(head)
    return text[: text.rindex("[")] + "["


def row_prefix(test: str, target: str, api: str | None, buffer: str, pes: int) -> str:
    """The fields a CSV row starts with, before ``size,value,iterations``."""
    return f"{test},{target},{api or ''},{buffer},{pes},{TESTS[test].unit},"


def _text_row(test: str, row: Row) -> str:
    if not TESTS[test].sized:
        return f"{row.value:17.2f}"
    return "%-10d%18.2f" % (row.size, row.value)


def render(result: Result, fmt: str, first: bool = True) -> str:
    """``result`` as text (OSU), CSV (header only if ``first``) or one line of JSON."""
    if fmt == "json":
        return json.dumps(result.to_json()) + "\n"
    meta = (result.test, result.target, result.api, result.buffer, result.pes)
    head = preamble(fmt, *meta, first=first)
    if fmt == "csv":
        prefix = row_prefix(*meta)
        return head + "".join(f"{prefix}{r.size},{r.value!r},{r.iterations}\n" for r in result.rows)
    return head + "".join(_text_row(result.test, r) + "\n" for r in result.rows)


def parse(text: str) -> list[tuple[int, float]]:
    """The (size, value) rows of OSU text output; a sizeless row (barrier) has size 0.

    Comment lines (``#``) and blank lines are skipped; any other line that is not a
    row raises ValueError, so stray output is noticed.
    """
    rows: list[tuple[int, float]] = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        try:
            if len(fields) == 1:
                rows.append((0, float(fields[0])))
            else:
                rows.append((int(fields[0]), float(fields[1])))
        except ValueError:
            raise ValueError(f"not an OSU result row: {line!r}") from None
    return rows


def split(text: str) -> list[tuple[str, list[tuple[int, float]]]]:
    """Several tests' OSU output as (title line, rows) per test, in order."""
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("# OSU"):
            blocks.append((line, []))
        elif blocks:
            blocks[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"OSU output must start with a '# OSU' title line, not {line!r}")
    return [(head, parse("\n".join(lines))) for head, lines in blocks]
