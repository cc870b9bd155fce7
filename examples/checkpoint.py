"""Checkpoint and restart: a time loop that can pick up where it stopped.

    shoal run -n 2 examples/checkpoint.py             # runs 20 steps, checkpoints every 5
    shoal run -n 2 examples/checkpoint.py --stop 12   # stops after step 12, as a crash would
    shoal run -n 3 --restart heat.ckpt examples/checkpoint.py   # resumes after step 9, on 3 PEs

Each element holds a slice of a 1-D heat equation; main keeps the step and the
Array's proxy in the checkpoint's state, so a restarted run finds both.
"""

import sys

import numpy as np

import shoal


class Slice(shoal.Chare):
    def __init__(self, n):
        self.u = np.zeros(n)
        if self.index[0] == 0:
            self.u[0] = 100.0  # a hot end

    def step(self, left_edge, right_edge, done):
        u = self.u
        padded = np.concatenate(([left_edge], u, [right_edge]))
        self.u = u + 0.25 * (padded[:-2] - 2 * u + padded[2:])
        self.contribute((self.index[0], float(self.u[0]), float(self.u[-1])), shoal.reducers.gather, done)

    def total(self):
        return float(self.u.sum())


def main(args):
    stop = int(args[args.index("--stop") + 1]) if "--stop" in args else None
    saved = shoal.restarted()
    if saved is None:
        slices, first = shoal.Array(Slice, 4, args=(1000,)), 0
        edges = [(0.0, 0.0)] * 4
    else:
        slices, first, edges = saved["slices"], saved["step"] + 1, saved["edges"]
        print(f"restarted after step {saved['step']} on {shoal.num_pes()} PEs")
    for k in range(first, 20):
        done = shoal.Future()
        for i in range(4):
            left = edges[i - 1][1] if i > 0 else 100.0
            right = edges[i + 1][0] if i < 3 else 0.0
            slices[i].step(left, right, done)
        edges = [(first_u, last_u) for _, first_u, last_u in done.get()]
        if k % 5 == 4:
            shoal.checkpoint_sync("heat.ckpt", state={"slices": slices, "step": k, "edges": edges})
        if stop is not None and k == stop:
            print(f"stopped after step {k}; resume with --restart heat.ckpt")
            sys.exit(0)
    heat = sum(slices.total(ret=True).get())
    print(f"checkpoint: OK (20 steps, heat {heat:.6f})")


shoal.start(main)
