"""Pure-logic units, no processes and no transport: trees, quiescence, headers and
payloads, reducers, settings."""

from __future__ import annotations

import math
import pickle
import struct
from collections import deque

import numpy as np
import pytest
from support.jobs import tree_levels

from shoal.errors import ReductionError
from shoal._runtime import message, tree
from shoal._runtime.message import (
    HEADER,
    Kind,
    decode,
    encode,
    pack_header,
    unpack_header,
)
from shoal._runtime.quiescence import Detector, combine_reports
from shoal._runtime.reducers import Reducer, as_reducer, reducers
from shoal._runtime.reductions import ALLREDUCE
from shoal.settings import Settings, load_settings


# -- spanning trees --------------------------------------------------------------


def check_tree(views: dict[int, tree.Tree], members: list[int], root: int, fanout: int) -> None:
    """``views`` maps each member PE to its Tree; check it is one spanning tree."""
    assert set(views) == set(members)
    n = len(members)
    parent_of: dict[int, int] = {}
    for pe, t in views.items():
        assert t.root == root and t.size == n, (pe, t)
        assert len(t.children) <= fanout, (pe, t)
        assert len(set(t.children)) == len(t.children), f"PE {pe} lists a child twice: {t}"
        for c in t.children:
            assert c in views and c != pe, f"PE {pe} has child {c} outside the tree: {t}"
            assert c not in parent_of, f"PE {c} is a child of both {parent_of[c]} and {pe}"
            parent_of[c] = pe
    assert views[root].parent == -1, f"root {root} has a parent: {views[root]}"
    for pe, t in views.items():
        if pe == root:
            assert pe not in parent_of, f"the root {root} is someone's child"
            continue
        assert pe in parent_of, f"PE {pe} is nobody's child"
        assert t.parent == parent_of[pe], f"PE {pe} names parent {t.parent}, but is the child of {parent_of[pe]}"
    # reachable from the root, and how deep
    depth = {root: 0}
    todo = deque([root])
    while todo:
        pe = todo.popleft()
        for c in views[pe].children:
            assert c not in depth, f"cycle through PE {c}"
            depth[c] = depth[pe] + 1
            todo.append(c)
    assert len(depth) == n, f"unreachable from the root: {sorted(set(members) - set(depth))}"
    if fanout >= 2:
        assert max(depth.values()) == tree_levels(n, fanout), (n, fanout, max(depth.values()))
        assert max(depth.values()) <= math.ceil(math.log(n, fanout)) + 1


