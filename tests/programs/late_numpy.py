"""NumPy imported late: a job starts without it, and arrays work once anyone imports it.

Run by tests/base/test_late_numpy.py with ``shoal run -n 2`` (compiled core on and off). No
module here imports NumPy at its top. The runtime must not import it either: start-up,
entry methods, futures, reductions and broadcasts of plain values leave it unloaded on
every PE. Then PE 0's main imports NumPy and sends arrays to an element on PE 1, which
never imported it: each way an array travels (the compiled array path, a pickled
container, a large rendezvous message, a channel, an array reduction) must deliver
NumPy arrays there. Prints ``late numpy: OK`` last.
"""

from __future__ import annotations

import sys

import shoal

BIG = 400_000  # float64 elements: 3.2 MB, a rendezvous message


def loaded() -> bool:
    return "numpy" in sys.modules


class Worker(shoal.Chare):
    def __init__(self) -> None:
        self.ch = shoal.Channel(self, remote=self.collection[1 - shoal.my_pe()])

    def numpy_loaded(self) -> bool:
        return loaded()

    def plain(self, x: int) -> int:
        return x + 1

    async def total(self, value: int) -> int:
        return await self.allreduce(value)

    def take(self, a):  # type: ignore[no-untyped-def]
        """An array from PE 0: is it NumPy's, and what does it hold."""
        return type(a).__module__ + "." + type(a).__name__, float(a.sum()), a.shape

    def take_many(self, box: dict):  # type: ignore[no-untyped-def]
        return [type(v).__name__ for v in box["arrays"]], [float(v.sum()) for v in box["arrays"]]

    async def over_channel(self) -> tuple:
        """Element 0 sends an array; element 1 receives it (into nothing: a fresh array)."""
        if shoal.my_pe() == 0:
            import numpy as np

            self.ch.send(np.arange(10.0))
            return ()
        got = await self.ch.recv()
        return type(got).__name__, float(got.sum())

    async def array_sum(self):  # type: ignore[no-untyped-def]
        import numpy as np

        out = await self.allreduce(np.full(4, shoal.my_pe() + 1.0))
        return type(out).__name__, out.tolist()


def main(args: list) -> None:
    workers = shoal.Group(Worker)
    assert workers[1].plain(41, ret=True).get() == 42
    assert workers.total(3, ret=True).get() == [6, 6]
    assert workers.numpy_loaded(ret=True).get() == [False, False], "the runtime imported NumPy"
    assert not loaded()
    print("no NumPy at start-up: ok", flush=True)

    import numpy as np  # PE 0 only, after the runtime started

    assert workers.numpy_loaded(ret=True).get() == [True, False]
    assert workers[1].take(np.arange(5.0), ret=True).get() == ("numpy.ndarray", 10.0, (5,))
    assert workers[1].take(np.ones((3, 4), np.int32), ret=True).get() == ("numpy.ndarray", 12.0, (3, 4))
    assert workers[1].take(np.ones(BIG), ret=True).get() == ("numpy.ndarray", float(BIG), (BIG,))
    assert workers[1].take_many({"arrays": [np.ones(3), np.zeros(2, np.int8)]}, ret=True).get() == (
        ["ndarray", "ndarray"], [3.0, 0.0])
    assert workers.over_channel(ret=True).get() == [(), ("ndarray", 45.0)]
    assert workers.array_sum(ret=True).get() == [("ndarray", [3.0] * 4)] * 2
    print("arrays after a late import: ok", flush=True)
    print("late numpy: OK", flush=True)


if __name__ == "__main__":
    shoal.start(main)
