"""The contract between the Python runtime and its compiled core has two halves that must
agree: ``_native/contract.h`` (the Slots and Names tables, field by field) and
``_runtime/core_contract.py`` (SLOTS and NAMES, the class and attribute of each field, in
the same order). Only contract.c finds a slot or interns a name; every other C file reads
through the tables."""

from __future__ import annotations

import re

import pytest
from support import SRC

from shoal._runtime.core_contract import NAMES, SLOTS

NATIVE = SRC / "_native"


def struct_fields(name: str) -> list[str]:
    """The fields of the typedef struct ``name`` in contract.h, in order."""
    text = re.sub(r"/\*.*?\*/", "", (NATIVE / "contract.h").read_text(), flags=re.S)
    body = re.search(r"typedef struct \{([^{}]*)\}\s*" + name + ";", text)
    assert body, f"contract.h has no typedef struct {name}"
    fields = []
    for decl in body.group(1).split(";"):
        decl = decl.strip()
        if decl:
            decl = re.sub(r"^(Py_ssize_t|PyObject)\s*", "", decl)
            fields += [f.strip().lstrip("*").strip() for f in decl.split(",")]
    return fields


def test_the_slots_agree_field_for_field():
    assert struct_fields("Slots") == [field for field, _, _ in SLOTS]


def test_the_names_agree_field_for_field():
    assert struct_fields("Names") == [field for field, _ in NAMES]


@pytest.mark.parametrize("field,cls,slot", SLOTS, ids=[s[0] for s in SLOTS])
def test_every_slot_is_a_slots_member_of_its_class(field, cls, slot):
    assert type(cls.__dict__.get(slot) or getattr(cls, slot)).__name__ == "member_descriptor", (
        f"{cls.__qualname__}.{slot} ({field}) is not a __slots__ member: the core could not read it")


def test_no_c_file_but_the_contract_finds_a_slot_or_interns_a_name():
    """Outside contract.c no C file looks up a slot's offset, interns a name, or reads an
    attribute by a literal name, but for a dunder of Python's protocols and the functions of
    modules it imports by name (NumPy's ufuncs, shoal.native.fresh_load)."""
    bad = []
    for path in sorted(NATIVE.glob("*.c")):
        if path.name == "contract.c":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bslot_offset\(|InternFromString\(|PyMemberDescr", line):
                bad.append(f"{path.name}:{lineno}: {line.strip()}")
            for found in re.finditer(r'(?:Get|Set)AttrString\(\s*(\w+)\s*,\s*(\w+|"[^"]*")', line):
                what = found.group(2)
                if not (what.startswith('"__') or found.group(1) in ("numpy", "mod")):
                    bad.append(f"{path.name}:{lineno}: {line.strip()}")
    assert not bad, "C that reaches the runtime outside the contract:\n" + "\n".join(bad)


def test_a_contract_of_another_shape_is_refused_naming_both():
    """Halves that disagree in size (a stale build, say) are an error naming both counts, not a crash."""
    from shoal.native import load_native

    module = load_native()
    if module is None:
        pytest.skip("the compiled path is not built here")
    assert hasattr(module, "configure_contract")
    with pytest.raises(ValueError, match="contract has .* slots and .* names"):
        module.configure_contract((), ())


def test_a_layers_call_options_are_declared_in_python_not_in_c():
    """The compiled proxies learn which keywords are a call's options from the runtime
    (proxy.CALL_OPTIONS, which a layer extends); no C file names a layer's option."""
    from shoal._runtime.proxy import CALL_OPTIONS, add_call_option

    assert CALL_OPTIONS[0] == "ret"
    add_call_option("ret")
    assert CALL_OPTIONS.count("ret") == 1
    for path in sorted(NATIVE.glob("*.[ch]")):
        assert '"awaitable"' not in path.read_text(), f"{path.name} names the Charm4py layer's awaitable"
