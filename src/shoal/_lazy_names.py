"""A package's names loaded on first use (PEP 562) and listed once: shoal, shoal.lowlevel
and shoal.remote keep their start-up light so while offering every name at the top.

The one list is the package's ``if _TYPE_CHECKING:`` block of ``from X import a, b as b``
lines. Type checkers and editors read those imports (names and types); a running program
never runs them (``_TYPE_CHECKING`` is False), and :func:`lazy_names` reads the same lines
from the package's source, the first time a name is missing, to load each name from its
module. Why so: a table of strings beside the imports wrote every name twice, kept in step
by a test; a stub (``__init__.pyi``) restates every signature of the package
in a second file; the imports themselves, run, would load the runtime at ``import shoal``.
The source is read with string operations, not ``ast`` or ``re`` (10-15 ms of imports
each, more than ``import shoal`` itself): one file read and a split, some 0.1 ms, paid by
a process the first time it asks the package for a name it does not hold. It needs the
package's source beside it, as every install of shoal has.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, Collection

__all__ = ["lazy_names", "names_in"]

#: the line that opens the block of names, at the start of a line of the package's source
BLOCK = "\nif _TYPE_CHECKING:"


def names_in(source: str) -> dict[str, tuple[str, str | None]]:
    """The names of the ``if _TYPE_CHECKING:`` block of a package's ``source``, in order:
    name -> (its module, relative to the package; the attribute, or None for ``from .
    import sub``, the submodule itself). The block is ``from X import a, b as b`` lines
    (parenthesized over several lines or not, comments allowed) and ends at the first line
    that is not indented; anything else in it is an error, not a guess."""
    start = source.find(BLOCK)
    if start < 0:
        raise ValueError(f"no {BLOCK.strip()!r} block at the start of a line")
    lines = []
    for line in source[start + len(BLOCK):].split("\n")[1:]:
        if line[:1].strip():
            break
        lines.append(line.partition("#")[0])
    first, *statements = " ".join(["", *lines]).replace("(", " ").replace(")", " ").split(" from ")
    if first.strip():
        raise ValueError(f"{first.strip()!r}: only `from X import a, b as b` lines")
    names: dict[str, tuple[str, str | None]] = {}
    for statement in statements:
        module, _, imported = statement.partition(" import ")
        module = module.strip()
        if not module.startswith(".") or not imported.strip():
            raise ValueError(f"not a relative `from X import a, b as b`: {statement.strip()!r}")
        for item in imported.split(","):
            words = item.split()  # [a], [a, "as", b], or [] after a trailing comma
            if len(words) not in (0, 1, 3) or words[1:2] not in ([], ["as"]):
                raise ValueError(f"not `a` or `a as b`: {item.strip()!r}")
            if words:  # `a as a`: a re-export spelled out; `a as b` loads a as b
                attribute, name = words[0], words[-1]
                names[name] = (module + attribute, None) if module.strip(".") == "" else (module, attribute)
    return names


def lazy_names(namespace: dict, *, public: Collection[str] = (),
               qualified_only: Collection[str] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of the package whose globals are
    ``namespace``: each name of its ``if _TYPE_CHECKING:`` block (:func:`names_in`)
    loads from its module on first use and is kept in ``namespace``. ``__all__`` is made
    on first use too, so that importing the package reads no source: ``public`` (names
    the package defines itself), then the block's names less ``qualified_only`` (public,
    reached as ``package.name`` only)."""
    package = namespace["__name__"]
    found: dict[str, tuple[str, str | None]] = {}

    def names() -> dict[str, tuple[str, str | None]]:
        if not found:
            spec = namespace["__spec__"]
            found.update(names_in(spec.loader.get_data(spec.origin).decode("utf-8")))
        return found

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = [*public, *(n for n in names() if n not in qualified_only)]
        elif name in names():
            import importlib

            module_name, attribute = names()[name]
            module = importlib.import_module(module_name, package)
            value = module if attribute is None else getattr(module, attribute)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names(), "__all__"})

    return __getattr__, __dir__
