"""Issue 40's two questions from one ``.ci/gpu-check`` log: what is this machine's floor
(step 1), and how far is shoal from each target (step 3)?

    python3 .ci/gpu_summary.py gpu-out/gpu-check.log

The log is the whole run's (``$OUT/gpu-check.log``; docs/gpu-runs/ keeps them): each step
between a ``== NAME: COMMAND`` line and ``== NAME: exit N in S s``. The floor is what the
machine does without shoal (``transfer-floor``, ``mps-transfer-floor``: a ping-pong of two
processes doing by hand what each path does; ``d2d-copy``: one process's device copy).
The targets compare shoal's figures (``latency-*``, ``bw-*``, ``bw64-*``, ``j3d-*``) with
those: a row whose figures the log lacks says so. Exit 0 whatever the verdicts (a report);
1 only when the log has none of the figures.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

__all__ = ["steps", "osu", "floor", "copies", "jacobi", "rows", "main"]

MiB = 1 << 20
_HEAD = re.compile(r"^== (?P<name>[\w.-]+): (?P<rest>.*)$")


def steps(text: str) -> dict[str, list[str]]:
    """Each step's output lines by its name (a step run twice: its last run)."""
    out: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m and name == m["name"] and m["rest"].startswith("exit "):
            name = None
        elif m and not m["rest"].startswith("exit "):
            name = m["name"]
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def osu(lines: list[str]) -> dict[int, float]:
    """An OSU-style table (``size value`` lines under ``#`` comments): value by size."""
    table = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            try:
                table[int(parts[0])] = float(parts[1])
            except ValueError:
                pass
    return table


def floor(lines: list[str]) -> dict[int, tuple[float, float]]:
    """.ci/gpu_transfer_floor.py's table: (IPC µs, staged µs) per message size."""
    table = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 5 and parts[0].isdigit():
            table[int(parts[0])] = (float(parts[1]), float(parts[3]))
    return table


def copies(lines: list[str]) -> dict[int, float]:
    """The one-process device-to-device copy's MB/s per size in bytes (``d2d-copy``)."""
    found = {}
    for line in lines:
        m = re.match(r"single-process device-to-device copy, (\d+) MiB: (\d+(?:\.\d+)?) MB/s", line)
        if m:
            found[int(m[1]) * MiB] = float(m[2])
    return found


def jacobi(lines: list[str]) -> float | None:
    """Milliseconds per step of a ``bench app jacobi3d --json`` run (its last JSON line)."""
    for line in reversed(lines):
        if line.startswith("{"):
            value = json.loads(line).get("time_per_step")
            return None if value is None else value * 1e3
    return None


def _row(what: str, shoal: str, reference: str, ratio: float | None, goal: str, met: bool | None) -> tuple:
    verdict = "no figure" if ratio is None else ("met" if met else "not met")
    return what, shoal, reference, "" if ratio is None else f"{ratio:.2f}x", goal, verdict


def rows(log: dict[str, list[str]]) -> tuple[list[tuple], list[tuple]]:
    """(the floor's rows, the targets' rows) of one run's steps."""
    floors = {name: floor(log[name]) for name in ("transfer-floor", "mps-transfer-floor") if name in log}
    d2d = copies(log.get("d2d-copy", []))
    firsts = []
    for name, table in floors.items():
        under = " under MPS" if name.startswith("mps") else ""
        for size, (ipc, staged) in sorted(table.items()):
            firsts.append((f"{size} B, two processes{under}", f"IPC {ipc:.1f} µs ({size / ipc:.0f} MB/s)",
                           f"staged {staged:.1f} µs ({size / staged:.0f} MB/s)"))
    for size, rate in sorted(d2d.items()):
        firsts.append((f"{size // MiB} MiB, one process", f"device copy {rate:.0f} MB/s", ""))

    eight = [t[8][0] for t in floors.values() if 8 in t]
    best = min(eight) if eight else None
    targets = []
    for prefix, under in (("", ""), ("mps-", " under MPS")):
        for api in ("entry", "channel"):
            lat = osu(log.get(f"{prefix}latency-{api}-ipc", [])).get(8)
            ref = best if not prefix else (floors.get("mps-transfer-floor", {}).get(8, (None,))[0])
            if lat is None and prefix:
                continue
            ratio = lat / ref if lat is not None and ref else None
            targets.append(_row(f"8 B IPC latency, {api}{under}", _us(lat), f"floor {_us(ref)}", ratio, "≤ 2x",
                                ratio is not None and ratio <= 2))
    for api in ("entry", "channel"):
        bw = osu(log.get(f"bw-{api}-ipc", [])).get(4 * MiB)
        copy = d2d.get(4 * MiB)
        ratio = bw / copy if bw and copy else None
        targets.append(_row(f"4 MiB IPC bandwidth, {api}", _mbs(bw), f"one-process copy {_mbs(copy)}", ratio, "≥ 0.5x",
                            ratio is not None and ratio >= 0.5))
    for size, steps_of, goal in ((4 * MiB, "bw-{api}-{path}", 3.0), (64 * MiB, "bw64-{api}-{path}", 10.0)):
        for api in ("entry", "channel"):
            direct = osu(log.get(steps_of.format(api=api, path="ipc"), [])).get(size)
            staged = osu(log.get(steps_of.format(api=api, path="staged"), [])).get(size)
            if direct is None and staged is None and api == "channel" and size == 64 * MiB:
                continue  # (64 MiB is measured with entry methods only)
            ratio = direct / staged if direct and staged else None
            targets.append(_row(f"{size // MiB} MiB GPU-direct ÷ host-staged bandwidth, {api}", _mbs(direct),
                                f"staged {_mbs(staged)}", ratio, f"≥ {goal:g}x", ratio is not None and ratio >= goal))
    direct = jacobi(log.get("j3d-cuda-shoal-direct", []))
    for name, label in (("j3d-cuda-shoal-host", "shoal host-staged"), ("j3d-cuda-mpi4py-host", "mpi4py host-staged")):
        other = jacobi(log.get(name, []))
        ratio = direct / other if direct and other else None
        targets.append(_row(f"Jacobi3D 256³, direct halos ÷ {label}", _ms(direct), f"{label} {_ms(other)}", ratio,
                            "< 1x", ratio is not None and ratio < 1))
    return firsts, targets


def _us(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f} µs"


def _mbs(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f} MB/s"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f} ms/step"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    firsts, targets = rows(steps(Path(argv[0]).read_text(errors="replace")))
    print("# step 1: this machine's floor, without shoal")
    for what, a, b in firsts or [("(no transfer-floor or d2d-copy step in this log)", "", "")]:
        print(f"  {what:<34} {a:<32} {b}")
    print("# step 3: shoal against the targets")
    widths = [max(len(str(r[i])) for r in targets) for i in range(6)]
    for r in targets:
        print("  " + "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    figures = bool(firsts) or any(r[5] != "no figure" for r in targets)
    return 0 if figures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
