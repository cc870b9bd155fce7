"""The layers depend one way (docs/architecture.md): checked on every module's imports.

_transport  <-  _runtime  <-  pool, lowlevel  <-  stencil, bench;  remote (serve/connect) on both
A module may import from its own layer and the layers below it; the stencil DSL and the
benchmarks reach the runtime and the transport only through ``shoal.lowlevel`` and the
public ``shoal`` namespace.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "shoal"

#: package of shoal -> the shoal packages/modules it must not import
FORBIDDEN = {
    "_transport": {"_runtime", "pool", "stencil", "bench", "lowlevel", "cli", "launcher"},
    "_runtime": {"pool", "stencil", "bench", "lowlevel", "cli", "launcher"},
    "stencil": {"_runtime", "_transport", "bench", "cli"},
    "bench": {"_runtime", "_transport"},
    "gpu": {"_runtime", "_transport", "pool", "stencil", "bench", "lowlevel", "cli", "launcher"},
    "remote": {"bench", "cli"},  # the server runs on the runtime; the client is a stencil Interface
}


def shoal_imports(path: Path) -> set[str]:
    """The first component below ``shoal`` of every module ``path`` imports."""
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
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "shoal" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_downwards(layer):
    bad = []
    for path in sorted((SRC / layer).rglob("*.py")):
        wrong = shoal_imports(path) & FORBIDDEN[layer]
        if wrong:
            bad.append(f"{path.relative_to(SRC)} imports shoal.{', shoal.'.join(sorted(wrong))}")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_checker_sees_relative_and_absolute_imports(tmp_path):
    mod = SRC / "stencil" / "halo.py"  # a real module: the resolution of `..` is what is tested
    assert "lowlevel" in shoal_imports(mod)
