"""The results file: one CSV row per finished trial, appended as trials finish.

The first columns say what ran (:data:`LEADING`, then the app options of the
configuration), then every numeric field of the app's JSON (``time_per_step``,
``compute_per_step``, ``comm_per_step``, ``checksum``, …), then the exact command. A
row is written with one ``write`` and flushed to disk before the next trial starts, so
a killed experiment loses at most the trial it was running; a torn last line is
dropped when the file is read back. A row bringing a column the header lacks (another
target's JSON has other fields) rewrites the file once with the wider header.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .spec import ExperimentError

__all__ = ["LEADING", "REQUIRED", "TRAILING", "Results", "append", "load", "numeric_fields", "row_key"]

#: columns every row starts with
LEADING = ("order", "trial", "target", "app_target", "app", "pes", "configuration", "oversubscribed", "cores",
           "seed", "metric", "baseline")
#: columns every row ends with
TRAILING = ("wall_s", "finished", "command")
#: what `shoal bench report` cannot work without (besides the metric's own column)
REQUIRED = ("app", "target", "pes", "trial", "configuration")


@dataclass(slots=True)
class Results:
    """A results file as read back: its header and its complete rows."""

    header: list[str]
    rows: list[dict[str, str]]
    torn: bool = False  # the last line was cut short (a kill mid-write) and was left out


def row_key(row: dict[str, str]) -> tuple[str, str, int, str, int]:
    """A row's configuration + target + trial, as :attr:`.spec.Run.key`."""
    return (row["app"], row["configuration"], int(row["pes"]), row["target"], int(row["trial"]))


def load(path: Path) -> Results:
    """Read a results file (an absent or empty one has no rows)."""
    try:
        with path.open(newline="") as f:
            text = f.read()
    except FileNotFoundError:
        return Results([], [])
    if not text.strip():
        return Results([], [])
    torn = not text.endswith("\n")
    if torn:
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = list(reader.fieldnames or [])
    rows = [row for row in reader if None not in row and all(v is not None for v in row.values())]
    return Results(header, rows, torn)


def numeric_fields(record: dict[str, Any]) -> dict[str, float | int]:
    """The numbers of an app's JSON (booleans as 0/1; lists, strings and nulls left out)."""
    out: dict[str, float | int] = {}
    for key, value in record.items():
        if isinstance(value, bool):
            out[key] = int(value)
        elif isinstance(value, (int, float)) and (isinstance(value, int) or math.isfinite(value)):
            out[key] = value
    return out


def _write(path: Path, header: list[str], rows: Iterable[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, header, restval="")
        writer.writeheader()
        writer.writerows(rows)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def append(path: Path, results: Results, row: dict[str, Any]) -> None:
    """Append ``row`` to the file and to ``results``, widening the header if needed."""
    new = [k for k in row if k not in results.header]
    if new or results.torn or not results.header:
        # order: leading columns, the rest as they came, trailing columns last
        rest = [c for c in [*results.header, *new] if c not in LEADING and c not in TRAILING]
        results.header = [c for c in LEADING if c in results.header or c in row] + rest + \
            [c for c in TRAILING if c in results.header or c in row]
        results.rows.append({k: "" if v is None else str(v) for k, v in row.items()})
        results.torn = False
        _write(path, results.header, results.rows)
        return
    buf = io.StringIO(newline="")
    csv.DictWriter(buf, results.header, restval="").writerow(row)
    with path.open("a", newline="") as f:
        f.write(buf.getvalue())
        f.flush()
        os.fsync(f.fileno())
    results.rows.append({k: "" if v is None else str(v) for k, v in row.items()})


def check_columns(results: Results, path: Path, metric: str) -> None:
    """Fail with the missing columns' names unless ``results`` can be reported on."""
    missing = [c for c in (*REQUIRED, metric) if c not in results.header]
    if missing:
        raise ExperimentError(f"{path}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                              f"a results file of `shoal bench experiment` has {', '.join(REQUIRED)} "
                              f"and the metric ({metric})")
