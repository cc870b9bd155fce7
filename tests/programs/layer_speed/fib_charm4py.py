"""fib_shoal.py written for Charm4py: run it through the layer (`shoal run -n 2
--compat charm4py THIS`) and under Charm4py (`python -m charmrun.start +p2 THIS`)."""
from charm4py import charm, coro
import time

@coro
def fib(n):
    if n < 12:
        return fibs(n)
    return sum(charm.pool.map(fib, [n - 1, n - 2]))

def fibs(n):
    return n if n < 2 else fibs(n - 1) + fibs(n - 2)

def main(args):
    for _ in range(3):
        t0 = time.perf_counter()
        r = fib(26)
        print("fib", r, "seconds", round(time.perf_counter() - t0, 4))
    exit()

charm.start(main)
