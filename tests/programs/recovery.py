"""Automatic recovery (tests/runtime/test_checkpoint.py): a time loop that calls
``shoal.checkpoint_point_sync`` every step; with ``--die-at K`` the process of PE 1 kills
itself (SIGKILL) at step K of the first run, as a node failure would.

``recovery.py STEPS [--die-at K]``; prints ``RESULT`` lines: first the PE count, the last a
checksum that does not depend on it.
"""

import os
import signal
import time

import numpy as np

import shoal


class Part(shoal.Chare):
    def __init__(self):
        self.v = np.arange(1000, dtype=np.int64) * (self.index[0] + 1)

    def step(self, k, die_at, fut):
        if k == die_at and shoal.my_pe() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        self.v = (self.v * 7 + k) % 1000003
        self.contribute(int(self.v.sum()), shoal.reducers.sum, fut)


def main(args):
    steps = int(args[1])
    die_at = int(args[args.index("--die-at") + 1]) if "--die-at" in args else -1
    saved = shoal.restarted()
    print("RESULT pes", shoal.num_pes(), flush=True)
    if saved is None:
        parts, first, total, written = shoal.Array(Part, 6), 0, 0, 0
    else:
        parts, first, total, written = saved["parts"], saved["step"] + 1, saved["total"], saved["written"]
        die_at = -1  # the failure happened once
        print("RESULT restarted after step", saved["step"], flush=True)
    for k in range(first, steps):
        f = shoal.Future()
        parts.step(k, die_at, f)
        total = (total * 31 + f.get()) % (1 << 61)
        time.sleep(0.05)
        if shoal.checkpoint_point_sync(state={"parts": parts, "step": k, "total": total, "written": written + 1}):
            written += 1
    print("RESULT final", total, flush=True)


shoal.start(main)
