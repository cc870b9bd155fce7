"""Refuse collections that cannot fit, stop a creation that is using up the node, and
give memory back after a burst.

``shoal.Array(W, 10**12)`` used to print "created", then grow every PE by about 170 MB/s
until the kernel killed it or the node swapped. :func:`check_fits` refuses, on the PE
that creates it, a dense array whose elements cannot fit in the node's available memory
at :data:`ELEMENT_BYTES` each (a floor: what each element's ``__init__`` allocates comes
on top). :class:`CreationWatch` then checks, while a PE makes its elements, that the node
keeps a reserve, so that elements whose ``__init__`` allocates much fail fast too.

A burst of messages (100k ``ret=True`` calls in flight) grows a PE's heap by hundreds of
megabytes that glibc's malloc keeps after they are freed: PE 0 stayed at 433 MiB after
the burst had drained, 100 MiB once trimmed, of which about 54 MiB is the MPI library's
(a plain mpi4py sender of 100k messages keeps as much). :func:`give_back` runs once a PE
has been idle a while after :data:`RELEASE_AFTER` messages: it shrinks the runtime's tables that
grew with the burst and hands the heap's free memory back to the system.
"""

from __future__ import annotations

__all__ = ["ELEMENT_BYTES", "RELEASE_AFTER", "RELEASE_IDLE", "available", "check_fits", "CreationWatch", "give_back"]

#: the least memory one element takes on its PE (an empty element of a plain class and
#: the runtime's entries for it: 305 bytes measured with 10**6 elements on 2 PEs)
ELEMENT_BYTES = 256
#: the memory a creation leaves the node, whatever its size: a PE that finds less than
#: this available while it makes its elements stops the job
RESERVE_FRACTION, RESERVE_MIN = 0.03, 256 << 20
#: the most elements made between two looks at the node's memory
EVERY = 4096
#: messages a process's PEs send and receive between two hand-backs of memory, each once
#: they have been idle for RELEASE_IDLE seconds (not while a burst waits for its replies; a
#: trim takes milliseconds)
RELEASE_AFTER, RELEASE_IDLE = 20_000, 0.05


def _meminfo() -> dict[str, int]:
    """/proc/meminfo's fields in bytes (empty where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[name] = int(parts[0]) * (1024 if parts[-1] == "kB" else 1)
    return out


def available() -> tuple[int, int] | None:
    """The node's available and total memory in bytes, or None where unknown."""
    info = _meminfo()
    if "MemAvailable" in info and "MemTotal" in info:
        return info["MemAvailable"], info["MemTotal"]
    return None


def _gb(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n < 2**40 else f"{n / 2**40:,.0f} TiB"


def check_fits(cls_name: str, shape: tuple, npes: int, pes_here: int) -> None:
    """Raise MemoryError if a dense array of ``shape`` cannot fit: its elements spread
    evenly, the ``pes_here`` PEs of this node hold their share at :data:`ELEMENT_BYTES`
    each, and that is more than the node has available."""
    n = 1
    for size in shape:
        n *= size
    need = -(-n * pes_here // npes) * ELEMENT_BYTES
    mem = available()
    if mem is None or need <= mem[0]:
        return
    raise MemoryError(
        f"shoal.Array({cls_name}, {shape[0] if len(shape) == 1 else shape}): {n:,} elements cannot fit: this node's "
        f"{pes_here} PE(s) would hold {-(-n * pes_here // npes):,} of them, at least {_gb(need)} at {ELEMENT_BYTES} "
        f"bytes each before what {cls_name}.__init__ allocates, and the node has {_gb(mem[0])} available; "
        "use fewer, larger elements (a few to a few tens per PE are enough to balance load)"
    )


class CreationWatch:
    """Looks at the node's memory as a PE makes elements, all its collections together.

    The caller counts ``made`` and calls :meth:`short` when it reaches ``next``. The
    stride between looks adapts to what elements cost: it doubles (up to :data:`EVERY`)
    while a stride takes under 2 ms, and halves when one takes over 20 ms, so elements
    that allocate gigabytes are looked at one by one and cheap ones every few thousand.
    The node must keep its reserve plus twice the memory the last stride took (the
    other PEs of the node grow meanwhile too)."""

    __slots__ = ("made", "next", "stride", "last", "when")

    def __init__(self) -> None:
        self.made = 0
        self.next = 1
        self.stride = 1
        self.last = -1  # the node's available memory at the last look (-1: none yet)
        self.when = 0.0

    def short(self, what: str) -> str | None:
        """None while the node keeps its reserve, else why the creation of ``what`` must stop."""
        from time import perf_counter

        now, mem = perf_counter(), available()
        if mem is None:
            self.next = -1  # nothing to look at here
            return None
        took = now - self.when
        if self.last >= 0 and took < 0.002:
            self.stride = min(EVERY, self.stride * 2)
        elif took > 0.02:
            self.stride = max(1, self.stride // 2)
        self.next = self.made + self.stride
        step = max(0, self.last - mem[0]) if self.last >= 0 else 0
        self.last, self.when = mem[0], now
        if mem[0] >= max(RESERVE_MIN, int(RESERVE_FRACTION * mem[1])) + 2 * step:
            return None
        return (f"making the elements of {what} used up this node's memory ({_gb(mem[0])} of {_gb(mem[1])} left "
                f"after {self.made:,} elements made on this PE); use fewer elements, or allocate less in their "
                "__init__")


def give_back(runtimes: list) -> None:
    """After a burst, as this process's PEs go idle: shrink the tables of futures that
    grew with it (a dict keeps its size when emptied) and trim the heap (glibc)."""
    for rt in runtimes:
        _shrink(rt.future_table.futures)
    _trim()


def _shrink(table: dict) -> None:
    """``table`` rebuilt at its present size, in place (others hold it), if it is mostly empty."""
    import sys

    if len(table) < 4096 and sys.getsizeof(table) > 1 << 17:
        items = list(table.items())
        table.clear()
        table.update(items)


_malloc_trim: object = None  # libc's malloc_trim once looked up; False where there is none


def _trim() -> None:
    """Hand the heap's free memory back to the system (glibc's ``malloc_trim(0)``)."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)  # type: ignore[operator]
