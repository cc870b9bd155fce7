"""The layers depend one way (docs/architecture.md): checked on every module's imports,
every package and top-level module of shoal, and the C sources.

    base (errors, version, settings, compiler, native, gpu, ...)  <-  _transport  <-  jobwatch  <-  _runtime
    <-  pool, lowlevel, the public namespace  <-  stencil, compat, remote, trace  <-  bench
    <-  program, options, commands  <-  cli

A module may import from its own component and from the components :data:`MAY_IMPORT`
names for it; imports inside functions and under ``TYPE_CHECKING`` count too (a layer
that needs a name only lazily still depends on it). Every module of shoal must belong to a
component in the table, so a new module is placed on purpose. Only the components of
:data:`RUNTIME_SIDE`, each with its reason, import ``shoal._runtime``; the upper layers reach
it through the public namespace and ``shoal.lowlevel``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support import SRC, TESTS


BASE = {"errors", "version", "bytecode", "settings", "numpy_types", "_lazy_names", "banners", "process", "compiler", "native",
        "_native_build", "gpu"}
BELOW_RUNTIME = BASE | {"_transport", "jobwatch"}
RUNTIME = BELOW_RUNTIME | {"_runtime"}
LAUNCH = BASE | {"jobwatch", "jobreport", "launchers", "launcher"}
TRACES = "trace"  # the readers of a timeline (summary, plot, report)

#: component -> the other components it may import ("shoal" is the public namespace, shoal/__init__.py)
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "version": set(),
    "bytecode": set(),
    "settings": set(),
    "numpy_types": set(),  # NumPy's types for type tests, without importing NumPy
    "_lazy_names": set(),  # a package's names loaded on first use (shoal, lowlevel, remote)
    "banners": set(),
    "process": set(),
    "_native_build": set(),
    "compiler": {"settings"},  # the one compile-and-cache service
    "native": {"settings", "_native_build", "compiler"},
    "gpu": set(),
    "_transport": BASE,
    "jobwatch": BASE | {"_transport"},  # ends a job: MPI_Abort, the one call it needs below it
    "_runtime": RUNTIME,
    "launchers": BASE,
    "jobreport": BASE | {"jobwatch"},
    "launcher": LAUNCH,
    "pool": RUNTIME,
    "lowlevel": RUNTIME | LAUNCH,
    # the public namespace: the runtime's names, and shoal.connect / %load_ext shoal from remote
    "shoal": {"errors", "version", "_lazy_names", "_runtime", "pool", "remote"},
    "stencil": BASE | {"shoal", "lowlevel"},
    "remote": RUNTIME | {"shoal", "lowlevel", "stencil"},  # the server runs stencil grids on the runtime
    "compat": BASE | {"shoal", "pool", "lowlevel"},  # the Charm4py layer: the runtime through shoal.lowlevel
    TRACES: BASE | {"_runtime", TRACES},  # _runtime.tracing defines the format they read
    "bench": BASE | LAUNCH | {"shoal", "pool", "lowlevel", "stencil", "remote", "commands", TRACES},
    "program": RUNTIME | {"compat"},
    "options": BELOW_RUNTIME | {"lowlevel", "program"},
    "commands": BELOW_RUNTIME | LAUNCH | {"shoal", "pool", "lowlevel", "stencil", "remote", "program", "options", TRACES},
    "cli": BELOW_RUNTIME | LAUNCH | {"program", "options", "commands", "bench"},
    "__main__": {"cli"},
}

#: the components that may import ``shoal._runtime`` itself, and why; every other one reaches
#: the runtime through the public namespace (``shoal``) and ``shoal.lowlevel`` only, so that
#: the runtime's private modules change without touching them
RUNTIME_SIDE = {
    "_runtime": "the runtime itself",
    "shoal": "the public namespace: the runtime's public names, each loaded from its module on first use",
    "lowlevel": "the upper layers' internal API: each of its names is a line over the runtime's private ones",
    "pool": "public API beside the namespace (shoal.pool, shoal.Executor): its tasks run in the runtime's "
            "threads on a Group of its own",
    "program": "a program on a PE (python -m shoal prog.py): it starts the engine, the runtime's own start-up",
    "remote": "shoal serve's PE 0 is a service of the runtime: it takes over the engine's idle sleep, reads its "
              "transport and runs each client's requests in a runtime thread",
    TRACES: "the readers of a timeline read the format that the runtime's recorder (_runtime/tracing.py) writes",
}

#: edges left out of the check for cycles: the public namespace re-exports names of a layer above
#: it (shoal.connect, shoal.load_ipython_extension), loading that layer only when they are used
REEXPORTS = {("shoal", "remote")}


def component(path: Path) -> str:
    """The component a module of shoal belongs to: its package, or itself at the top level."""
    first = path.relative_to(SRC).with_suffix("").parts[0]
    if first == "__init__":
        return "shoal"
    return first


def shoal_imports(path: Path) -> set[str]:
    """The components of shoal that the module at ``path`` imports (``shoal`` for the package itself)."""
    package = path.relative_to(SRC.parent).with_suffix("").parts  # ("shoal", "_runtime", "engine")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = list(package[: len(package) - node.level])
                module = [*base, *(node.module.split(".") if node.module else [])]
                names = [".".join(module)] if node.module else [".".join([*base, a.name]) for a in node.names]
            else:
                names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "shoal" else [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "shoal":
                continue
            if len(parts) == 1 or not _is_module(parts[1]):
                found.add("shoal")  # `import shoal`, `from shoal import Chare`: the public namespace
            else:
                found.add(parts[1])
    return found


def _is_module(name: str) -> bool:
    return (SRC / name).is_dir() or (SRC / f"{name}.py").is_file()


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_of_shoal_has_a_place_in_the_layers():
    unplaced = sorted({str(p.relative_to(SRC)) for p in _modules() if component(p) not in MAY_IMPORT})
    assert not unplaced, "modules with no layer (add their component to MAY_IMPORT):\n" + "\n".join(unplaced)


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_layer_imports_only_downwards(layer):
    bad = []
    for path in _modules():
        if component(path) != layer:
            continue
        wrong = shoal_imports(path) - MAY_IMPORT[layer] - {layer}
        if wrong:
            bad.append(f"{path.relative_to(SRC)} imports shoal.{', shoal.'.join(sorted(wrong))}")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_only_the_runtime_side_imports_the_runtime():
    """No module outside :data:`RUNTIME_SIDE` imports ``shoal._runtime`` (not inside a
    function, not for type checking), and the table of layers lets no other component."""
    allowed = {c for c, deps in MAY_IMPORT.items() if "_runtime" in deps} | {"_runtime"}
    assert allowed == set(RUNTIME_SIDE), (
        f"MAY_IMPORT lets {sorted(allowed - set(RUNTIME_SIDE))} import shoal._runtime without a reason in "
        f"RUNTIME_SIDE; RUNTIME_SIDE names {sorted(set(RUNTIME_SIDE) - allowed)} that MAY_IMPORT does not let")
    bad = sorted(str(p.relative_to(SRC)) for p in _modules()
                 if component(p) not in RUNTIME_SIDE and "_runtime" in shoal_imports(p))
    assert not bad, ("modules that import shoal._runtime directly (use the public namespace or shoal.lowlevel, "
                     "and add to lowlevel what is missing):\n" + "\n".join(bad))


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle in ``graph`` (node -> the nodes it points to) as a path, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            found = visit(nxt, [*path, nxt]) if nxt not in state else None
            if found:
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        found = visit(start, [start]) if start not in state else None
        if found:
            return found
    return None


def test_the_layers_form_no_cycle():
    graph = {c: {d for d in deps if d != c and (c, d) not in REEXPORTS} for c, deps in MAY_IMPORT.items()}
    found = cycle(graph)
    assert found is None, "the layers form a cycle: " + " -> ".join(found or [])


#: the compiled sources: the transport's files include only native.h (frames, queries), the
#: runtime core's include core.h; nothing below the core includes it
C_TRANSPORT = {"frames.c", "frames_trace.c", "query.c", "native.h"}


def test_the_compiled_transport_does_not_include_the_runtime_core():
    native = SRC / "_native"
    included = {p.name: set(re.findall(r'#include\s+"([^"]+)"', p.read_text())) for p in native.glob("*.[ch]")}
    assert C_TRANSPORT <= set(included), sorted(included)
    bad = [f"{name} includes {', '.join(sorted(inc - {'native.h'}))}"
           for name, inc in included.items() if name in C_TRANSPORT and inc - {"native.h"}]
    assert not bad, "the transport's C reaches into the runtime core:\n" + "\n".join(bad)
    unknown = {inc for incs in included.values() for inc in incs} - set(included)
    assert not unknown, f"C sources include headers shoal does not ship: {sorted(unknown)}"


def test_the_checker_sees_relative_absolute_and_public_imports(tmp_path):
    assert "lowlevel" in shoal_imports(SRC / "stencil" / "halo.py")  # `from ..lowlevel import`
    assert "shoal" in shoal_imports(SRC / "stencil" / "session.py")  # `from .. import attach`
    assert "remote" in shoal_imports(SRC / "__init__.py")  # `from .remote.client import` inside connect()
    assert component(SRC / "_runtime" / "engine.py") == "_runtime" and component(SRC / "__init__.py") == "shoal"


def _runtime_imports(path: Path) -> set[str]:
    """The modules of ``_runtime`` that a module of it imports, anywhere but under ``TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id in ("TYPE_CHECKING", "_TYPE_CHECKING")
                   for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only or not isinstance(node, ast.ImportFrom) or node.level != 1:
            continue
        for name in ([node.module] if node.module else [a.name for a in node.names]):
            found.add(name.split(".")[0])
    return found - {path.stem}


