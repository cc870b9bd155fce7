"""The documentation site (docs/, built by Sphinx; the API reference from the docstrings).

It builds with every warning an error and nitpicky references (as ``make docs`` does),
every public name of ``shoal``, ``shoal.pool``, ``shoal.stencil`` and ``shoal.lowlevel``
is in the built reference and has a docstring of its own, and the options users asked
about are on the reference pages with their defaults.

The build runs Sphinx in a subprocess into a temporary folder; it imports shoal but runs
no job. Without Sphinx (the ``docs`` extra) the tests are skipped, except in CI
(``CI=true``), where they fail: there the docs must be checked.
"""

from __future__ import annotations

import html.parser
import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import types
import zlib
from pathlib import Path

import pytest
from support.commands import clean_env
from support import ROOT

DOCS = ROOT / "docs"
PUBLIC_MODULES = ["shoal", "shoal.pool", "shoal.stencil", "shoal.remote", "shoal.lowlevel"]
#: which reference page documents each module's names
PAGES = {"shoal": "api/shoal.rst", "shoal.pool": "api/pool.rst", "shoal.stencil": "api/stencil.rst",
         "shoal.remote": "api/remote.rst", "shoal.lowlevel": "api/lowlevel.rst"}


def _public_names() -> list[tuple[str, str, object]]:
    out = []
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            out.append((modname, name, getattr(module, name)))
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML site, built as ``make docs`` builds it (-W -n --keep-going)."""
    missing = [m for m in ("sphinx", "myst_parser") if importlib.util.find_spec(m) is None]
    if missing:
        why = f"{' and '.join(missing)} not installed (pip install -e '.[docs]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the docs cannot be checked in CI: {why}")
        pytest.skip(f"docs build not checked: {why}")
    out = tmp_path_factory.mktemp("docs")
    env = clean_env()
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
           "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, f"the docs build failed (every warning is an error):\n{proc.stderr}{proc.stdout}"
    return out / "html"


def _inventory(site: Path) -> dict[str, str]:
    """objects.inv as {name: role}: a 4-line header, then zlib-compressed lines
    ``name domain:role priority uri display-name``."""
    data = (site / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    entries = {}
    for line in zlib.decompress(data[header_end:]).decode().splitlines():
        m = re.match(r"(.+?)\s+(\S+:\S+)\s+-?\d+\s+\S*\s+.*", line)
        if m:
            entries.setdefault(m.group(1), m.group(2))
    return entries


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _page_text(site: Path, page: str) -> str:
    """The text of a built page, whitespace collapsed (signatures read as in Python)."""
    parser = _Text()
    parser.feed((site / page).read_text())
    text = " ".join("".join(parser.parts).split())
    return text.replace("\u00b6", "")  # the headerlinks' pilcrows


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i : text.index(end, i + len(start))]


def test_docs_build_with_warnings_as_errors(site: Path) -> None:
    for page in ["index.html", "tutorial.html", "stencil.html", "api/index.html", "api/shoal.html",
                 "api/pool.html", "api/stencil.html", "howto/index.html"]:
        assert (site / page).is_file(), page


def test_every_public_name_is_in_the_reference(site: Path) -> None:
    inventory = _inventory(site)
    missing = [f"{mod}.{name} (add it to docs/{PAGES[mod]})" for mod, name, _ in _public_names()
               if f"{mod}.{name}" not in inventory or not inventory[f"{mod}.{name}"].startswith("py:")]
    assert not missing, "public names missing from the API reference:\n  " + "\n  ".join(missing)


def _own_doc(obj: object) -> str | None:
    if isinstance(obj, type):
        return vars(obj).get("__doc__")  # not a base class's
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
        return obj.__doc__
    return type(obj).__doc__  # an instance, such as shoal.reducers


def test_every_public_name_has_a_docstring() -> None:
    undocumented = []
    for mod, name, obj in _public_names():
        if isinstance(obj, str):  # __version__: a string, described on the reference page
            continue
        doc = _own_doc(obj)
        if not doc or not doc.strip():
            undocumented.append(f"{mod}.{name}")
    assert not undocumented, "public names without a docstring: " + ", ".join(undocumented)


def test_every_documented_method_has_a_docstring() -> None:
    """The public methods and properties of the public classes: help() and the reference
    show each one's docstring."""
    undocumented = []
    for mod, name, obj in _public_names():
        if not isinstance(obj, type) or issubclass(obj, BaseException):
            continue
        for attr, value in vars(obj).items():
            if attr.startswith("_"):
                continue
            func = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if inspect.isfunction(func) and not inspect.getdoc(getattr(obj, attr)):  # a base's doc counts
                undocumented.append(f"{mod}.{name}.{attr}")
    assert not undocumented, "public methods without a docstring: " + ", ".join(undocumented)


