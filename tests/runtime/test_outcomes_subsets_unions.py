"""Three runtime capabilities on their own (the Charm4py layer maps onto them):
a broadcast's every outcome (``proxy.method.outcomes()``), Groups over some PEs
(``shoal.Group(C, pes=...)``) and sections over several collections (``union``).
On the in-process transport, 4 PEs."""

from __future__ import annotations

import pytest

import shoal
from shoal._runtime.proxy import union


def run(main) -> None:
    assert shoal.run(main, [], transport="inproc", pes=4) == 0


class Odd(shoal.Chare):
    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.pe = shoal.my_pe()

    def check(self) -> int:
        i = self.index if isinstance(self.index, int) else self.index[0]
        if i % 2:
            raise KeyError(i)
        return i

    def where(self) -> int:
        return self.pe

    def who(self) -> str:
        return f"{self.tag}{self.index}"

    def add(self, target: shoal.Future, section: shoal.SectionProxy | None = None) -> None:
        i = self.index if isinstance(self.index, int) else self.index[0]
        self.contribute(i, shoal.reducers.sum, target, section)

    def gather(self, target: shoal.Future, section: shoal.SectionProxy) -> None:
        self.contribute(self.who(), shoal.reducers.gather, target, section)

    @shoal.threaded
    def total(self) -> int:
        return self.allreduce(1).get()


class Other(shoal.Chare):
    """A second class with a method of the same name, for unions of two classes."""

    def who(self) -> str:
        return f"other{self.index}"


# -- every outcome of a broadcast --------------------------------------------------

def test_outcomes_give_each_elements_value_or_error_in_index_order() -> None:
    def main(args: list) -> None:
        arr, grp = shoal.Array(Odd, 10), shoal.Group(Odd)
        got = arr.check.outcomes().get()
        assert [type(v) for v in got] == [int, KeyError] * 5
        assert got[::2] == [0, 2, 4, 6, 8] and [v.args[0] for v in got[1::2]] == [1, 3, 5, 7, 9]
        assert [v if isinstance(v, int) else "err" for v in grp.check.outcomes().get()] == [0, "err", 2, "err"]
        assert arr.section([2, 3, 4]).check.outcomes().get()[0::2] == [2, 4]
        assert arr.where.outcomes().get() == [i * 4 // 10 for i in range(10)]  # no error: the plain list

    run(main)


def test_a_plain_ret_broadcast_fails_with_the_first_error_when_elements_on_several_pes_raise() -> None:
    def main(args: list) -> None:
        arr = shoal.Array(Odd, 16)
        for _ in range(3):  # each time every PE has failing elements; the job goes on
            with pytest.raises(KeyError):
                arr.check(ret=True).get()
        assert arr.where(ret=True).get() == [i // 4 for i in range(16)]

    run(main)


def test_outcomes_are_for_broadcasts_and_multicasts() -> None:
    def main(args: list) -> None:
        with pytest.raises(TypeError, match="one element's call"):
            shoal.Array(Odd, 2)[0].check.outcomes()

    run(main)


# -- Groups over some PEs ----------------------------------------------------------

def test_a_group_over_some_pes_has_elements_broadcasts_and_reductions_only_there() -> None:
    def main(args: list) -> None:
        g = shoal.Group(Odd, args=("g",), pes=[3, 1])
        assert g.where(ret=True).get() == [1, 3]
        assert g.who(ret=True).get() == ["g1", "g3"]
        assert g[3].where(ret=True).get() == 3
        total = shoal.Future()
        g.add(total)
        assert total.get() == 4
        assert g.total(ret=True).get() == [2, 2]  # an all-reduce over the two elements
        with pytest.raises(IndexError, match=r"spans PEs \[1, 3\]"):
            g[2]
        assert shoal.Group(Odd, pes=range(4)).where(ret=True).get() == [0, 1, 2, 3]  # every PE: a plain Group

    run(main)


@pytest.mark.parametrize("pes", [[], [4], [-1]])
def test_a_group_over_no_pe_or_a_pe_that_is_not_there_is_refused(pes: list) -> None:
    def main(args: list) -> None:
        with pytest.raises(ValueError, match=r"in 0\.\.3"):
            shoal.Group(Odd, pes=pes)

    run(main)


# -- sections over several collections ------------------------------------------------

def test_a_union_multicasts_to_each_element_once_across_collections_and_classes() -> None:
    def main(args: list) -> None:
        a, g, o = shoal.Array(Odd, 6, args=("a",)), shoal.Group(Odd, args=("g",)), shoal.Array(Other, 3)
        u = union(a.section([0, 1, 2]), g.section([1, 2]), a.section([2, 5]), o[1])
        assert len(u) == 7  # a[2] once
        assert u.who(ret=True).get() == ["a(0,)", "a(1,)", "a(2,)", "a(5,)", "g1", "g2", "other(1,)"]
        assert a.union(g).who(ret=True).get()[-4:] == ["g0", "g1", "g2", "g3"]
        assert u.union(u).who(ret=True).get() == u.who(ret=True).get()  # each element once

    run(main)


def test_a_reduction_over_a_union_combines_every_member_whichever_collection() -> None:
    def main(args: list) -> None:
        a, g = shoal.Array(Odd, 8, args=("a",)), shoal.Group(Odd, args=("g",), pes=[0, 2])
        u = a.section(range(1, 8, 2)).union(g)
        total = shoal.Future()
        u.add(total, u)
        assert total.get() == (1 + 3 + 5 + 7) + (0 + 2)
        names = shoal.Future()
        u.gather(names, u)
        assert names.get() == ["a(1,)", "a(3,)", "a(5,)", "a(7,)", "g0", "g2"]
        with pytest.raises(TypeError, match="sparse array"):
            union(shoal.Array(Odd, ndims=1))

    run(main)
