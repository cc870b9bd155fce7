"""shoal._lazy_names: a package's names loaded on first use, the one helper of the three
packages that offer them so (shoal, shoal.lowlevel, shoal.remote)."""

from __future__ import annotations

import sys
import types

import pytest

from shoal._lazy_names import lazy_names


def test_a_name_loads_on_first_use_and_stays():
    pkg = types.ModuleType("pkg_under_test")
    pkg.__path__ = []  # a package: relative names resolve against it
    sub = types.ModuleType("pkg_under_test.sub")
    sub.thing = object()
    sys.modules["pkg_under_test"], sys.modules["pkg_under_test.sub"] = pkg, sub
    try:
        getattr_, dir_ = lazy_names("pkg_under_test", vars(pkg), {"thing": ".sub", "sub": ".sub"})
        assert "thing" not in vars(pkg) and "thing" in dir_()
        assert getattr_("thing") is sub.thing and vars(pkg)["thing"] is sub.thing  # kept: no second look-up
        assert getattr_("sub") is sub  # a submodule's own name is the module
        with pytest.raises(AttributeError, match="module 'pkg_under_test' has no attribute 'other'"):
            getattr_("other")
    finally:
        del sys.modules["pkg_under_test"], sys.modules["pkg_under_test.sub"]


def test_the_three_packages_use_it():
    import shoal
    import shoal.lowlevel
    import shoal.remote

    for package in (shoal, shoal.lowlevel, shoal.remote):
        assert package.__getattr__.__qualname__ == "lazy_names.<locals>.__getattr__", package
