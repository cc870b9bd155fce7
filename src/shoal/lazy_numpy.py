"""NumPy for shoal's own modules, imported when the program first uses it.

A PE whose program never touches an array should not pay NumPy's import (about 0.1 s, as
long as MPI's own start-up) nor its teardown. Shoal's modules write ``np`` from here
instead of ``import numpy as np``:

* until this process imports NumPy, ``np.ndarray``, ``np.integer`` and ``np.generic`` are a
  class that nothing is an instance of (no array can exist before NumPy does), so type
  tests on the message path cost what they did and load nothing;
* any other attribute (``np.empty``, ``np.dtype``) imports NumPy;
* whoever imports NumPy first (the program, a library, shoal itself), ``np`` becomes
  NumPy's namespace as that import ends, and the callbacks given to :func:`when_loaded`
  run then (the compiled core loads NumPy's C API in one).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["np", "when_loaded", "loaded"]


class _NoArray:
    """Stands for NumPy's array and scalar types until NumPy is imported: nothing is one."""


def _import(name: str) -> Any:
    """``np.<name>`` before NumPy was imported: import it (which fills ``np``), then look."""
    import numpy

    _link(numpy)  # already done by the watch below, unless NumPy came by an unusual loader
    return getattr(numpy, name)


_placeholder = ModuleType("numpy", "NumPy, imported when first used (shoal.lazy_numpy)")
_placeholder.__dict__.update(ndarray=_NoArray, integer=_NoArray, generic=_NoArray, __getattr__=_import)

if TYPE_CHECKING:
    import numpy as np
else:
    np = _placeholder

_numpy: ModuleType | None = None  # NumPy, once imported
_callbacks: list[Callable[[ModuleType], None]] = []


def loaded() -> bool:
    """Whether this process has imported NumPy (``np`` is then NumPy's namespace)."""
    return _numpy is not None


def when_loaded(callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(numpy)`` once NumPy is imported: now, if it already is."""
    if _numpy is None:
        _callbacks.append(callback)
    else:
        callback(_numpy)


def _link(numpy: ModuleType) -> None:
    """NumPy's import ended: ``np`` becomes its namespace; the callbacks run."""
    global _numpy
    if _numpy is not None:
        return
    _placeholder.__dict__.update(numpy.__dict__)
    # a name NumPy gains later (a submodule imported since, say) is found on NumPy itself
    _placeholder.__getattr__ = lambda name: getattr(numpy, name)  # type: ignore[method-assign]
    _numpy = numpy
    while _callbacks:
        _callbacks.pop(0)(numpy)


class _Watch:
    """A finder on ``sys.meta_path`` that sees ``numpy``'s import begin, and links ``np`` to
    the module as that import ends (the usual finders find it). A ``find_spec("numpy")``
    that imports nothing (a check for an optional package) leaves it in place."""

    searching = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "numpy" or self.searching:
            return None
        self.searching = True
        try:
            spec = importlib.util.find_spec(name)  # the other finders: this one says None now
        finally:
            self.searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                run(module)
            finally:  # the loader's own method again (a zip's loader serves its other modules too)
                vars(loader).pop("exec_module", None)
            if module.__name__ == "numpy":
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                _link(module)

        try:
            loader.exec_module = exec_module  # type: ignore[method-assign]
        except AttributeError:  # a loader that takes no attribute: np links at its first use instead
            pass
        return spec


if "numpy" in sys.modules:
    _link(sys.modules["numpy"])
else:
    sys.meta_path.insert(0, _Watch())
