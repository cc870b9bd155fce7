"""A package's names loaded on first use (PEP 562): the one way shoal, shoal.lowlevel and
shoal.remote keep their start-up light while offering every name at the top."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["lazy_names"]


def lazy_names(package: str, namespace: dict, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` (whose globals are
    ``namespace``): name ``n`` comes from the module ``where[n]`` (relative to the
    package) on first use and is kept in ``namespace``; ``where[n] == "." + n`` is the
    submodule itself."""

    def __getattr__(name: str) -> Any:
        module_name = where.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        module = importlib.import_module(module_name, package)
        value = module if module_name == "." + name else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
