"""shoal.lowlevel keeps the promises its docstrings make to the layers built on it (the
Charm4py layer, the stencil DSL, the benchmarks), checked here on the in-process
transport; the Charm4py suite checks them under mpiexec."""

from __future__ import annotations

import pytest

import shoal
from shoal import lowlevel
from shoal.errors import NotRunningError


class Probe(shoal.Chare):
    def plain(self) -> tuple:
        return lowlevel.may_block(), lowlevel.in_thread(), lowlevel.running_element() is self

    @shoal.threaded
    def threaded(self) -> tuple:
        return lowlevel.may_block(), lowlevel.in_thread(), lowlevel.running_element() is self

    @shoal.threaded
    def wait(self, fut: shoal.Future) -> object:
        return fut.get()

    def waiting(self) -> int:
        return lowlevel.threads_waiting_in(self)

    def watch(self, fut: shoal.Future) -> bool:
        self.got = None
        lowlevel.ask_owner(fut)
        fut.add_done_callback(lambda f: setattr(self, "got", f.result()))
        return lowlevel.owner_key(fut) is None

    def seen(self) -> object:
        return self.got

    def where(self) -> tuple:
        here = lowlevel.local_element(self.proxy)
        return here is self, lowlevel.local_branch(self.collection) is self


def run(main, pes: int = 2) -> int:
    return shoal.run(main, [], transport="inproc", pes=pes)


def test_outside_a_job_the_caller_may_block_and_nothing_runs():
    assert not lowlevel.in_job() and lowlevel.may_block() and not lowlevel.in_thread()
    assert lowlevel.running_element() is None
    with pytest.raises(NotRunningError, match="the layer's call"):
        lowlevel.job_key("the layer's call")


def test_who_may_block_where():
    seen = {}

    def main(args):
        p = shoal.Group(Probe)
        seen["main"] = lowlevel.may_block(), lowlevel.in_thread(), lowlevel.running_element()
        seen["plain"] = p[1].plain(ret=True).get()
        seen["threaded"] = p[1].threaded(ret=True).get()
        seen["job"] = lowlevel.in_job() and lowlevel.job_key() is lowlevel.job_key("again")
        shoal.exit()

    assert run(main) == 0
    assert seen == {"main": (True, False, None), "plain": (False, False, True), "threaded": (True, True, True),
                    "job": True}


def test_futures_made_resolved_and_passed_on():
    seen = {}

    def main(args):
        made = lowlevel.new_future()
        seen["origin"] = "in main" in made.origin
        lowlevel.resolve(made, 7)
        seen["value"] = lowlevel.has_value(made), lowlevel.outcome(made), made.get()
        failed = lowlevel.new_future()
        lowlevel.resolve(failed, lowlevel.Failure(ValueError("no")))
        passed = lowlevel.local_future("a copy of a failure")
        lowlevel.resolve(passed, lowlevel.outcome(failed))  # the error moves on, retrieved
        try:
            passed.result()
        except ValueError as exc:
            seen["failed"] = lowlevel.has_value(failed), str(exc)
        seen["owner"] = lowlevel.owner_key(made) is lowlevel.job_key()
        shoal.exit()

    assert run(main) == 0
    assert seen == {"origin": True, "value": (True, 7, 7), "failed": (False, "no"), "owner": True}


def test_a_handle_resolves_once_its_owner_is_asked():
    seen = {}

    def main(args):
        p = shoal.Group(Probe)
        fut = shoal.Future()
        seen["handle"] = p[1].watch(fut, ret=True).get()
        fut.send("here")
        shoal.quiescence().get()
        seen["value"] = p[1].seen(ret=True).get()
        shoal.exit()

    assert run(main) == 0
    assert seen == {"handle": True, "value": "here"}


def test_the_threads_an_element_waits_in():
    seen = {}

    def main(args):
        p = shoal.Group(Probe)
        fut = shoal.Future()
        waiting = p[1].wait(fut, ret=True)
        shoal.quiescence().get()
        seen["waiting"] = p[1].waiting(ret=True).get()
        fut.send("here")
        seen["value"] = waiting.get()
        seen["after"] = p[1].waiting(ret=True).get()
        shoal.exit()

    assert run(main) == 0
    assert seen == {"waiting": 1, "value": "here", "after": 0}


def test_elements_of_a_proxy_and_those_on_this_pe():
    seen = {}

    def main(args):
        g = shoal.Group(Probe)
        a = shoal.Array(Probe, (2, 2))
        seen["elements"] = [e.index for e in lowlevel.elements_of(lowlevel.union(a[1, 1], g, a[0, 0]))]
        seen["here"] = g.where(ret=True).get()
        seen["none"] = lowlevel.local_element(a[1, 1]) is None
        shoal.exit()

    assert run(main) == 0
    assert seen["elements"] == [(0, 0), (1, 1), 0, 1]
    assert seen["here"] == [(True, True), (True, True)] and seen["none"]
