"""Recursive Fibonacci as nested shoal.pool.map tasks (serial below 12): the shoal
half of docs/charm4py.md's layer-against-shoal figure (`shoal run -n 2 THIS`)."""
import shoal, time

def fib(n):
    if n < 12:
        return fibs(n)
    return sum(shoal.pool.map(fib, [n - 1, n - 2]))

def fibs(n):
    return n if n < 2 else fibs(n - 1) + fibs(n - 2)

def main(args):
    for _ in range(3):
        t0 = time.perf_counter()
        r = fib(26)
        print("fib", r, "seconds", round(time.perf_counter() - t0, 4))

shoal.start(main)
