"""Compare what Charm4py's own test programs print under real Charm4py and under
shoal's layer (a check run by hand, not by pytest: real Charm4py's own races make some
outputs differ from run to run).

    .venv/bin/python tests/support/charm4py_outputs.py [-n PES]

Each program of ../shared/charm4py-suite runs under ``python -m charmrun.start +pN`` and
under ``shoal run -n N --compat charm4py``. Their outputs are compared as sorted lists
of lines (PEs print in any order), numbers replaced by ``#`` (timings differ), with the
runtimes' own diagnostics left out: Charm++'s banner and statistics, and shoal's note
that it keeps no Charm4py statistics tables. It prints one row per program and the count
of identical outputs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parents[2].parent / "shared" / "charm4py-suite"

#: lines that come from a runtime, not from the program
DIAGNOSTICS = re.compile(
    r"^(Charm\+\+|Charm4py>|Converse|CharmLB>|Charmrun>|Isomalloc>|\[Partition |HWLOC|Running on"
    r"|Initializing charm\.pool with .* is experimental"  # Charm4py's pool banner
    r"|Message size in bytes|Messages received|Messages sent|Timings for PE|Total bytes|Timers|----|\||\s*$"  # printStats and its table
    r"|Test PE Speed|Using \d+ as root|\[\d+\] |WARNING> updateGlobals"  # load balancing (+LBDebug prints "[pe] ...")
    r"|PE \d+: shoal keeps no Charm4py statistics tables)")


def lines(text: str) -> list[str]:
    """The program's own output lines, numbers as ``#``, sorted."""
    return sorted(re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line.strip()) for line in text.splitlines()
                  if not DIAGNOSTICS.match(line.strip()))


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("-n", "--pes", type=int, default=0, help="PEs (default: each entry's, at least 2)")
    ns = p.parse_args()
    config = json.loads((SUITE / "test_config.json").read_text())
    same = total = 0
    for entry in config:
        path = entry["path"]
        if entry.get("interactive") or not path.endswith(".py"):
            continue
        n = ns.pes or max(entry.get("force_min_processes", 2), 2)
        args = entry.get("args", "").split()
        runs = []
        for cmd in ([sys.executable, "-m", "charmrun.start", f"+p{n}", path, *args],
                    [sys.executable, "-m", "shoal", "run", "-n", str(n), "--compat", "charm4py", path, *args]):
            try:
                runs.append(subprocess.run(cmd, cwd=SUITE, capture_output=True, text=True, timeout=120))
            except subprocess.TimeoutExpired:
                runs.append(None)
        total += 1
        if None in runs:
            print(f"{path}: timed out ({'Charm4py' if runs[0] is None else 'shoal'})")
            continue
        real, ours = lines(runs[0].stdout), lines(runs[1].stdout)
        codes = f"exit {runs[0].returncode}/{runs[1].returncode}"
        if real == ours:
            same += 1
            print(f"{path}: same ({codes})")
        else:
            only_real = [x for x in real if x not in ours][:3]
            only_ours = [x for x in ours if x not in real][:3]
            print(f"{path}: differ ({codes}); only Charm4py's: {only_real}; only shoal's: {only_ours}")
    print(f"{same} of {total} programs print the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
