"""shoal info tells when shoal's bytecode cache is stale, since every PE then compiles;
shoal run compiles it once where Python would not."""

import os
import py_compile
import sys

from shoal.bytecode import bytecode_status, refresh, stale_modules


def test_a_module_is_stale_without_bytecode_and_current_once_compiled(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("x = 1\n")
    assert stale_modules(str(tmp_path)) == ["mod.py"]
    py_compile.compile(str(source))
    assert stale_modules(str(tmp_path)) == []


def test_a_module_changed_after_compiling_is_stale(tmp_path):
    source = tmp_path / "pkg" / "mod.py"
    source.parent.mkdir()
    source.write_text("x = 1\n")
    py_compile.compile(str(source))
    source.write_text("x = 22\n")  # another size, and a later time
    st = os.stat(source)
    os.utime(source, (st.st_atime, st.st_mtime + 5))
    assert stale_modules(str(tmp_path)) == [os.path.join("pkg", "mod.py")]


def test_the_status_line_names_the_fix_or_says_current():
    line = bytecode_status()
    assert line.startswith("current (") or ("compileall" in line and "stale for" in line), line


def test_shoal_run_compiles_stale_modules_once_where_python_would_not(tmp_path, monkeypatch):
    """refresh() (called by shoal run before its PEs start) compiles what is stale when
    PYTHONDONTWRITEBYTECODE is set, then only stats the sources while nothing changed."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    source = tmp_path / "pkg" / "mod.py"
    source.parent.mkdir()
    source.write_text("x = 1\n")
    (tmp_path / "top.py").write_text("y = 2\n")
    assert refresh(str(tmp_path)) == [os.path.join("pkg", "mod.py"), "top.py"]
    assert stale_modules(str(tmp_path)) == []
    assert refresh(str(tmp_path)) == []  # the stamp is newer than every source
    source.write_text("x = 333\n")
    st = os.stat(source)
    os.utime(source, (st.st_atime, st.st_mtime + 5))
    assert refresh(str(tmp_path)) == [os.path.join("pkg", "mod.py")]
    assert stale_modules(str(tmp_path)) == []


def test_refresh_leaves_the_cache_to_python_when_python_writes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    (tmp_path / "mod.py").write_text("x = 1\n")
    assert refresh(str(tmp_path)) == []
    assert stale_modules(str(tmp_path)) == ["mod.py"]


def test_refresh_writes_nothing_into_a_read_only_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # as root, chmod would not stop us
    (tmp_path / "mod.py").write_text("x = 1\n")
    assert refresh(str(tmp_path)) == []
    assert not (tmp_path / "__pycache__").exists()