TREE_CASES = [(n, root, k) for n in [1, 2, 3, 4, 5, 7, 8, 16, 17, 63, 64, 65, 100, 257] for k in [1, 2, 3, 4, 8] for root in sorted({0, 1 % n, n // 2, n - 1})]


@pytest.mark.parametrize("npes,root,fanout", TREE_CASES)
def test_all_pes_is_a_spanning_tree(npes, root, fanout):
    views = {pe: tree.all_pes(npes, root, pe, fanout) for pe in range(npes)}
    check_tree(views, list(range(npes)), root, fanout)


def test_all_pes_depth_is_logarithmic_at_scale():
    n, k = 10_000, 4
    depth = 0
    pe = n - 1
    while pe != -1:  # walk up from the last PE
        pe = tree.all_pes(n, 0, pe, k).parent
        depth += 1
    assert depth - 1 == tree_levels(n, k) <= 7


@pytest.mark.parametrize(
    "members",
    [[5], [0, 1], [3, 7, 8, 20, 21, 50], list(range(0, 200, 7)), [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31], list(range(10, 74))],
)
@pytest.mark.parametrize("fanout", [1, 2, 3, 4, 8])
def test_over_sparse_members(members, fanout):
    views = {pe: tree.over(members, pe, fanout) for pe in members}
    check_tree(views, members, members[0], fanout)
    outsiders = [pe for pe in range(-1, max(members) + 3) if pe not in members]
    for pe in outsiders:
        assert tree.over(members, pe, fanout) is None, f"PE {pe} is not a member but got a tree"


def test_over_non_members_and_empty():
    assert tree.over([], 0, 4) is None
    assert tree.over([4, 9], 5, 4) is None
    assert tree.over([4, 9], 10, 4) is None
    assert tree.over([4, 9], 3, 4) is None


def test_over_full_range_agrees_with_all_pes():
    for n in (1, 6, 33):
        for k in (2, 4):
            for pe in range(n):
                a, b = tree.over(range(n), pe, k), tree.all_pes(n, 0, pe, k)
                assert (a.root, a.parent, a.children, a.size) == (b.root, b.parent, b.children, b.size)


# -- quiescence --------------------------------------------------------------------
class Waiter:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


def test_quiet_needs_two_equal_balanced_waves():
    d = Detector()
    a, b = Waiter("a"), Waiter("b")
    assert d.request(a) is True and d.running and d.wave == 1
    assert d.request(b) is False, "a second request while waves run must not start another series"
    assert d.report(1, (5, 5, False)) == ("again", [])
    assert d.wave == 2
    assert d.report(2, (5, 5, False)) == ("quiet", [a, b])
    assert not d.running and d.waiters == []


@pytest.mark.parametrize(
    "reports",
    [
        [(3, 3, False), (3, 3, True), (3, 3, False)],  # activity resets
        [(3, 3, True), (3, 3, True), (3, 3, True), (3, 3, False)],  # active all along
        [(4, 3, False), (4, 4, False)],  # imbalance: the first balanced wave starts over
        [(4, 3, False), (4, 3, False), (4, 4, False)],  # the same imbalance twice is not quiet
        [(3, 3, False), (4, 4, False)],  # counts moved between waves
        [(3, 3, False), (4, 3, False), (4, 4, False)],
        [(0, 0, True), (0, 0, False)],
    ],
)
def test_quiet_only_after_two_consecutive_equal_balanced_waves(reports):
    d = Detector()
    w = Waiter("w")
    d.request(w)
    for wave, r in enumerate(reports, start=1):
        assert d.report(wave, r) == ("again", []), f"wave {wave} {r} after {reports[:wave - 1]}"
        assert d.running and d.wave == wave + 1
    last = reports[-1]
    quiet = (last[0], last[1], False)
    assert last[0] == last[1] and not last[2]
    assert d.report(len(reports) + 1, quiet) == ("quiet", [w])


def test_stale_waves_are_ignored():
    d = Detector()
    w = Waiter("w")
    d.request(w)
    assert d.report(1, (2, 2, False)) == ("again", [])
    assert d.report(1, (2, 2, False)) == ("stale", []), "a repeated report of an old wave counted"
    assert d.report(7, (2, 2, False)) == ("stale", []), "a report of a future wave counted"
    assert d.wave == 2 and d.running
    assert d.report(2, (2, 2, False)) == ("quiet", [w])
    # after quiescence, nothing is running: any report is stale and returns no waiters
    assert d.report(2, (2, 2, False)) == ("stale", [])
    assert d.report(3, (2, 2, False)) == ("stale", [])


def test_waiters_are_returned_once_and_a_new_series_starts_fresh():
    d = Detector()
    a, b = Waiter("a"), Waiter("b")
    d.request(a)
    d.report(1, (1, 1, False))
    assert d.report(2, (1, 1, False)) == ("quiet", [a])
    assert d.request(b) is True, "a request after quiescence must start a new series"
    w = d.wave
    assert w == 3
    # the last balanced counts of the finished series must not make the first new wave quiet
    assert d.report(w, (1, 1, False)) == ("again", [])
    assert d.report(w, (1, 1, False)) == ("stale", [])
    assert d.report(w + 1, (1, 1, False)) == ("quiet", [b])
    assert d.waiters == []


def test_combine_reports():
    assert combine_reports([(1, 2, False), (3, 0, False), (0, 2, True)]) == (4, 4, True)
    assert combine_reports([(1, 1, False)]) == (1, 1, False)
    assert combine_reports([]) == (0, 0, False)


# -- headers -----------------------------------------------------------------------
INDICES = [(), (0,), (-1,), (2**63 - 1,), (-(2**63),), (1, -2, 3), tuple(range(-4, 4)), tuple(range(8)), (7, 10**12, -(10**15), 0, 5)]


@pytest.mark.parametrize("kind", list(Kind) + [Kind.INVOKE | 0x80, 255])
@pytest.mark.parametrize("index", INDICES)
def test_header_round_trip(kind, index):
    for entry, src, aux, coll in [(0, 0, 0, 0), (1, 3, 7, 99), (0xFFFF, 2**32 - 1, 2**32 - 1, 2**64 - 1), (513, 12345, 2**31, (5 << 32) | 17)]:
        data = pack_header(kind, entry, src, aux, coll, index)
        assert isinstance(data, bytes)
        assert len(data) == HEADER.size + 8 * len(index)
        assert unpack_header(data) == (kind, entry, src, aux, coll, tuple(index))


def test_header_index_of_every_rank_0_to_8():
    for n in range(9):
        index = tuple((-1) ** i * (3**i + i) for i in range(n))
        assert unpack_header(pack_header(Kind.CHANNEL, 2, 1, 3, 4, index))[5] == index


def test_header_rejects_what_it_cannot_hold():
    with pytest.raises((IndexError, struct.error, ValueError)):
        pack_header(Kind.INVOKE, 0, 0, 0, 0, tuple(range(9)))
    for bad in [{"entry": 0x10000}, {"src": -1}, {"aux": 2**32}, {"coll": 2**64}, {"index": (2**63,)}]:
        args = {"kind": Kind.INVOKE, "entry": 0, "src": 0, "aux": 0, "coll": 0, "index": ()} | bad
        with pytest.raises((struct.error, OverflowError)):
            pack_header(**args)


# -- payloads --------------------------------------------------------------------
def transported(segments: list) -> list:
    """What a receiver gets: a private copy of each segment."""
    return [bytearray(memoryview(s).cast("B")) for s in segments]


def test_encode_small_object_is_one_segment():
    obj = {"a": [1, 2.5, "x"], "b": (None, True)}
    segs = encode(obj)
    assert len(segs) == 1
    assert decode(transported(segs)) == obj


@pytest.mark.parametrize(
    "arr",
    [
        np.arange(1000, dtype=np.float64),
        np.arange(24, dtype=np.int32).reshape(2, 3, 4),
        np.array([True, False, True]),
        np.array([1 + 2j, 3 - 4j], dtype=np.complex64),
        np.arange(10, dtype=">i4"),  # non-native byte order
        np.arange(5, dtype=np.int8) - 3,
        np.array(3.5),  # 0-d
        np.empty((0, 3)),  # empty
        np.asfortranarray(np.arange(12.0).reshape(3, 4)),
    ],
    ids=["f8", "i4-3d", "bool", "c8", ">i4", "i8", "0d", "empty", "fortran"],
)
def test_arrays_round_trip(arr):
    segs = encode(arr)
    got = decode(transported(segs))
    assert isinstance(got, np.ndarray)
    assert got.dtype == arr.dtype and got.shape == arr.shape
    assert np.array_equal(got, arr)


def test_arrays_travel_out_of_band_and_are_rebuilt_on_received_memory():
    a = np.arange(100_000, dtype=np.float64)
    b = np.ones((50, 40), dtype=np.int16)
    segs = encode({"a": a, "nested": [1, ("b", b)], "s": "text"})
    assert len(segs) == 3, "each NumPy array must be an out-of-band segment of its own"
    assert len(segs[0]) < 1000, f"the pickle stream holds the array data ({len(segs[0])} bytes)"
    assert np.shares_memory(np.frombuffer(segs[1], np.uint8), a), "encode copied the array instead of pointing at it"
    received = transported(segs)
    got = decode(received)
    assert got["s"] == "text" and got["nested"][0] == 1 and got["nested"][1][0] == "b"
    assert np.array_equal(got["a"], a) and np.array_equal(got["nested"][1][1], b)
    assert got["nested"][1][1].dtype == np.int16 and got["nested"][1][1].shape == (50, 40)
    assert np.shares_memory(got["a"], np.frombuffer(received[1], np.uint8)), "decode copied the received array"


@pytest.mark.parametrize("dtype", ["datetime64[D]", "timedelta64[s]"])
def test_datetime_arrays_round_trip(dtype):
    arr = np.array([0, 1, 365], dtype="int64").astype(dtype)
    got = decode(transported(encode(arr)))
    assert got.dtype == arr.dtype and np.array_equal(got, arr)


def test_same_array_twice_and_non_contiguous_and_object_arrays():
    a = np.arange(30.0).reshape(5, 6)
    obj = [a, a, a[:, ::2], np.array([1, "x", None], dtype=object)]
    got = decode(transported(encode(obj)))
    assert np.array_equal(got[0], a) and np.array_equal(got[1], a)
    assert np.array_equal(got[2], a[:, ::2])
    assert list(got[3]) == [1, "x", None]


def test_encoder_state_does_not_leak_between_messages():
    a = np.arange(10)
    first = encode([a, "x"])
    second = encode([a, "x"])
    assert bytes(first[0]) == bytes(second[0]), "the memo of one message leaked into the next"
    assert np.array_equal(decode(transported(first))[0], a)
    assert np.array_equal(decode(transported(second))[0], a)


class Nested:
    """An object whose pickling itself encodes (re-enters the shared encoder)."""

    def __init__(self, inner):
        self.inner = inner

    def __reduce__(self):
        segs = message.encode(self.inner)
        return _rebuild_nested, ([bytes(memoryview(s).cast("B")) for s in segs],)


def _rebuild_nested(segs):
    return Nested(decode(segs))


def test_encode_is_reentrant():
    payload = {"x": Nested([np.arange(5), "deep"]), "y": np.arange(3.0)}
    got = decode(transported(encode(payload)))
    assert np.array_equal(got["x"].inner[0], np.arange(5)) and got["x"].inner[1] == "deep"
    assert np.array_equal(got["y"], np.arange(3.0))


def test_structured_array_keeps_its_fields():
    a = np.zeros(3, dtype=[("x", "<i4"), ("y", "<f8")])
    a["x"] = [1, 2, 3]
    got = decode(transported(encode(a)))
    assert got.dtype == a.dtype, f"sent {a.dtype}, received {got.dtype}"
    assert list(got["x"]) == [1, 2, 3]


# -- reducers ----------------------------------------------------------------------
BUILTINS = ["sum", "product", "max", "min", "logical_and", "logical_or", "gather", "nop"]


def test_builtin_reducers_on_scalars():
    assert reducers.sum.combine([1, 2, 3, 4]) == 10
    assert reducers.sum.combine([0.5, 0.25]) == 0.75
    assert reducers.product.combine([2, 3, 4]) == 24
    assert reducers.max.combine([3, 9, -1]) == 9
    assert reducers.min.combine([3, 9, -1]) == -1
    assert reducers.logical_and.combine([True, 1, True]) is True
    assert reducers.logical_and.combine([True, 0, True]) is False
    assert reducers.logical_or.combine([0, False, 2]) is True
    assert reducers.logical_or.combine([0, False]) is False
    assert reducers.gather.combine([[1], [2, 3], []]) == [1, 2, 3]
    assert reducers.gather.ordered and not reducers.sum.ordered
    assert reducers.nop.combine([1, 2]) is None
    assert reducers.sum.combine([7]) == 7


@pytest.mark.parametrize(
    "name,expected",
    [
        ("sum", [6.0, -2.0, 7.5]),
        ("product", [6.0, -0.0, 5.0]),
        ("max", [3.0, 1.0, 5.0]),
        ("min", [1.0, -3.0, 0.5]),
    ],
)
def test_builtin_reducers_on_arrays_are_element_wise(name, expected):
    values = [np.array([1.0, 0.0, 2.0]), np.array([2.0, 1.0, 5.0]), np.array([3.0, -3.0, 0.5])]
    kept = [v.copy() for v in values]
    got = getattr(reducers, name).combine(values)
    assert isinstance(got, np.ndarray) and got.shape == (3,)
    assert np.allclose(got, expected)
    for v, k in zip(values, kept):
        assert np.array_equal(v, k), "a reducer modified a contribution in place"
    assert not any(np.shares_memory(got, v) for v in values), "the result aliases a contribution"


def test_logical_reducers_on_arrays():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert list(reducers.logical_and.combine([a, b])) == [True, False, False, False]
    assert list(reducers.logical_or.combine([a, b])) == [True, True, True, False]


def test_multidimensional_arrays_reduce_element_wise():
    vals = [np.full((4, 5), float(i)) for i in range(1, 5)]
    assert np.array_equal(reducers.sum.combine(vals), np.full((4, 5), 10.0))
    assert np.array_equal(reducers.max.combine(vals), np.full((4, 5), 4.0))


@pytest.mark.parametrize(
    "values",
    [
        [np.arange(3), np.arange(1)],  # would broadcast
        [np.arange(3), np.arange(4)],
        [np.ones((2, 3)), np.ones(3)],  # would broadcast
        [np.ones(6), np.ones((2, 3))],  # same size, other shape
        [np.arange(3), 5],  # array then scalar: would broadcast
        [np.arange(3), [1, 2, 3]],
    ],
    ids=["3-1", "3-4", "2x3-3", "6-2x3", "array-scalar", "array-list"],
)
@pytest.mark.parametrize("name", ["sum", "product", "max", "min", "logical_and", "logical_or"])
def test_mismatched_shapes_are_a_reduction_error(name, values):
    with pytest.raises(ReductionError, match="element-wise"):
        getattr(reducers, name).combine(values)


@pytest.mark.parametrize("name", ["sum", "max"])
def test_scalar_before_array_is_a_reduction_error_too(name):
    try:
        result = getattr(reducers, name).combine([5, np.arange(3)])
    except ReductionError:
        return
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{type(exc).__name__} instead of ReductionError: {exc}") from None
    raise AssertionError(f"[5, array] was broadcast to {result!r} instead of a ReductionError")


def module_level_combine(values):
    return sorted(values)[len(values) // 2]


def test_as_reducer_on_custom_function():
    r = as_reducer(module_level_combine)
    assert isinstance(r, Reducer)
    assert r.combine is module_level_combine
    assert r.name.endswith("module_level_combine") and r.name != "module_level_combine"
    assert not r.ordered
    assert r.combine([5, 1, 3]) == 3
    back = pickle.loads(pickle.dumps(r))
    assert back.name == r.name and back.combine is module_level_combine
    lam = as_reducer(lambda vs: max(vs) - min(vs))
    assert lam.combine([4, 9, 1]) == 8
    assert "<lambda>" in lam.name


def test_as_reducer_passes_reducers_through():
    for name in BUILTINS:
        assert as_reducer(getattr(reducers, name)) is getattr(reducers, name)


@pytest.mark.parametrize("bad", [5, "sum", None, [1, 2], 3.0])
def test_as_reducer_rejects_non_callables(bad):
    with pytest.raises(TypeError, match="shoal.reducers"):
        as_reducer(bad)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_reducers_pickle_by_name(name):
    r = getattr(reducers, name)
    data = pickle.dumps(r, protocol=5)
    assert len(data) < 100 and b"combine" not in data, "a built-in reducer pickled by value"
    assert pickle.loads(data) is r
    assert decode(transported(encode([r, r]))) == [r, r]


def test_allreduce_target_pickles_to_itself():
    assert pickle.loads(pickle.dumps(ALLREDUCE)) is ALLREDUCE


# -- settings ----------------------------------------------------------------------
ALL_VARS = [
    "SHOAL_TRACE",
    "SHOAL_TRACE_SUMMARY",
    "SHOAL_LB",
    "SHOAL_LB_PERIOD",
    "SHOAL_RESTART",
    "SHOAL_CHECKPOINT_EVERY",
    "SHOAL_CHECKPOINT_DIR",
    "SHOAL_TRANSPORT",
    "SHOAL_RECEIVE",
    "SHOAL_PES",
    "SHOAL_RENDEZVOUS_THRESHOLD",
    "SHOAL_FRAME_CAPACITY",
    "SHOAL_IDLE_SPIN",
    "SHOAL_IDLE_SLEEP_MAX",
    "SHOAL_IDLE_YIELD",
    "SHOAL_NATIVE",
    "SHOAL_MPI_THREADS",
    "SHOAL_DEADLOCK_TIMEOUT",
    "SHOAL_TREE_FANOUT",
    "SHOAL_HEAP_REUSE",
    "SHOAL_SHARED_COPY",
    "SHOAL_DEBUG",
    "SHOAL_DEVICE",
    "SHOAL_GPU_PATH",
    "SHOAL_GPU_CHUNK",
]


def test_defaults_and_unrelated_variables():
    s = load_settings(environ={"PATH": "/bin", "SHOALX": "1", "shoal_pes": "9", "SHOAL_MPIEXEC": "/opt/mpiexec"})
    assert s == Settings()
    assert s.transport == "" and s.pes == 1 and s.tree_fanout == 4


def test_environment_values_are_converted():
    s = load_settings(
        environ={
            "SHOAL_TRANSPORT": "inproc",
            "SHOAL_PES": "3",
            "SHOAL_RENDEZVOUS_THRESHOLD": "1024",
            "SHOAL_IDLE_SPIN": "0.5",
            "SHOAL_DEADLOCK_TIMEOUT": "2",
            "SHOAL_TREE_FANOUT": "2",
        }
    )
    assert (s.transport, s.pes, s.rendezvous_threshold, s.tree_fanout) == ("inproc", 3, 1024, 2)
    assert s.idle_spin == 0.5 and isinstance(s.deadlock_timeout, float) and s.deadlock_timeout == 2.0
    assert isinstance(s.pes, int)
    assert load_settings(environ={"SHOAL_TRANSPORT": "mpi"}).transport == "mpi"


def test_every_setting_has_a_variable():
    for var in ALL_VARS:
        assert var[len("SHOAL_"):].lower() in {f for f in Settings.__annotations__}
    assert len(ALL_VARS) == len(Settings.__annotations__)


def test_unknown_variable_is_rejected_with_the_valid_names():
    with pytest.raises(ValueError) as info:
        load_settings(environ={"SHOAL_PE": "2"})
    text = str(info.value)
    assert "SHOAL_PE=" in text
    for var in ALL_VARS:
        assert var in text, f"{var} missing from: {text}"


@pytest.mark.parametrize(
    "var,value",
    [
        ("SHOAL_PES", "two"),
        ("SHOAL_PES", "2.5"),
        ("SHOAL_PES", ""),
        ("SHOAL_RENDEZVOUS_THRESHOLD", "64k"),
        ("SHOAL_TREE_FANOUT", "four"),
        ("SHOAL_IDLE_SPIN", "fast"),
        ("SHOAL_DEADLOCK_TIMEOUT", "1s"),
    ],
)
def test_bad_values_are_rejected_naming_variable_and_value(var, value):
    with pytest.raises(ValueError) as info:
        load_settings(environ={var: value})
    assert var in str(info.value) and repr(value) in str(info.value)


@pytest.mark.parametrize("value", ["tcp", "MPI", "in-proc", " mpi"])
def test_bad_transport_is_rejected(value):
    with pytest.raises(ValueError, match="mpi, inproc") as info:
        load_settings(environ={"SHOAL_TRANSPORT": value})
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("pes", ["0", "-2"])
def test_pes_below_one_is_rejected(pes):
    with pytest.raises(ValueError, match="SHOAL_PES"):
        load_settings(environ={"SHOAL_PES": pes})


def test_tree_fanout_below_one_is_rejected():
    with pytest.raises(ValueError, match="SHOAL_TREE_FANOUT"):
        load_settings(environ={"SHOAL_TREE_FANOUT": "0"})


def test_overrides():
    s = load_settings(environ={"SHOAL_PES": "2", "SHOAL_TREE_FANOUT": "3"}, pes=5, transport="inproc")
    assert (s.pes, s.transport, s.tree_fanout) == (5, "inproc", 3)
    assert load_settings(environ={}, deadlock_timeout=0.3).deadlock_timeout == 0.3
    with pytest.raises(ValueError, match="rendezvous_threshold") as info:
        load_settings(environ={}, rendezvous_treshold=10)
    assert "'rendezvous_treshold'" in str(info.value)
    with pytest.raises(ValueError, match="mpi, inproc"):
        load_settings(environ={}, transport="shm")
    with pytest.raises(ValueError, match="at least 1 PE"):
        load_settings(environ={}, pes=0)


def test_reads_os_environ_by_default(monkeypatch):
    for var in ALL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SHOAL_PES", "4")
    assert load_settings().pes == 4
    monkeypatch.setenv("SHOAL_NOPE", "1")
    with pytest.raises(ValueError, match="SHOAL_NOPE"):
        load_settings()


def test_settings_are_frozen():
    s = load_settings(environ={})
    with pytest.raises(AttributeError):
        s.pes = 3  # type: ignore[misc]


@pytest.mark.parametrize("shape", [(7,), (2, 3), (4, 1, 3), (3, 5, 2, 2), (1, 1), (6, 4)])
def test_row_major_numbers_indices_as_numpy_does(shape):
    """A dense array's indices without NumPy (an array of chares needs none): every range
    [lo, hi) gives what np.unravel_index gives, as tuples of Python ints."""
    from shoal._runtime.collections import row_major

    n = math.prod(shape)
    assert list(row_major(shape)) == [tuple(int(i) for i in ix) for ix in np.ndindex(*shape)]
    for lo in range(n + 1):
        for hi in range(lo, n + 1):
            want = list(zip(*(c.tolist() for c in np.unravel_index(np.arange(lo, hi), shape))))
            got = list(row_major(shape, lo, hi))
            assert got == want, (shape, lo, hi)
            assert all(type(i) is int for ix in got for i in ix)


def test_a_block_pairs_its_values_with_their_indices():
    """A ret=True broadcast's run of values from one PE, some of which came separately."""
    from shoal._runtime.partials import PENDING, Block

    assert Block(4, ["a", PENDING, "c", "d"], (3, 3)).pairs() == [((1, 1), "a"), ((2, 0), "c"), ((2, 1), "d")]
    assert Block(2, [PENDING, "x"], (9,)).pairs() == [((3,), "x")]


def check_two_level(members: list[int], nodes: list[int], root: int, fanout: int) -> None:
    """The node-aware tree over ``members``: one spanning tree, with exactly one edge into
    each node other than the root's (so a broadcast crosses between nodes once per node)."""
    views = {pe: tree.over(members, pe, fanout, nodes) if root == members[0] else tree.all_pes(len(nodes), root, pe, fanout, nodes)
             for pe in members}
    parent_of: dict[int, int] = {}
    for pe, t in views.items():
        assert t is not None and t.root == root and t.size == len(members), (pe, t)
        assert len(t.children) <= 2 * fanout, (pe, t)
        for c in t.children:
            assert c in views and c not in parent_of, (pe, c, t)
            parent_of[c] = pe
    assert views[root].parent == -1 and root not in parent_of
    assert all(views[pe].parent == parent_of[pe] for pe in members if pe != root)
    reached, todo = {root}, [root]
    while todo:
        for c in views[todo.pop()].children:
            assert c not in reached
            reached.add(c)
            todo.append(c)
    assert reached == set(members)
    crossings = [(p, c) for c, p in parent_of.items() if nodes[p] != nodes[c]]
    assert len(crossings) == len({nodes[pe] for pe in members}) - 1, crossings
    assert all(nodes[c] != nodes[root] for _, c in crossings)


@pytest.mark.parametrize("npes,per_node,fanout", [(4, 2, 4), (7, 3, 2), (16, 4, 4), (17, 5, 3), (64, 8, 4), (10, 1, 2)])
@pytest.mark.parametrize("layout", ["block", "round-robin"])
def test_trees_across_nodes_cross_into_each_node_once(npes, per_node, fanout, layout):
    count = -(-npes // per_node)
    nodes = [pe // per_node if layout == "block" else pe % count for pe in range(npes)]
    for root in sorted({0, 1 % npes, npes // 2, npes - 1}):
        check_two_level(list(range(npes)), nodes, root, fanout)
    check_two_level(list(range(1, npes, 2)) or [0], nodes, (list(range(1, npes, 2)) or [0])[0], fanout)


def test_a_tree_on_one_node_is_the_flat_tree():
    one = [0] * 9
    for pe in range(9):
        flat, two = tree.all_pes(9, 4, pe, 3), tree.all_pes(9, 4, pe, 3, one)
        assert (flat.parent, flat.children) == (two.parent, two.children)


def test_blocks_go_to_pes_node_by_node_and_back_to_pe_order():
    from shoal._runtime import collections as colls
    from shoal._runtime.collections import CollectionInfo

    class C:
        __qualname__ = "C"

    info = CollectionInfo(1, C, "dense", (10,), 1, None, 0)
    try:
        colls.order_blocks([0, 1, 0, 1])  # round-robin over 2 nodes
        homes = [info.home((i,), 4) for i in range(10)]
        assert homes == [0, 0, 0, 2, 2, 1, 1, 1, 3, 3]  # blocks 0..3 on PEs 0, 2, 1, 3
        for pe in range(4):  # each PE's block is exactly the elements whose home it is
            lo, hi = info.block(pe, 4)
            assert [i for i in range(10) if homes[i] == pe] == list(range(lo, hi))
            assert [i for (i,) in info.local_indices(pe, 4)] == list(range(lo, hi))
        small = CollectionInfo(2, C, "dense", (2,), 1, None, 0)
        assert list(small.hosts(4)) == sorted({small.home((i,), 4) for i in range(2)})
        colls.order_blocks([0, 0, 1, 1])  # already node by node: PE order
        assert colls._block_pes is None
    finally:
        colls.order_blocks(None)
    assert [info.home((i,), 4) for i in range(10)] == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
