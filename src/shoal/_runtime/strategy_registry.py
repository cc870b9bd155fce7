"""The load-balancing strategies by name: the built-in ones and those a program registers.

``shoal run --lb NAME`` names a strategy; :func:`get_strategy` finds it, a user's
(:func:`register_strategy`) before a built-in of the same name. This module imports no
NumPy: a program registers its strategy at start-up on every PE, with or without
``--lb``, and a job that does not balance never loads NumPy or the built-in strategies
(``strategies.py``, ``comm_strategy.py``). Those load when a job first asks for one: at
start-up in a job with ``--lb`` (``round_log.prepare``).
"""

from __future__ import annotations

import re

from ..errors import ShoalError

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from .strategies import CommGraph

    #: a strategy: ``(loads, comm, placement, num_pes, pe_speeds, *, seed=0) -> placement``
    #: (strategies.py's docstring says what each is)
    Strategy = Callable[[np.ndarray, CommGraph, np.ndarray, int, np.ndarray], np.ndarray]

__all__ = ["BUILTIN", "REGISTERED", "builtin_strategy", "get_strategy", "register_strategy", "takes_sizes"]

#: the built-in strategies: each name is the function of that name in the module given
#: (of ``shoal._runtime``), imported with NumPy when a job first asks for it
BUILTIN = {"auto": "strategies", "greedy": "strategies", "refine": "strategies", "comm": "comm_strategy",
           "rotate": "strategies", "random": "strategies"}
#: the strategies the program registered, by name; one under a built-in's name replaces it
REGISTERED: dict[str, Strategy] = {}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def builtin_strategy(name: str) -> Strategy | None:
    """The built-in strategy ``name`` (importing its module, and NumPy), or None if none has that name."""
    module = BUILTIN.get(name) if isinstance(name, str) else None
    if module is None:
        return None
    import importlib

    return getattr(importlib.import_module("." + module, __package__), name)


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; an unknown name raises ShoalError listing the known ones."""
    fn = REGISTERED.get(name) if isinstance(name, str) else None
    if fn is None:
        fn = builtin_strategy(name)
    if fn is None:
        known = ", ".join(sorted({*BUILTIN, *REGISTERED}))
        raise ShoalError(f"unknown load-balancing strategy {name!r}; known strategies: {known} (add one with register_strategy)")
    return fn


def register_strategy(name: str, fn: Strategy, *, replace: bool = False) -> None:
    """Make ``fn`` available as load-balancing strategy ``name``. Registering the same
    function again is harmless; another function under a taken name needs ``replace=True``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ShoalError(f"strategy name must be a word like 'my_lb' (letters, digits, _ . -), not {name!r}")
    if not callable(fn):
        raise ShoalError(f"strategy {name!r} must be a function f(loads, comm, placement, num_pes, pe_speeds, *, seed=0), not {type(fn).__name__} {fn!r}")
    try:
        import inspect  # here: a PE that registers no strategy of its own never needs it

        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature to check
        sig = None
    if sig is not None:
        try:
            sig.bind(None, None, None, 1, None, seed=0)
        except TypeError as exc:
            raise ShoalError(f"strategy {name!r} must accept (loads, comm, placement, num_pes, pe_speeds, *, seed=0); {fn!r} does not: {exc}") from None
    taken = REGISTERED.get(name) or (builtin_strategy(name) if name in BUILTIN else None)
    if taken is not None and taken is not fn and not replace:
        raise ShoalError(f"a different strategy is already registered as {name!r}; pick another name or pass replace=True")
    REGISTERED[name] = fn


def takes_sizes(fn: Strategy) -> bool:
    """Whether strategy ``fn`` takes each element's state in bytes (a ``sizes`` keyword, as
    ``auto`` does). Read from its code object: ``inspect`` would cost the first round milliseconds."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    return "sizes" in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
