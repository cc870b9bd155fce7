"""How the compiled path encodes what it sends (array descriptors, simple arguments) against
the Python reference.

Each program runs under real mpiexec twice where it says ``native``: with the compiled
core and with ``SHOAL_NATIVE=0``; both must give the same answers (test_native.py has
the calls and broadcasts).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.mpi

BOTH = pytest.mark.parametrize("native", ["1", "0"])


def test_compiled_descriptor_matches_python(mpi_job):
    job = mpi_job(
        """
        import numpy as np
        import shoal
        from shoal.native import load_native, native_status
        from shoal._runtime.message import _describe

        def main(args):
            m = load_native()
            assert m is not None, native_status()
            cases = [np.zeros(3, d) for d in ("?", "i1", "u2", "<i4", "i8", "f2", "f4", "f8", "c8", "c16", ">f8", ">i2")]
            cases += [np.zeros(()), np.zeros((0,)), np.zeros((2, 3, 4), np.float32), np.zeros((1,) * 8)]
            for a in cases:
                assert m.describe(a) == _describe(((a.dtype, a.shape),)), (a.dtype, a.shape)
            pair = (np.zeros(2, "i8"), np.zeros((3, 1), "f4"))
            assert m.describe(*pair) == _describe(tuple((a.dtype, a.shape) for a in pair))
            print("descriptors ok")

        shoal.start(main)
        """,
        n=1,
    )
    assert job.returncode == 0, job
    assert "descriptors ok" in job.stdout


#: simple values in tuples, nested: what the compiled pickle writes and reads
NESTED = [("x",), ("", "é∑😀", "a" * 255), ((0,), "done", (), 2.5), (((1, 2), (3, (4.5, None))), "n"),
          ((0, 1, 2, 3, 4),), ((),), tuple((i, str(i)) for i in range(16))]


class _Str(str):
    pass


def test_pickle_simple_gives_what_pickle_loads_back_and_declines_the_rest():
    """message.encode_call's compiled pickle: every tuple of None, bools, floats, 64-bit
    ints, short strs and tuples of them loads back equal, item types included; anything
    else is declined (None)."""
    import collections
    import math
    import pickle

    import numpy as np

    from shoal.native import load_native

    module = load_native()
    if module is None:
        pytest.skip("the compiled path is not available here")
    cases = [(), (None,), (True, False), (1.5, -0.0, math.inf), (0, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1),
             (2**63 - 1, -2**63), tuple(range(7)), (None, 3, 2.5, True, -7, 1e300), *NESTED]
    point = collections.namedtuple("point", "x y")
    declined = [(2**63,), (-2**63 - 1,), (np.float64(1.0),), (1, b"y"), ([1],), tuple(range(100)), ("a" * 256,),
                ("\ud800",), (_Str("s"),), (point(1, 2),), (((((((1,),),),),),),), (tuple(range(64)),), ((2**64,),)]
    for args in declined:
        assert module.pickle_simple(args) is None, args
    for args in cases:
        blob = module.pickle_simple(args)
        back = pickle.loads(blob)
        assert back == args and [type(a) for a in back] == [type(a) for a in args], (args, back)
        assert math.copysign(1, pickle.loads(module.pickle_simple((-0.0,)))[0]) == -1
    assert math.isnan(pickle.loads(module.pickle_simple((math.nan,)))[0])
    with pytest.raises(TypeError):
        module.pickle_simple([1, 2])


def test_unpickle_simple_reads_what_pickle_simple_writes_and_nothing_else():
    """The receiver's compiled reading of pickle_simple's streams gives what pickle.loads
    gives (types, -0.0 and nan included); any other stream, a truncated one or one with
    bytes after STOP, is declined (None) and left to pickle.loads."""
    import math
    import pickle

    from shoal.native import load_native

    module = load_native()
    if module is None:
        pytest.skip("the compiled path is not available here")
    cases = [(), (None,), (True, False), (1.5, -0.0, math.inf, -math.inf), (0, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1),
             (2**63 - 1, -2**63), tuple(range(7)), tuple(range(16)), (None, 3, 2.5, True, -7, 1e300), (5e-324,),
             *NESTED]
    for args in cases:
        blob = module.pickle_simple(args)
        back, ref = module.unpickle_simple(blob), pickle.loads(blob)
        assert _types(back) == _types(args), (args, back)
        assert back == ref == args and [type(a) for a in back] == [type(a) for a in args], (args, back)
        assert [repr(a) for a in back] == [repr(a) for a in args], (args, back)  # -0.0 stays -0.0
    assert math.isnan(module.unpickle_simple(module.pickle_simple((math.nan,)))[0])
    blob = module.pickle_simple((1, 2.5, None))
    nested = module.pickle_simple(((1, "ab"), 2))
    for other in [pickle.dumps((1, 2.5), 5), pickle.dumps(("x",), 5), pickle.dumps((), 2), blob[:-1], blob + b".",
                  blob[:-2] + b"t.", b"", b"\x80\x05.", bytearray(blob[:6]), nested[:-3] + b"\x86.",
                  nested.replace(b"\x8c\x02ab", b"\x8c\x09ab"), b"\x80\x05(J\x01\x00\x00\x00t.", b"\x80\x05JN\x00\x00\x00."]:
        assert module.unpickle_simple(other) is None, other
    assert module.unpickle_simple(bytearray(blob)) == (1, 2.5, None)
    with pytest.raises(TypeError):
        module.unpickle_simple(7)


def test_small_plain_arrays_travel_in_the_simple_pickle():
    """Small C-contiguous arrays of plain dtypes (inside tuples too) are written by the
    compiled pickle as message._rebuild_array of a bytearray: pickle.loads and the compiled
    reader both give fresh, writable arrays of the same dtype, shape and bytes; views that
    are not contiguous, object arrays and arrays too big for the stream are declined."""
    import pickle

    import numpy as np

    from shoal.native import load_native

    module = load_native()
    if module is None:
        pytest.skip("the compiled path is not available here")
    arrays = [np.arange(3.0), np.array(7, dtype=np.int32), np.zeros((2, 3), dtype=">u2"), np.ones((1, 1, 2, 1), dtype=bool),
              np.array([1 + 2j]), np.empty(0), np.arange(4, dtype=np.int8).reshape(2, 2)]
    for a in arrays:
        args = (a, ((3, a), "k"))
        blob = module.pickle_simple(args)
        assert blob is not None, a
        for back in (pickle.loads(blob), module.unpickle_simple(blob)):
            for got in (back[0], back[1][0][1]):
                assert type(got) is np.ndarray and got.dtype == a.dtype and got.shape == a.shape, (a, got)
                assert got.tobytes() == a.tobytes() and got.flags.writeable and not np.shares_memory(got, a)
            assert back[1][0][0] == 3 and back[1][1] == "k"
    for declined in (np.arange(10.0)[::2], np.array([None]), np.zeros(200), np.float64(1.0)):
        assert module.pickle_simple((declined,)) is None, declined
    blob = module.pickle_simple((np.arange(2.0),))
    for other in (blob.replace(b"_rebuild_array", b"_rebuild_arrax"), blob.replace(b"<f8", b"<f4"), blob.replace(b"R\x85.", b"\x85.")):
        assert module.unpickle_simple(other) is None, other


def _types(value: object) -> object:
    """The types in ``value``, nested as its tuples are."""
    return tuple(_types(v) for v in value) if type(value) is tuple else type(value)


@BOTH
def test_simple_arguments_arrive_as_sent(mpi_job, native):
    """None, bools, floats, 64-bit ints, short strs and tuples of them are pickled by the
    compiled send itself (simple_pickle.c); each arrives as the same value of the same
    type, and anything else (bigger ints, float, int and str subclasses, long strs, lists)
    still goes through pickle."""
    job = mpi_job(
        """
        import enum, math
        import numpy as np
        import shoal

        def _types(value):
            return tuple(_types(v) for v in value) if type(value) is tuple else type(value)

        class Colour(enum.IntEnum):
            RED = 1

        class Name(str):
            pass

        class Echo(shoal.Chare):
            def back(self, *args):
                return args

        def main(args):
            far = shoal.Array(Echo, 2)[1]
            cases = [
                (), (None,), (True, False), (0, -1, 1), (2**31 - 1, -2**31, 2**31, -2**31 - 1),
                (2**63 - 1, -2**63), (2**63, -2**63 - 1, 10**40),
                (0.0, -0.0, 1.5, -2.25e-300, 5e-324, 1.7976931348623157e308, math.inf, -math.inf),
                tuple(range(16)), (np.float64(2.5), np.int64(7), Colour.RED, 3, 4.0),
                ("", "total", "é😀"), ((0,), "done", (), 2.5), (((1, (2.5, None)), "x"),), ("y" * 300, [1, "z"]),
                (Name("n"), (1, Name("m"))),
            ]
            for sent in cases:
                got = far.back(*sent, ret=True).get()
                assert len(got) == len(sent), (sent, got)
                assert _types(got) == _types(sent), (sent, got)
                for w, h in zip(sent, got):
                    assert h == w and repr(h) == repr(w), (w, h)  # repr: -0.0 is not 0.0
            nan = far.back(math.nan, ret=True).get()[0]
            assert type(nan) is float and math.isnan(nan)
            print("simple ok")

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "simple ok" in job.stdout
