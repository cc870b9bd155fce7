"""``shoal bench checkpoint``: write and read bandwidth of checkpoints against np.save/np.load.

Two real MPI jobs of ``-n`` PEs (:mod:`.worker`): the first fills an Array with ``--gb``
of state, saves it with ``np.save`` (plus fsync) and then as a checkpoint, timing both;
the second restarts from that checkpoint and times the rebuild against ``np.load`` of
the same arrays. Files go to ``--dir`` (a temporary folder by default), removed after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

__all__ = ["main"]

WORKER = Path(__file__).with_name("worker.py")


def main(argv: Sequence[str]) -> int:
    from ...lowlevel import launch_mpi

    p = argparse.ArgumentParser(prog="shoal bench checkpoint", description=__doc__.splitlines()[0])
    p.add_argument("-n", "--pes", type=int, default=2, help="PEs (2)")
    p.add_argument("--gb", type=float, default=2.0, help="GB of element state (2)")
    p.add_argument("--elements", type=int, default=64, help="elements holding it (64)")
    p.add_argument("--trials", type=int, default=3, help="write trials, alternating which goes first (3)")
    p.add_argument("--dir", default=None, help="where the files go (default: a temporary folder, removed after)")
    p.add_argument("--mpiexec", default=None, help="launcher (default: $SHOAL_MPIEXEC, then PATH)")
    ns = p.parse_args(argv)
    if ns.gb <= 0 or ns.elements < 1 or ns.pes < 1 or ns.trials < 1:
        p.error("give --gb > 0, --elements >= 1, -n >= 1, --trials >= 1")
    folder = ns.dir or tempfile.mkdtemp(prefix="shoal-ckpt-bench-", dir=os.getcwd())
    try:
        code = launch_mpi([str(WORKER), "write", folder, str(ns.gb), str(ns.elements), str(ns.trials)], ns.pes, ns.mpiexec)
        if code:
            return code
        saved = os.environ.get("SHOAL_RESTART")
        os.environ["SHOAL_RESTART"] = os.path.join(os.path.abspath(folder), "ckpt")
        try:
            return launch_mpi([str(WORKER), "read", folder], ns.pes, ns.mpiexec)
        finally:
            if saved is None:
                os.environ.pop("SHOAL_RESTART", None)
            else:
                os.environ["SHOAL_RESTART"] = saved
    finally:
        if ns.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
