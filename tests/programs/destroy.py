"""shoal.destroy(): the elements go on every PE, later calls are dropped or fail, and a
collection destroyed before its creation reached a PE is never built there (tests/runtime/test_destroy.py)."""

import gc
import weakref

import shoal

alive = []  # (PE, weak reference) of each element made in this process


class Cell(shoal.Chare):
    def __init__(self):
        alive.append((shoal.my_pe(), weakref.ref(self)))
        self.hits = 0

    def hit(self):
        self.hits += 1

    def value(self):
        return self.index


class Probe(shoal.Chare):
    def live(self):
        gc.collect()
        return sum(r() is not None for pe, r in alive if pe == shoal.my_pe())


def main(args):
    n = shoal.num_pes()
    probe = shoal.Group(Probe)
    cells = shoal.Array(Cell, 4 * n)
    assert cells[1].value(ret=True).get() == (1,)
    assert sum(probe[p].live(ret=True).get() for p in range(n)) == 4 * n
    shoal.destroy(cells)
    cells[2].hit()  # dropped where it arrives
    try:
        cells[3].value(ret=True).get()
    except shoal.ShoalError as exc:
        assert "destroyed" in str(exc), exc
    else:
        raise AssertionError("a call to a destroyed collection returned")
    try:
        cells.value(ret=True).get()
    except shoal.ShoalError as exc:
        assert "destroyed" in str(exc), exc
    else:
        raise AssertionError("a broadcast to a destroyed collection returned")
    left = sum(probe[p].live(ret=True).get() for p in range(n))
    assert left == 0, f"{left} elements still alive after destroy"
    quick = shoal.Array(Cell, 2 * n)  # destroyed before its creation reaches every PE
    shoal.destroy(quick)
    shoal.destroy(quick)  # twice: nothing more
    shoal.quiescence().get()
    assert sum(probe[p].live(ret=True).get() for p in range(n)) == 0
    try:
        shoal.destroy(probe[0])
    except TypeError as exc:
        assert "Group or an Array" in str(exc)
    print("destroy: OK")


shoal.start(main)
