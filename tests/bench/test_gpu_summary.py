""".ci/gpu_summary.py: issue 40's floor and targets, read from a ``.ci/gpu-check`` log.

The shoal figures come from the one GPU run kept in docs/gpu-runs/ (its real format);
the floor steps, which that run did not have, are written here as their scripts print
them, and a host run of ``shoal bench micro`` checks the OSU table's format still parses."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "gpu-runs" / "2026-11-26-h100-tests-messaging-jacobi3d.log"

spec = importlib.util.spec_from_file_location("gpu_summary", ROOT / ".ci" / "gpu_summary.py")
assert spec is not None and spec.loader is not None
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)

FLOOR = """== transfer-floor: timeout 120 mpiexec -n 2 python3 .ci/gpu_transfer_floor.py
# the per-message floor of each path, no shoal: half a ping-pong (us), and MB/s at that rate
     bytes     ipc us     ipc MB/s  staged us  staged MB/s
         8      125.0            0       90.0            0
   4194304      260.0        16132     1500.0         2796
== transfer-floor: exit 0 in 20 s
== d2d-copy: timeout 60 python3 -
single-process device-to-device copy, 4 MiB: 896000 MB/s
single-process device-to-device copy, 64 MiB: 1406000 MB/s
== d2d-copy: exit 0 in 1 s
== bw64-entry-ipc: timeout 90 python3 -m shoal bench micro bw -m 67108864:67108864
# Size      Bandwidth (MB/s)
67108864           183000.00
== bw64-entry-ipc: exit 0 in 5 s
== bw64-entry-staged: timeout 90 python3 -m shoal bench micro bw -m 67108864:67108864
# Size      Bandwidth (MB/s)
67108864             3200.00
== bw64-entry-staged: exit 0 in 9 s
"""


def _kept_run() -> str:
    """The kept run's log without its d2d-copy step, which printed GB/s as MB/s (since fixed)."""
    text = RUN.read_text()
    start = text.index("== d2d-copy: ")
    end = text.index("\n", text.index("== d2d-copy: exit")) + 1
    return text[:start] + text[end:]


def _targets(text: str) -> dict[str, tuple]:
    _, targets = summary.rows(summary.steps(text))
    return {row[0]: row for row in targets}


def test_the_kept_run_gives_each_target_its_ratio_and_verdict():
    rows = _targets(_kept_run() + FLOOR)
    assert rows["8 B IPC latency, entry"][1:] == ("282.9 µs", "floor 125.0 µs", "2.26x", "≤ 2x", "not met")
    assert rows["4 MiB IPC bandwidth, entry"][3:] == ("0.02x", "≥ 0.5x", "not met")
    assert rows["4 MiB GPU-direct ÷ host-staged bandwidth, channel"][3:] == ("5.44x", "≥ 3x", "met")
    assert rows["64 MiB GPU-direct ÷ host-staged bandwidth, entry"][3:] == ("57.19x", "≥ 10x", "met")
    assert rows["Jacobi3D 256³, direct halos ÷ mpi4py host-staged"][1:] == (
        "1.651 ms/step", "mpi4py host-staged 1.137 ms/step", "1.45x", "< 1x", "not met")


def test_the_floor_is_printed_beside_the_targets(tmp_path):
    log = tmp_path / "gpu-check.log"
    log.write_text(_kept_run() + FLOOR)
    proc = subprocess.run([sys.executable, str(ROOT / ".ci" / "gpu_summary.py"), str(log)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "8 B, two processes" in proc.stdout and "IPC 125.0 µs" in proc.stdout and "staged 90.0 µs" in proc.stdout
    assert "4 MiB, one process" in proc.stdout and "device copy 896000 MB/s" in proc.stdout


def test_a_log_without_figures_says_so_and_fails(tmp_path):
    log = tmp_path / "gpu-check.log"
    log.write_text("== env: nvidia-smi -L\nNVIDIA-SMI has failed\n== env: exit 9 in 0 s\n")
    proc = subprocess.run([sys.executable, str(ROOT / ".ci" / "gpu_summary.py"), str(log)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert "no transfer-floor or d2d-copy step" in proc.stdout and "no figure" in proc.stdout


@pytest.mark.mpi
def test_the_osu_tables_shoal_prints_parse():
    proc = subprocess.run([sys.executable, "-m", "shoal", "bench", "micro", "latency", "-m", "8:16", "-i", "50"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    table = summary.osu(proc.stdout.splitlines())
    assert sorted(table) == [8, 16] and all(v > 0 for v in table.values())