def test_the_runtime_modules_import_each_other_without_a_circle():
    """Inside ``_runtime`` the imports, those inside functions too, go one way: a circle is
    allowed only through imports for type checking."""
    modules = {p.stem: p for p in (SRC / "_runtime").glob("*.py")}
    found = cycle({m: _runtime_imports(p) & set(modules) for m, p in modules.items()})
    assert found is None, "_runtime imports in a circle: " + " -> ".join(found or [])
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # the checker sees one


#: the runtime's decisions as state machines without I/O (events in, actions out, tested
#: without processes: tests/runtime/test_round_machines.py) and the only modules they import:
#: no transport, engine, runtime or message encoding, no NumPy; their engine does the I/O
STATE_MACHINES = {
    "round_coordinator": {"lb_period", "round_log"},  # a balancing round, as its coordinator decides it
    "round_pe": {"lb_period"},  # a balancing round, as one PE takes part in it
}


def test_the_state_machines_import_nothing_that_does_io():
    bad = []
    for name, allowed in STATE_MACHINES.items():
        path = SRC / "_runtime" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    found = {f".{node.module}"} if node.module else {f".{a.name}" for a in node.names}
                else:
                    found = {("." * node.level) + (node.module or "")}
            else:
                continue
            wrong = found - {"__future__", "typing"} - {f".{m}" for m in allowed}
            bad.extend(f"{name} imports {w}" for w in sorted(wrong))
    assert not bad, "state machines that import more than STATE_MACHINES lets them:\n" + "\n".join(bad)


