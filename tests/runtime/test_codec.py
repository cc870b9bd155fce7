"""The entry-method argument codec: the plain-array fast path and its fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from shoal._runtime.message import ARRAYS, KWARGS, decode_call, encode_call


def _travel(segments):
    """Copy segments as a transport would (into fresh writable memory)."""
    return [bytearray(memoryview(s).cast("B")) for s in segments]


@pytest.mark.parametrize(
    "args",
    [
        (np.arange(5.0),),
        (np.zeros((3, 4), np.float32), np.arange(7, dtype=np.int16)),
        (np.array(3.5),),
        (np.zeros(0),),
        (np.ones((2, 2), complex), np.array([True, False])),
        (np.arange(6, dtype=">i4"),),
    ],
)
def test_plain_arrays_skip_pickle_and_round_trip(args):
    flag, segments = encode_call(args, None)
    assert flag == ARRAYS
    assert len(segments) == 1 + len(args)
    assert all(s is a for s, a in zip(segments[1:], args))  # no copy at the sender
    out, kwargs = decode_call(flag, _travel(segments))
    assert kwargs is None and len(out) == len(args)
    for a, b in zip(args, out):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        assert b.flags.writeable


@pytest.mark.parametrize(
    "args",
    [
        (np.arange(5.0), 3),
        (np.array(["a", "b"]),),
        (np.zeros(2, [("x", "i4")]),),
        (np.array([1], "datetime64[D]"),),
        (1, "two", None),
        (),
    ],
)
def test_anything_else_is_pickled(args):
    # strided plain arrays are packed, not pickled: tests/runtime/test_strided.py
    flag, segments = encode_call(args, None)
    assert flag == 0
    out, _ = decode_call(flag, _travel(segments))
    assert len(out) == len(args)
    for a, b in zip(args, out):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        else:
            assert a == b


def test_keyword_arguments():
    flag, segments = encode_call((np.ones(2),), {"k": 5})
    assert flag == KWARGS
    args, kwargs = decode_call(flag, _travel(segments))
    assert kwargs == {"k": 5} and np.array_equal(args[0], np.ones(2))
