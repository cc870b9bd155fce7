"""Load balancing: elements of uneven cost move between PEs to even out the work.

    shoal run -n 2 --lb greedy examples/balance.py

Sixteen elements, the expensive half on PE 0 (the block placement puts elements 0-7
there). Every ten steps each element calls ``at_sync()``; once all have, the runtime
moves elements by the strategy's placement and calls ``resume_from_sync()`` on each.
Without ``--lb`` the rounds resume at once and nothing moves.
"""

import time

import shoal


class Worker(shoal.Chare):
    def __init__(self):
        self.cost = 0.004 if self.index[0] < 8 else 0.001  # seconds of work per step

    def step(self, k, done):
        end = time.perf_counter() + self.cost
        while time.perf_counter() < end:  # stands for real work
            pass
        if k % 10 == 9:
            self.done = done
            self.at_sync()  # ready to move; the step ends in resume_from_sync()
        else:
            self.contribute(None, shoal.reducers.nop, done)

    def resume_from_sync(self):
        self.contribute(shoal.my_pe(), shoal.reducers.gather, self.done)


def main(args):
    workers = shoal.Array(Worker, 16)
    per_phase, placements = [], []
    for phase in range(3):
        start = time.perf_counter()
        for k in range(10 * phase, 10 * phase + 10):
            f = shoal.Future()
            workers.step(k, f)
            result = f.get()
        per_phase.append((time.perf_counter() - start) / 10)
        placements.append(result)
        heavy = sorted(set(result[:8]))
        print(f"steps {10 * phase:2d}-{10 * phase + 9:2d}: {per_phase[-1] * 1e3:5.1f} ms/step; "
              f"then the expensive elements are on PEs {heavy}")
    moved = placements[0][:8] != [0] * 8
    print(f"balance: OK ({'balanced' if moved else 'no strategy (--lb): nothing moved'}; "
          f"{per_phase[0] * 1e3:.1f} -> {per_phase[-1] * 1e3:.1f} ms/step)")


shoal.start(main)
