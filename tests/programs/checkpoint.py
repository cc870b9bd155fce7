"""Checkpoint and restart (tests/runtime/test_checkpoint.py).

``checkpoint.py STEPS [--at K] [--stop-after-checkpoint] [--full-disk]``: a time loop over
an Array; with ``--at K`` main checkpoints to ``ckpt`` after step K (and with
``--stop-after-checkpoint`` ends the job there, as a crash would); restarted (``shoal run
--restart ckpt``) it resumes after step K. Prints ``RESULT`` lines, the last one a
checksum that does not depend on the PE count.
"""

import sys

import numpy as np

import shoal


class Cell(shoal.Chare):
    def __init__(self, n):
        i = self.index[0]
        self.v = np.arange(n, dtype=np.int64) * (i + 1)
        self.small = np.array([i], dtype=np.int64)
        self.history = []
        self.ch = self.left = None

    def link(self, right, left):
        self.ch = shoal.Channel(self, remote=right, port="ring")
        self.left = shoal.Channel(self, remote=left, port="ring")

    def step(self, k, fut):
        self.v = (self.v * 3 + k + self.small[0]) % 1000003
        self.small += 1
        self.history.append(int(self.v.sum()))
        self.ch.send(self.v[:4].copy())  # lands in the right neighbour's inbox: it travels in checkpoints
        self.contribute(int(self.v.sum()), shoal.reducers.sum, fut)

    def inbox(self):
        return len(self.left.inbox)

    def digest(self):
        return int(self.v.sum()), int(self.small[0]), len(self.history)


def _changed(self, state):
    raise ValueError("this version of Cell keeps its numbers in 'values', not 'v'")


if "--changed-class" in sys.argv:  # a later version of the program, whose Cell cannot read the old state
    Cell.__setstate__ = _changed


def main(args):
    steps = int(args[1])
    at = int(args[args.index("--at") + 1]) if "--at" in args else -1
    saved = shoal.restarted()
    n = shoal.num_pes()
    if saved is None:
        cells = shoal.Array(Cell, 7, args=(50_000,))
        for i in range(7):
            cells[i].link(cells[(i + 1) % 7], cells[(i - 1) % 7])
        first, total = 0, 0
        shoal.quiescence().get()
    else:
        cells, first, total = saved["cells"], saved["step"] + 1, saved["total"]
        print("RESULT restarted", saved["step"], saved["note"], n)
    for k in range(first, steps):
        f = shoal.Future()
        cells.step(k, f)
        total = (total * 31 + f.get()) % (1 << 61)
        if k == at:
            if "--full-disk" in args:
                import resource
                import signal

                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
            m = shoal.checkpoint_sync("ckpt", state={"cells": cells, "step": k, "total": total, "note": "hi"})
            print("RESULT checkpointed", k, m["elements"], m["pes"])
            if "--stop-after-checkpoint" in args:
                shoal.exit(0)
    shoal.quiescence().get()  # the last step's channel messages are in (a reduction does not wait for them)
    inboxes = cells.inbox(ret=True).get()
    digests = cells.digest(ret=True).get()
    print("RESULT inboxes", inboxes)
    print("RESULT final", total, digests)


shoal.start(main)
