"""How a reduction's target travels up the tree: an element of the reduction's own
collection as (index, name, args), which every PE of that collection can rebuild, so a
REDUCE message carries no pickled proxy; any other target as itself."""

from __future__ import annotations

from support.jobs import run_inproc

import shoal
from shoal._runtime.context import current
from shoal._runtime.message import decode, encode
from shoal._runtime.proxy import EntryRef
from shoal._runtime.reductions import ALLREDUCE, _pack_target, _unpack_target


class W(shoal.Chare):
    def put(self, x):
        pass


class Other(shoal.Chare):
    def done(self, x):
        pass


def test_an_element_of_the_reductions_collection_travels_as_its_index_and_comes_back_equal():
    out: dict = {}

    def main(args):
        w, other = shoal.Array(W, 4), shoal.Group(Other)
        rt = current("test")
        domain = (w._info.id,)
        own = EntryRef(w[2], "put", (7,))
        packed = _pack_target(own, domain)
        out["packed"] = packed
        back = _unpack_target(decode(encode(packed)), domain, rt.infos)
        out["same"] = back == own and type(back.proxy) is type(own.proxy)
        foreign = EntryRef(other[1], "done")
        out["foreign"] = _pack_target(foreign, domain) is foreign
        out["allreduce"] = _unpack_target(_pack_target(ALLREDUCE, domain), domain, rt.infos) is ALLREDUCE
        fut = shoal.Future()
        out["future"] = _unpack_target(_pack_target(fut, domain), domain, rt.infos) == fut

    assert run_inproc(main, pes=2) == 0
    assert out["packed"] == ((2,), "put", (7,))
    assert out == {"packed": ((2,), "put", (7,)), "same": True, "foreign": True, "allreduce": True, "future": True}
