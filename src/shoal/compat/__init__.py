"""Compatibility layers: other systems' programs running unchanged on shoal.

``shoal run --compat charm4py prog.py`` (or ``python -m shoal --compat charm4py``)
calls :func:`install` before the program starts: ``import charm4py`` then gives
:mod:`shoal.compat.charm4py`, and Charm++'s own options leave ``sys.argv``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

__all__ = ["install", "LAYERS"]

LAYERS = ("charm4py",)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``name`` and ``name.*`` as the modules of shoal's layer ``target``."""

    def __init__(self, name: str, target: str):
        self.name, self.target = name, target

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name and not fullname.startswith(self.name + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        return importlib.import_module(self.target + spec.name[len(self.name):])

    def exec_module(self, module: Any) -> None:
        pass


def install(layer: str) -> None:
    """Make ``import <layer>`` give shoal's layer, and strip the layer's launcher options from sys.argv."""
    if layer not in LAYERS:
        raise ValueError(f"--compat {layer!r}: shoal has compatibility layers for {', '.join(LAYERS)}")
    target = f"{__name__}.{layer}"
    for name in [m for m in sys.modules if m == layer or m.startswith(layer + ".")]:
        del sys.modules[name]  # a real one imported before: the program must get shoal's
    sys.meta_path.insert(0, _Alias(layer, target))
    module = importlib.import_module(target)
    sys.argv[1:] = module.take_launcher_options(sys.argv[1:])
