"""Ping-pong: two array elements bounce a NumPy array back and forth.

    shoal run -n 2 examples/pingpong.py [ROUNDS]
    shoal run -n 2 --transport inproc examples/pingpong.py

Element 0 sends the array to element 1 by calling its entry method ``ball``; element 1
sends it straight back, and so on. The last hop resolves a ``shoal.Future`` that
travelled along with the ball, so the main program learns when the rally is over.
Arguments are sent by value: each hop pickles the array, with NumPy data out of band;
arrays of at least SHOAL_RENDEZVOUS_THRESHOLD bytes (64 KiB by default) move
zero-copy by rendezvous.
"""

import time

import numpy as np

import shoal


class Player(shoal.Chare):
    def where(self):
        return shoal.my_pe()

    def ball(self, data, hops_left, done):
        if hops_left == 0:
            done.send(data)  # resolves the future on the PE that created it
            return
        other = self.collection[1 - self.index[0]]
        other.ball(data, hops_left - 1, done)


def rally(players, data, rounds):
    """The average time of one round trip of ``data`` over ``rounds`` round trips."""
    done = shoal.Future()
    start = time.perf_counter()
    players[0].ball(data, 2 * rounds, done)  # 2 hops = 1 round trip, ending at element 0
    back = done.get()
    elapsed = time.perf_counter() - start
    assert np.array_equal(back, data), "the ball came back changed"
    return elapsed / rounds


def main(args):
    rounds = int(args[1]) if len(args) > 1 else 200
    players = shoal.Array(Player, 2)  # block placement: with 2 PEs, element i is on PE i
    print(f"players on PEs {players.where(ret=True).get()}")

    for nbytes in (8, 1 << 20):
        data = np.arange(nbytes // 8, dtype=np.float64)
        n = rounds if nbytes < 65536 else max(rounds // 10, 2)  # fewer rounds for big arrays
        rally(players, data, 3)  # warm up
        rtt = rally(players, data, n)
        print(f"{nbytes:>8} bytes: {rtt * 1e6:9.1f} us per round trip (average of {n})")
    print("pingpong: OK")


if __name__ == "__main__":
    shoal.start(main)
