"""The public namespace is what we say it is: ``shoal.__all__`` pinned, every name
documented, nothing that shadows a builtin under ``from shoal import *``."""

from __future__ import annotations

import ast
import builtins
import inspect

import pytest

import shoal
import shoal.lowlevel
import shoal.pool
import shoal.stencil

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
    for module in (shoal.pool, shoal.stencil, shoal.lowlevel):
        assert module.__all__, module.__name__
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.__all__ names {name}, which does not exist"


@pytest.mark.parametrize("module", [shoal, shoal.lowlevel], ids=lambda m: m.__name__)
def test_type_checkers_see_the_names_that_load_on_first_use(module):
    """The imports under ``_TYPE_CHECKING`` in shoal/__init__.py and shoal/lowlevel/__init__.py
    (what type checkers and editors read) name the same things, from the same modules, as
    each one's ``_LAZY`` table (what a running program loads)."""
    tree = ast.parse(inspect.getsource(module))
    blocks = [node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "_TYPE_CHECKING"]
    typed = {}
    for node in (n for block in blocks for n in block.body):
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                typed[alias.asname or alias.name] = "." * node.level + (node.module or alias.name)
    where = module._WHERE
    assert typed == where, (
        f"only for type checkers: {sorted(set(typed) - set(where))}; "
        f"only loaded lazily: {sorted(set(where) - set(typed))}; "
        f"from other modules: {sorted(n for n in set(typed) & set(where) if typed[n] != where[n])}")
