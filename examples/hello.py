"""Hello, shoal: a Group, a 2-D Array, broadcasts that return values, element proxies.

    shoal run -n 2 examples/hello.py                     # 2 MPI processes
    shoal run -n 2 --transport inproc examples/hello.py  # 2 PEs in one process

A chare is an object of a ``shoal.Chare`` subclass; its public methods are *entry
methods*. Calling one through a proxy sends a message; ``ret=True`` makes the call
return a ``shoal.Future`` of the method's return value.
"""

import shoal


class Greeter(shoal.Chare):
    """Used as a Group: one element per PE, indexed by the PE number."""

    def hello(self, who):
        return f"hello {who}, from Greeter[{self.index}] on PE {shoal.my_pe()} of {shoal.num_pes()}"


class Cell(shoal.Chare):
    """An element of a 2-D array; ``self.index`` is its ``(row, col)`` tuple."""

    def __init__(self, scale):
        # Constructor arguments come from Array(..., args=(...)); every element gets them.
        self.scale = scale

    def where(self):
        return self.index, shoal.my_pe()

    def value(self, offset):
        row, col = self.index
        return self.scale * (10 * row + col) + offset

    async def ask(self, other):
        # Proxies are ordinary values: pass them in messages, call them from any chare.
        # An ``async def`` entry method may ``await`` a future; the PE keeps serving
        # other messages meanwhile.
        answer = await other.value(0, ret=True)
        return f"Cell{list(self.index)} asked Cell{list(other.index)}: {answer}"


def main(args):
    npes = shoal.num_pes()

    # A Group: broadcast with ret=True -> a future of the list of results, in PE order.
    greeters = shoal.Group(Greeter)
    for line in greeters.hello("world", ret=True).get():
        print(line)
    # One element of the group: index it by PE number.
    print(greeters[npes - 1].hello("PE 0", ret=True).get())

    # A dense 2-D array of 2 x 3 elements, spread over the PEs in contiguous blocks.
    cells = shoal.Array(Cell, (2, 3), args=(2,))
    for index, pe in cells.where(ret=True).get():
        print(f"Cell{list(index)} lives on PE {pe}")

    # Element proxies: send several calls at once, then wait for all the answers.
    futures = [cells[r, c].value(100, ret=True) for r in range(2) for c in range(3)]
    values = shoal.gather(*futures).get()
    print("values:", values)
    assert values == [2 * (10 * r + c) + 100 for r in range(2) for c in range(3)]
    print(cells[0, 0].ask(cells[1, 2], ret=True).get())

    print(f"hello: OK ({npes} greeters, {cells.shape[0] * cells.shape[1]} cells)")


if __name__ == "__main__":
    shoal.start(main)
