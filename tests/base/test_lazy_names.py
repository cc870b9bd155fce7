"""shoal._lazy_names: a package's names loaded on first use and listed once, as the imports
of its ``if _TYPE_CHECKING:`` block; the one helper of the three packages that offer
names so (shoal, shoal.lowlevel, shoal.remote)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from shoal._lazy_names import names_in

PACKAGE = '''
"""A package with names loaded on first use."""
from shoal._lazy_names import lazy_names as _lazy_names

_TYPE_CHECKING = False
if _TYPE_CHECKING:  # the names
    from . import sub
    from .sub import thing, other as other  # spelled out
    from .sub import (
        more,  # in parentheses
        renamed as alias,
    )
own = 1

__getattr__, __dir__ = _lazy_names(globals(), public=["own"], qualified_only={"other"})
'''


@pytest.fixture
def package(tmp_path, monkeypatch):
    (tmp_path / "pkg_under_test").mkdir()
    (tmp_path / "pkg_under_test" / "__init__.py").write_text(PACKAGE)
    (tmp_path / "pkg_under_test" / "sub.py").write_text("thing, other, more, renamed = object(), object(), object(), object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("pkg_under_test")
    for name in ("pkg_under_test", "pkg_under_test.sub"):
        sys.modules.pop(name, None)


def test_a_name_loads_on_first_use_and_stays(package):
    assert "pkg_under_test.sub" not in sys.modules and "thing" not in vars(package)
    assert {"sub", "thing", "other", "more", "alias", "own"} <= set(dir(package))
    thing = package.thing
    sub = sys.modules["pkg_under_test.sub"]
    assert thing is sub.thing and vars(package)["thing"] is sub.thing  # kept: no second look-up
    assert package.sub is sub  # `from . import sub`: the submodule itself
    assert package.more is sub.more and package.alias is sub.renamed
    with pytest.raises(AttributeError, match="module 'pkg_under_test' has no attribute 'nothing'"):
        package.nothing  # noqa: B018


def test_all_is_made_on_first_use_from_the_public_and_the_block(package):
    assert "__all__" not in vars(package)
    assert package.__all__ == ["own", "sub", "thing", "more", "alias"]  # `other` is qualified only
    namespace: dict = {}
    exec("from pkg_under_test import *", namespace)
    assert {"own", "thing", "alias"} <= set(namespace) and "other" not in namespace


def test_the_block_is_read_without_a_parser():
    assert names_in("x = 1\nif _TYPE_CHECKING:\n    from .a.b import c, d as d\n    from .. import e\ny = 2\n") == {
        "c": (".a.b", "c"), "d": (".a.b", "d"), "e": ("..e", None)}
    assert names_in("if x:\n    pass\nif _TYPE_CHECKING:\n\n    from .m import (\n        f,\n    )\nfrom .n import g\n") == {
        "f": (".m", "f")}  # the block ends at the first line that is not indented
    with pytest.raises(ValueError, match="no 'if _TYPE_CHECKING:' block"):
        names_in("if TYPE_CHECKING:\n    from .a import b\n")
    with pytest.raises(ValueError, match="only `from X import a, b as b` lines"):
        names_in("\nif _TYPE_CHECKING:\n    import typing\n")
    with pytest.raises(ValueError, match="not a relative"):
        names_in("\nif _TYPE_CHECKING:\n    from typing import Any\n")


def test_the_three_packages_use_it_and_their_names_load_without_a_parser():
    import shoal
    import shoal.lowlevel
    import shoal.remote

    for package in (shoal, shoal.lowlevel, shoal.remote):
        assert package.__getattr__.__qualname__ == "lazy_names.<locals>.__getattr__", package
    probe = ("import sys, shoal, shoal.lowlevel; shoal.Chare, shoal.lowlevel.in_job, shoal.__all__; "
             "print(sorted(m for m in ('ast', 're', 'tokenize') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["[]"], out