#: the folders of tests/: one per layer of the diagram above (the compiled core beside the
#: runtime it serves), one for launching and ending jobs, and one for the project as a whole
TEST_FOLDERS = {
    "base": "errors, settings, the compiler service, bytecode, NumPy imported late and lazy names, child processes, packaging",
    "transport": "the transport contract, the wire format, nodes and hosts, rendezvous",
    "native": "the compiled core and its contract with the Python runtime",
    "runtime": "the programming model: chares, collections, reductions, migration, checkpoints, devices",
    "jobs": "launching and ending jobs: launchers, Slurm, failures and how they are reported",
    "pool": "the task pool",
    "stencil": "the stencil DSL",
    "compat": "the Charm4py layer",
    "remote": "the client-server link",
    "trace": "timelines and their reports",
    "bench": "the benchmark suite and the proxy apps",
    "cli": "the command line",
    "project": "docs, examples, the public namespace, these layers",
}


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "programs" not in p.relative_to(TESTS).parts)


def test_the_tests_live_in_folders_that_mirror_the_layers():
    placed = {p.relative_to(TESTS).parts[0] if len(p.relative_to(TESTS).parts) > 1 else "." for p in _test_modules()}
    assert placed == set(TEST_FOLDERS), (
        f"test folders {sorted(placed)}; expected {sorted(TEST_FOLDERS)} (a test at the top is '.'): "
        "put each test in the folder of the layer it tests, or name a new folder in TEST_FOLDERS")


def test_tests_share_helpers_only_through_support():
    """A test imports no other test and no helper by a bare name: what two tests share is
    in tests/support, imported as ``support.<module>``."""
    helpers = {p.stem for p in (TESTS / "support").glob("*.py")} - {"__init__"}
    bad = []
    for path in _test_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                first = name.split(".")[0]
                if first == "conftest" or first.startswith("test_") or first in helpers:
                    bad.append(f"{path.relative_to(TESTS)}: import {name}")
    assert not bad, "tests importing helpers other than through support:\n" + "\n".join(bad)
