"""Balancing rounds as their coordinator records them (tests/runtime/test_balancing_rounds.py).

Run as ``shoal run -n P --lb NAME [--lb-period auto] balancing_rounds.py CASE STEPS``;
prints ``RESULT ...`` lines. CASE ``stable``: the first quarter of the elements is ten
times as costly as the rest, every step; ``drift``: a band of a quarter of the elements
is, and it moves on by one element every step. Every element calls at_sync() every step.
The program imports no NumPy itself: a round that had to import it shows in its record.
"""

import sys
import time

import shoal
from shoal._runtime.context import current

N = 16  # elements


class Worker(shoal.Chare):
    def __init__(self, case):
        self.case = case
        self.done = None

    def _cost(self, k):
        i = self.index[0]
        hot = (i - k) % N < N // 4 if self.case == "drift" else i < N // 4
        return 0.002 if hot else 0.0002

    def step(self, k, done):
        end = time.perf_counter() + self._cost(k)
        while time.perf_counter() < end:  # stands for real work
            pass
        self.done = done
        self.at_sync()

    def resume_from_sync(self):
        self.contribute(None, shoal.reducers.nop, self.done)


#: the strategies' modules (round_strategy, the balancer's step that runs one, is not one)
STRATEGY_MODULES = {f"shoal._runtime.{name}" for name in ("strategy_registry", "strategies", "comm_strategy",
                                                           "strategy_reasons")}


def main(args):
    case, steps = args[1], int(args[2])  # args[0]: the program
    print("RESULT numpy_at_start", "numpy" in sys.modules)
    print("RESULT strategies_at_start", sorted(m.rpartition(".")[2] for m in sys.modules if m in STRATEGY_MODULES))
    workers = shoal.Array(Worker, N, args=(case,))
    for k in range(steps):
        f = shoal.Future()
        workers.step(k, f)
        f.get()
    history = current().balancer.history
    print("RESULT rounds", len(history))
    print("RESULT imported", [r.imported for r in history])
    print("RESULT periods", [r.period for r in history])
    print("RESULT phases", all(r.ready <= r.decided <= r.finished for r in history))
    # ms from the last READY report to the plan, and to the RESUME, of each round
    print("RESULT plan_ms", [round((r.decided - r.ready) * 1e3, 2) for r in history])
    print("RESULT resume_ms", [round((r.finished - r.ready) * 1e3, 2) for r in history])


shoal.start(main)