def test_the_reference_shows_the_options_users_asked_about(site: Path) -> None:
    pool = _page_text(site, "api/pool.html")
    # shoal.pool.map and map_async, with the default chunksize
    assert re.search(r"shoal\.pool\.map\(fn: .*?chunksize: int = 1\)", pool)
    assert re.search(r"shoal\.pool\.map_async\(fn: .*?chunksize: int = 1\)", pool)
    assert "chunksize (default 1): items per task" in pool
    # Executor: its constructor, submit, map (with timeout) and shutdown's options
    executor = _between(pool, "class shoal.pool.Executor", "exception shoal.pool.BrokenPool")
    assert "takes no options" in executor
    assert "submit(fn: " in executor and "map(fn, *iterables, timeout=None, chunksize=1)" in executor
    assert "shutdown(wait: bool = True, *, cancel_futures: bool = False)" in executor

    runtime = _page_text(site, "api/shoal.html")
    channel = _between(runtime, "class shoal.Channel(", "class shoal.ReceiveSet(")
    assert "port: int | str | None = None" in channel
    assert "recv(into: Any = None)" in channel and "send(*values)" in channel
    receive_set = _between(runtime, "class shoal.ReceiveSet(", "Reductions")
    assert "then: Callable" in receive_set and "async def" in receive_set and "post()" in receive_set

    stencil = _page_text(site, "api/stencil.html")
    assert "check_every: int = 1" in stencil  # solve()'s signature
    for option, default in [("backend_freq", "10"), ("odf", "1"), ("ghost_depth", "1"), ("backend", '"auto"'),
                            ("max_inflight", "2"), ("time_blocking", "True"), ("check_every", "1")]:
        assert f"{option} {default} " in stencil, f"the stencil options table lacks {option} (default {default})"


# -- every fenced Python block of the docs runs ---------------------------------------------
#
# Each ```python block of docs/*.md and docs/howto/*.md runs as a program of its own, after
# PRELUDE. A block that starts a job (it calls shoal.start, or defines main(), which is then
# started) runs under ``shoal run -n 2 --transport inproc``; any other block (definitions)
# runs under plain python. A block that cannot run alone (a fragment that continues the one
# before, or one that needs MPI or the user's data) says why in a comment on the line before
# it, ``<!-- not-run: the reason -->``; those are skipped with that reason (listed at the end
# of the pytest run) and counted below. The longer programs of the docs are in examples/
# (tests/project/test_examples.py), which the pages include with ``literalinclude``.

PRELUDE = "import numpy as np\nimport shoal\n"
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.*?)\s*-->")
#: how many blocks the docs opt out of running; a new opt-out must be added here, in review
OPTED_OUT = 18


def _doc_blocks() -> list[tuple[str, str, str | None]]:
    """``(page:line, code, reason it is not run or None)`` for every fenced Python block."""
    blocks = []
    for page in sorted([*DOCS.glob("*.md"), *DOCS.glob("howto/*.md")]):
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                indent = len(lines[i]) - len(lines[i].lstrip())
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
                code = "\n".join(line[indent:] for line in lines[i + 1 : end])
                before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
                m = NOT_RUN.search(before)
                blocks.append((f"{page.relative_to(DOCS)}:{i + 1}", code, m.group(1) if m else None))
                i = end
            i += 1
    return blocks


DOC_BLOCKS = _doc_blocks()


def test_blocks_not_run_are_few_and_say_why():
    skipped = [(where, why) for where, _, why in DOC_BLOCKS if why is not None]
    listing = "\n  ".join(f"{where}: {why}" for where, why in skipped)
    assert all(why for _, why in skipped), f"a not-run comment without a reason:\n  {listing}"
    assert len(skipped) == OPTED_OUT, (
        f"{len(skipped)} Python blocks of the docs are not run (OPTED_OUT says {OPTED_OUT}); "
        f"make a new block runnable, or update OPTED_OUT knowingly:\n  {listing}"
    )
    assert len(DOC_BLOCKS) - len(skipped) >= 10  # the parser found the blocks


@pytest.mark.parametrize("where, code, why", DOC_BLOCKS, ids=[b[0] for b in DOC_BLOCKS])
def test_python_block_of_the_docs_runs(where, code, why, tmp_path):
    if why is not None:
        pytest.skip(f"docs block {where} not run: {why}")
    source = PRELUDE + code + "\n"
    starts = "shoal.start(" in code
    if not starts and re.search(r"^def main\(", code, re.M):
        source += "\nshoal.start(main)\n"
        starts = True
    prog = tmp_path / "block.py"
    prog.write_text(source)
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "5"
    cmd = ([sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", "inproc", str(prog)] if starts
           else [sys.executable, str(prog)])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, (
        f"the Python block at docs/{where} failed (exit code {proc.returncode}); fix it, or mark it "
        f"<!-- not-run: reason --> if it cannot run alone:\n{code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )


def test_stencil_page_keeps_method_and_table_not_history():
    """docs/stencil.md's Performance section: the method, the current table and its
    command; dated runs and commits belong in docs/changelog.md."""
    text = (DOCS / "stencil.md").read_text()
    perf = text[text.index("## Performance") : text.index("## CUDA")]
    assert "**Method.**" in perf and "shoal bench stencil --n 8192" in perf and "| Jacobi 5-point |" in perf
    history = re.findall(r"20\d\d-\d\d-\d\d|\d\d:\d\d UTC|\bcommit [0-9a-f]{7}", perf)
    assert not history, f"development history in the Performance section (move it to changelog.md): {history}"
    options = text[text.index("## Options") : text.index("## Performance")]
    assert "| `check_every` | 1 |" in options
