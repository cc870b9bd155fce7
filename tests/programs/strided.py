"""Strided faces over channels: a ring of 2-D blocks (and a 3-D one) that trade column
faces, the non-contiguous views ``u[:, 1]`` and ``u[:, 0]``, every round.

Run by tests/runtime/test_strided.py with ``shoal run -n N`` on the in-process transport and
under mpiexec (compiled core on and off). Each element sends its first and last
interior columns (strided views, packed by the send) and receives its ghost columns in
place (strided buffers: ``recv(into=u[:, 0])`` and a receive set of column views).
Rows of SMALL go in eager frames, rows of BIG are larger than the rendezvous threshold.
Prints ``strided: OK`` last.
"""

from __future__ import annotations

import numpy as np

import shoal

N, ROUNDS, SMALL, BIG = 4, 6, 7, 20_000


def value(i: int, r: int, rows: int) -> np.ndarray:
    """What element i's interior holds in round r: rows distinct, rounds distinct."""
    return 1000.0 * r + i + np.arange(rows) / rows


class Block(shoal.Chare):
    """A block of `rows` rows and 3 interior columns, ghost columns 0 and 4."""

    def __init__(self, rows: int):
        i = self.index[0]
        self.rows, self.r = rows, 0
        self.u = np.zeros((rows, 5))
        self.left = shoal.Channel(self, remote=self.collection[(i - 1) % N])
        self.right = shoal.Channel(self, remote=self.collection[(i + 1) % N])
        # a receive set whose buffers are the ghost columns: strided views of u
        self.set = shoal.ReceiveSet([self.left, self.right], [self.u[:, 0], self.u[:, 4]], then=self.landed)
        self.fut = None

    def _fill_and_send(self) -> None:
        self.u[:, 1:4] = value(self.index[0], self.r, self.rows)[:, None]
        self.left.send(self.u[:, 1])  # strided: packed by the send
        self.right.send(self.u[:, 3])

    def _check(self) -> None:
        i, r, rows = self.index[0], self.r, self.rows
        assert np.array_equal(self.u[:, 0], value((i - 1) % N, r, rows)), (i, r, "left ghost")
        assert np.array_equal(self.u[:, 4], value((i + 1) % N, r, rows)), (i, r, "right ghost")
        assert np.array_equal(self.u[:, 1], value(i, r, rows)), (i, r, "interior overwritten")

    async def by_recv(self) -> int:
        """ROUNDS rounds of recv(into=column view), awaited."""
        for self.r in range(ROUNDS):
            self._fill_and_send()
            got = await self.left.recv(into=self.u[:, 0])
            assert np.shares_memory(got, self.u), "recv(into=view) returned another array"
            await self.right.recv(into=self.u[:, 4])
            self._check()
        return ROUNDS

    def by_set(self, fut: shoal.Future) -> None:
        """ROUNDS rounds of the receive set, then a contribution to fut."""
        self.fut, self.r = fut, 0
        self._fill_and_send()
        self.set.post()

    def landed(self) -> None:
        self._check()
        self.r += 1
        if self.r == ROUNDS:
            self.contribute(self.r, shoal.reducers.sum, self.fut)
            return
        self._fill_and_send()
        self.set.post()

    async def plain(self) -> list:
        """A strided send received without into=: a C-ordered array of the face's values."""
        self.right.send(self.u[::2, 1])
        got = await self.left.recv()
        assert np.array_equal(got, value((self.index[0] - 1) % N, ROUNDS - 1, self.rows)[::2])
        return [bool(got.flags.c_contiguous), got.shape[0]]


class Cube(shoal.Chare):
    """3-D blocks in a ring along the last axis: faces u[:, :, 1] travel, u[:, :, 0] receives."""

    def __init__(self):
        i = self.index[0]
        self.u = np.zeros((6, 5, 4), dtype=np.float32)
        self.u[:, :, 1:3] = i + np.arange(30, dtype=np.float32).reshape(6, 5)[:, :, None]
        self.left = shoal.Channel(self, remote=self.collection[(i - 1) % N])
        self.right = shoal.Channel(self, remote=self.collection[(i + 1) % N])

    async def swap(self) -> bool:
        self.left.send(self.u[:, :, 1])
        self.right.send(self.u[:, :, 2])
        await self.left.recv(into=self.u[:, :, 0])
        await self.right.recv(into=self.u[:, :, 3])
        i = self.index[0]
        face = np.arange(30, dtype=np.float32).reshape(6, 5)
        return bool(np.array_equal(self.u[:, :, 0], (i - 1) % N + face)
                    and np.array_equal(self.u[:, :, 3], (i + 1) % N + face))


def place(i: int, n: int) -> int:
    return (i // 2) % n  # elements 0,1 on PE 0, 2,3 on PE 1: near and far channels


def main(args: list) -> None:
    for rows in (SMALL, BIG):
        blocks = shoal.Array(Block, N, args=(rows,), placement=place)
        assert blocks.by_recv(ret=True).get() == [ROUNDS] * N
        fut = shoal.Future()
        blocks.by_set(fut)
        assert fut.get() == N * ROUNDS
        assert blocks.plain(ret=True).get() == [[True, (rows + 1) // 2]] * N
        print(f"rows {rows}: ok", flush=True)
    cubes = shoal.Array(Cube, N, placement=place)
    assert cubes.swap(ret=True).get() == [True] * N
    shoal.quiescence().get()
    print("strided: OK", flush=True)


if __name__ == "__main__":
    shoal.start(main)
