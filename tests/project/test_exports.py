"""The public namespace is what we say it is: ``shoal.__all__`` pinned, every name
documented, nothing that shadows a builtin under ``from shoal import *``."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect

import pytest

import shoal
import shoal.lowlevel
import shoal.pool
import shoal.remote
import shoal.stencil
from shoal._lazy_names import names_in

PUBLIC = {
    "start", "run", "attach", "detach", "connect", "my_pe", "num_pes", "topology", "my_device", "GPUError",
    "Chare", "Group", "Array", "destroy", "Future", "gather", "lend", "Loan", "Channel", "ReceiveSet", "reducers", "Reducer",
    "quiescence", "call_later", "mpi_comm", "pool", "Executor", "BrokenPool",
    "ShoalError", "NotRunningError", "BlockingCallError", "DeadlockError", "RemoteError", "ReductionError",
    "ChannelError", "MigrationError", "CheckpointError", "register_strategy", "threaded", "when", "wait_until",
    "checkpoint", "checkpoint_sync", "checkpoint_point", "checkpoint_point_sync", "restarted", "__version__",
}
#: public on purpose though not in __all__ (see shoal/__init__.py)
QUALIFIED_ONLY = {"exit", "ElementProxy", "CollectionProxy", "SectionProxy", "load_ipython_extension"}


def test_all_is_pinned():
    assert set(shoal.__all__) == PUBLIC, (
        f"added: {sorted(set(shoal.__all__) - PUBLIC)}, removed: {sorted(PUBLIC - set(shoal.__all__))}; "
        "update PUBLIC here and the docs if that is intended"
    )
    assert len(shoal.__all__) == len(set(shoal.__all__))


def test_every_public_name_exists_and_is_documented():
    for name in PUBLIC | QUALIFIED_ONLY:
        obj = getattr(shoal, name)
        if name == "__version__":
            assert isinstance(obj, str)
            continue
        assert inspect.getdoc(obj), f"shoal.{name} has no docstring"


def test_star_import_shadows_no_builtin():
    namespace: dict = {}
    exec("from shoal import *", namespace)
    shadowed = sorted(n for n in namespace if n != "__builtins__" and hasattr(builtins, n))
    assert shadowed == [], f"`from shoal import *` shadows builtins {shadowed}"


def test_internals_are_not_reexported():
    for name in dir(shoal):
        if name.startswith("_") or name in PUBLIC | QUALIFIED_ONLY:
            continue
        obj = getattr(shoal, name)
        assert inspect.ismodule(obj), f"shoal.{name} is neither public nor a module"


def test_subpackages_declare_their_public_names():
    for module in (shoal, shoal.pool, shoal.stencil, shoal.lowlevel, shoal.remote):
        assert module.__all__, module.__name__
        assert len(module.__all__) == len(set(module.__all__)), module.__name__
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.__all__ names {name}, which does not exist"


@pytest.mark.parametrize("package", [shoal, shoal.lowlevel, shoal.remote], ids=lambda m: m.__name__)
def test_the_names_loaded_on_first_use_are_the_imports_type_checkers_read(package):
    """Each package lists the names it loads on first use once, as the imports of its
    ``if _TYPE_CHECKING:`` block (what type checkers and editors read); shoal/_lazy_names.py
    reads the same lines with string operations. Python's own parser must read them alike,
    and each name must load the very object its module defines."""
    source = inspect.getsource(package)
    tree = ast.parse(source)
    blocks = [node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "_TYPE_CHECKING"]
    assert len(blocks) == 1, f"{package.__name__}: {len(blocks)} `if _TYPE_CHECKING:` blocks"
    typed: dict[str, tuple[str, str | None]] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level, f"not a relative from-import: {ast.unparse(node)}"
        for alias in node.names:
            dots = "." * node.level
            typed[alias.asname or alias.name] = (dots + node.module, alias.name) if node.module else (dots + alias.name, None)
    read = names_in(source)
    assert read == typed and list(read) == list(typed), (
        f"only Python's parser sees: {sorted(set(typed) - set(read))}; only _lazy_names sees: {sorted(set(read) - set(typed))}; "
        f"read otherwise: {sorted(n for n in set(typed) & set(read) if typed[n] != read[n])}")
    for name, (module_name, attribute) in typed.items():
        module = importlib.import_module(module_name, package.__name__)
        assert getattr(package, name) is (module if attribute is None else getattr(module, attribute)), name
