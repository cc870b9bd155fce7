"""``shoal bench scale``: issue 19's cost-at-scale figures, measured side by side.

* ``elements``: an Array of ``--elements`` trivial elements on ``-n`` PEs (a real MPI
  job, :mod:`.worker`): the time to create it and answer its first ``ret=True``
  broadcast, resident memory per element, and the time per element of further
  broadcasts (``ret=True``, completed by a ``nop`` reduction, and by a ``sum`` of floats),
  medians of ``--trials``.
* ``startup``: ``shoal run -n P hello.py`` against ``mpiexec -n P python -c "from mpi4py
  import MPI"``, interleaved, ``--trials`` each: medians with bootstrap 95% CIs, and the
  ratio of medians; also the same PEs under ``mpiexec`` without shoal's launcher (the
  launcher's own share), and mpi4py with ``import numpy`` first (where a program that
  uses NumPy starts from: shoal imports it only when the program does).
* ``broadcast``: a ``ret=True`` broadcast to a Group answered by every element
  (:mod:`.ret_broadcast`) against mpi4py's ``Bcast`` + ``Gather`` of 8 bytes
  (:mod:`.bcast_gather`), each the best of 5 repeats of ``--calls`` calls, the two jobs
  interleaved ``--trials`` times: medians with bootstrap 95% CIs, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

__all__ = ["main"]

WORKER = Path(__file__).with_name("worker.py")
HELLO = 'import shoal\n\ndef main(args):\n    print("hello from PE", shoal.my_pe(), "of", shoal.num_pes())\n\nshoal.start(main)\n'


def _elements(ns: argparse.Namespace) -> int:
    from ...bench.stats import median
    env = dict(os.environ)
    if ns.lb:
        env["SHOAL_LB"] = ns.lb
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(ns.pes), str(WORKER), str(ns.elements), str(ns.trials)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        sys.stderr.write(proc.stdout + proc.stderr)
        return proc.returncode
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    n = r["elements"]
    print(f"elements: {n:,} on {r['pes']} PEs" + (f" (--lb {ns.lb}: elements keep load counters)" if ns.lb else ""))
    print(f"  create + first ret=True broadcast  {r['create_and_first_broadcast_s']:.3f} s")
    print(f"  resident memory per element        {r['bytes_per_element']:.0f} B")
    print(f"  the same, after the reductions     {r['bytes_per_element_after_reductions']:.0f} B")
    print(f"  ret=True broadcast, per element    {median(r['ret_broadcast_s']) / n * 1e9:.1f} ns  (median of {ns.trials})")
    print(f"  broadcast + nop reduction, per el. {median(r['nop_broadcast_s']) / n * 1e9:.1f} ns  (median of {ns.trials})")
    print(f"  broadcast + sum of floats, per el. {median(r['sum_broadcast_s']) / n * 1e9:.1f} ns  (median of {ns.trials})")
    if ns.json:
        print(json.dumps(r))
    return 0


def _broadcast(ns: argparse.Namespace) -> int:
    from ...bench.stats import median, median_ci, ratio_ci, ratio_of_medians
    from ...bytecode import bytecode_status
    from ...launcher import find_mpiexec

    here = Path(__file__).parent
    commands = {
        "shoal ret=True broadcast": [sys.executable, "-m", "shoal", "run", "-n", str(ns.pes),
                                     str(here / "ret_broadcast.py"), str(ns.calls)],
        "mpi4py Bcast + Gather": [find_mpiexec(None), "-n", str(ns.pes), sys.executable,
                                  str(here / "bcast_gather.py"), str(ns.calls)],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(ns.trials):
        for name, cmd in commands.items():
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            found = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("us_per_call ")]
            if proc.returncode or not found:
                sys.stderr.write(f"{' '.join(cmd)} failed (exit code {proc.returncode}):\n{proc.stdout}{proc.stderr}")
                return proc.returncode or 1
            times[name].append(float(found[0]))
    print(f"8-byte ret=True broadcast on {ns.pes} PEs, {ns.trials} interleaved trials "
          f"(best of 5 repeats of {ns.calls:,} calls each):")
    bytecode = bytecode_status()
    if not bytecode.startswith("current"):
        print(f"  note: shoal's bytecode is {bytecode}")
    for name, samples in times.items():
        ci = median_ci(samples, confidence=0.95)
        print(f"  {name:<26} median {median(samples):7.2f} us  95% CI [{ci.low:.2f}, {ci.high:.2f}]")
    names = list(commands)
    ratio = ratio_of_medians(times[names[0]], times[names[1]])
    ci = ratio_ci(times[names[0]], times[names[1]], confidence=0.95)
    print(f"  shoal / mpi4py: {ratio:.2f}x  95% CI [{ci.low:.2f}, {ci.high:.2f}]")
    return 0


def _startup(ns: argparse.Namespace) -> int:
    from ...bench.stats import median, median_ci, ratio_ci, ratio_of_medians
    from ...launcher import find_mpiexec

    mpiexec = find_mpiexec(None)
    with tempfile.TemporaryDirectory() as tmp:
        hello = Path(tmp) / "hello.py" if ns.program is None else ns.program.resolve()
        if ns.program is None:
            hello.write_text(HELLO)
        script = Path(sys.executable).with_name("shoal")  # the console script pip installed beside this Python
        shoal = [str(script)] if script.is_file() and os.access(script, os.X_OK) else [sys.executable, "-m", "shoal"]
        commands = {
            "shoal run": [*shoal, "run", "-n", str(ns.pes), str(hello)],
            "python -m shoal run": [sys.executable, "-m", "shoal", "run", "-n", str(ns.pes), str(hello)],
            # the PEs without shoal's launcher (they then watch each other over TCP, which
            # under shoal run the launcher does): near what the launcher's own process costs
            "mpiexec + shoal PEs": [mpiexec, "-n", str(ns.pes), sys.executable, "-m", "shoal", str(hello)],
            "mpiexec + mpi4py": [mpiexec, "-n", str(ns.pes), sys.executable, "-c", "from mpi4py import MPI"],
            "mpiexec + numpy + mpi4py": [mpiexec, "-n", str(ns.pes), sys.executable, "-c",
                                         "import numpy; from mpi4py import MPI"],
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for trial in range(ns.trials + 1):  # the first round warms the file cache and is dropped
            for name, cmd in commands.items():
                t = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
                elapsed = time.perf_counter() - t
                if proc.returncode:
                    sys.stderr.write(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
                    return proc.returncode
                if trial:
                    times[name].append(elapsed)
    print(f"start-up on {ns.pes} PEs, {ns.trials} interleaved trials (the command's wall time, from this process; "
          f"shoal run = {' '.join(commands['shoal run'][:-4])}; hello.py = {ns.program or 'a one-line hello'}):")
    for name, samples in times.items():
        ci = median_ci(samples, confidence=0.95)
        print(f"  {name:<24} median {median(samples):.3f} s  95% CI [{ci.low:.3f}, {ci.high:.3f}]")
    for base in ("mpiexec + mpi4py", "mpiexec + numpy + mpi4py"):
        ratio = ratio_of_medians(times["shoal run"], times[base])
        ci = ratio_ci(times["shoal run"], times[base], confidence=0.95)
        print(f"  shoal run / {base}: {ratio:.2f}x  95% CI [{ci.low:.2f}, {ci.high:.2f}]")
    return 0


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="shoal bench scale", description=__doc__.splitlines()[0])
    p.add_argument("what", nargs="?", choices=("elements", "startup", "broadcast", "all"), default="all")
    p.add_argument("-n", "--pes", type=int, default=2, help="PEs (2)")
    p.add_argument("--elements", type=int, default=1_000_000, help="elements: Array size (1000000)")
    p.add_argument("--trials", type=int, default=5, help="trials (5)")
    p.add_argument("--calls", type=int, default=20_000, help="broadcast: calls per repeat (20000)")
    p.add_argument("--lb", default="", help="elements: run with this load balancer set (elements then keep load counters)")
    p.add_argument("--json", action="store_true", help="elements: also print the job's JSON line")
    p.add_argument("--program", type=Path, default=None,
                   help="startup: the shoal program to start (a hello that prints one line)")
    ns = p.parse_args(argv)
    if ns.pes < 1 or ns.elements < 1 or ns.trials < 3 or ns.calls < 1:
        p.error("give -n >= 1, --elements >= 1, --trials >= 3 and --calls >= 1")
    if ns.program is not None and not ns.program.is_file():
        p.error(f"--program {ns.program}: no such file")
    code = 0
    if ns.what in ("elements", "all"):
        code = _elements(ns)
    if ns.what in ("startup", "all") and not code:
        code = _startup(ns)
    if ns.what in ("broadcast", "all") and not code:
        code = _broadcast(ns)
    return code
