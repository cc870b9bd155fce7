"""Arrays lent to a send: no copy and no wait for the receiver, like MPI's ``Isend``.

A send has value semantics: it returns only when the caller may write its arrays again,
so a large array waits for its receiver (or is copied, when the receiver is busy; see
``_transport/rendezvous.py``). A program that sends many large arrays back to back,
as OSU's bandwidth window does, or that has work to do while they move, can instead
lend them::

    loan = shoal.lend(u)
    peer.take(loan)          # returns at once; the receiver gets a plain array
    ...                      # do not write u here
    await loan.returned      # u is yours again

What a loan promises is what ``MPI_Isend`` asks of its buffer: the array is not written
until ``loan.returned`` resolves. shoal knows when that is without help from the
transport: each send of a loan carries its own view of the array, and the loan is
returned when no message holds a view any more (sent, copied into a frame, or, on this
PE, copied for the receiver).
"""

from __future__ import annotations

import weakref

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    import numpy as np

from .._transport.rendezvous import LENT
from ..errors import ShoalError
from ..numpy_types import ndarray
from .context import current
from .futures import Future

__all__ = ["Loan", "lend"]

_PLAIN = frozenset("biufc")


def _received(array: np.ndarray) -> np.ndarray:
    """What a lent array is on the receiver: the array itself."""
    return array


class Loan:
    """An array lent to shoal's sends until :attr:`returned` resolves (see :func:`lend`)."""

    __slots__ = ("array", "returned", "_rt", "_out")

    def __init__(self, array: np.ndarray):
        if type(array) is not ndarray() or array.dtype.kind not in _PLAIN or not array.flags.c_contiguous:
            what = f"a {type(array).__name__}" if type(array) is not ndarray() else (
                f"an array of {array.dtype}" if array.dtype.kind not in _PLAIN else "a strided array")
            raise TypeError(f"shoal.lend() takes a C-contiguous NumPy array of numbers or bools, not {what}; "
                            "send other objects as they are (they are copied)")
        rt = current("shoal.lend()")
        self._rt = rt
        self.array = array
        #: resolves (with None) when no message holds the array any more
        self.returned = Future.local(rt, f"the return of a loan of {_shape(array)}")
        self._out = 0  # views of the array that messages hold

    def __reduce__(self) -> tuple:
        """A send encodes the loan: a fresh view of the array, watched until dropped."""
        if self.returned.done():
            raise ShoalError(f"PE {self._rt.pe}: this loan of {_shape(self.array)} was returned already; "
                             "lend the array again (shoal.lend) to send it once more")
        view = self.array.view()
        key = id(view)
        LENT.add(key)
        self._out += 1
        weakref.finalize(view, self._back, key)
        return (_received, (view,))

    def _back(self, key: int) -> None:
        """A message dropped its view (it may be inside the transport: act at the next step)."""
        LENT.discard(key)
        self._out -= 1
        if self._out == 0:
            self._rt.ready.append(self._settle)

    def _settle(self) -> None:
        if self._out == 0 and not self.returned.done():
            self.returned._resolve(None)

    def __repr__(self) -> str:
        state = "returned" if self.returned.done() else f"{self._out} message(s) hold it"
        return f"<Loan of {_shape(self.array)}: {state}>"


def _shape(array: np.ndarray) -> str:
    """How messages name a lent array."""
    return f"array{array.shape} of {array.dtype}"


def lend(array: np.ndarray) -> Loan:
    """Lend ``array`` to the sends it is passed to (as an argument, or a channel value):
    they neither copy it nor wait for the receiver, and the receiver gets a plain array.
    Do not write the array until the loan's ``returned`` future resolves."""
    return Loan(array)

