"""Charm4py's tests/benchmark/pingpong.py written for plain shoal: the baseline of
docs/charm4py.md's layer-against-shoal figure (`shoal run -n 2 THIS`)."""
import shoal
from time import time

NITER = 10000


class Ping(shoal.Chare):
    def __init__(self):
        self.neighbor = self.collection[1 - self.index[0]]

    def start(self, done):
        self.done, self.iter = done, 0
        self.t0 = time()
        self.neighbor.recv(3)

    def recv(self, data):
        if self.index[0] == 0:
            self.iter += 1
            if self.iter == NITER:
                self.done.send(time() - self.t0)
                return
        self.neighbor.recv(data)


def main(args):
    pings = shoal.Array(Ping, 2)
    for _ in range(2):
        done = shoal.Future()
        pings[0].start(done)
        print("ping pong time per iter (us)=", done.get() / NITER * 1e6)


shoal.start(main)
