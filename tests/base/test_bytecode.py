"""shoal info tells when shoal's bytecode cache is stale, since every PE then compiles."""

import os
import py_compile

from shoal.bytecode import bytecode_status, stale_modules


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
