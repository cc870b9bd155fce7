"""Stage 1 of the pipeline: the expression nodes a recorded statement is made of.

Nodes are immutable and compare and hash structurally. A statement is
``Assign(target, value)``: ``target`` is a :class:`Read` of the field being written
(its box in global grid coordinates) and ``value`` an expression over reads,
constants and operations. Nothing here knows about tiles or C.

Every node has one text form (:func:`dumps`, read back by :func:`loads`); floats are
written with ``float.hex`` so a scalar survives the round trip bit for bit. The hash
of a statement is the SHA-256 of that text.
"""

from __future__ import annotations

import hashlib
from typing import Iterator, Union

__all__ = [
    "Node", "Const", "Read", "Axis", "Unary", "Binary", "Where", "Assign",
    "UNARY_OPS", "BINARY_OPS", "COMPARE_OPS", "DTYPES",
    "dumps", "loads", "digest", "walk", "reads",
]

#: element types a field may have, by NumPy name
DTYPES = ("float64", "float32")
UNARY_OPS = ("neg", "abs", "sqrt", "exp", "sin", "cos")
ARITH_OPS = ("add", "sub", "mul", "div", "pow", "minimum", "maximum")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
BINARY_OPS = ARITH_OPS + COMPARE_OPS


class Node:
    """Base of expression nodes: structural equality and hashing on ``_key()``."""

    __slots__ = ("_hash",)

    def _key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        try:
            return self._hash  # type: ignore[has-type]
        except AttributeError:
            h = self._hash = hash((type(self).__name__, self._key()))
            return h

    def __repr__(self) -> str:
        return dumps(self)

    def __reduce__(self) -> tuple:
        return (type(self), self._key())


class Const(Node):
    """A scalar. ``dtype`` is None for a Python number (NumPy's "weak" scalar, which
    takes the type of the array it meets) or a dtype name for a NumPy scalar."""

    __slots__ = ("value", "dtype")

    def __init__(self, value: Union[float, int, bool], dtype: str | None = None):
        self.value = value
        self.dtype = dtype

    def _key(self) -> tuple:
        # 0.0 == -0.0 and 1 == 1.0 in Python: key on the exact text instead
        return (_scalar_text(self.value), self.dtype)

    def __reduce__(self) -> tuple:
        return (Const, (self.value, self.dtype))


class Axis:
    """How one grid axis is indexed: positions ``start + step*i`` for ``i < count``;
    ``squeezed`` when the user gave an integer (the axis is dropped from the shape)."""

    __slots__ = ("start", "step", "count", "squeezed")

    def __init__(self, start: int, step: int, count: int, squeezed: bool = False):
        self.start, self.step, self.count, self.squeezed = start, step, count, squeezed

    def key(self) -> tuple:
        return (self.start, self.step, self.count, self.squeezed)

    def positions(self) -> range:
        return range(self.start, self.start + self.step * self.count, self.step) if self.count else range(0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Axis) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"Axis{self.key()}"

    def __reduce__(self) -> tuple:
        return (Axis, self.key())


class Read(Node):
    """Field ``field`` (a slot number) indexed per axis; shape = counts of unsqueezed axes."""

    __slots__ = ("field", "axes")

    def __init__(self, field: int, axes: tuple[Axis, ...]):
        self.field = field
        self.axes = axes

    def _key(self) -> tuple:
        return (self.field, tuple(a.key() for a in self.axes))

    def __reduce__(self) -> tuple:
        return (Read, (self.field, self.axes))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.count for a in self.axes if not a.squeezed)


class Unary(Node):
    __slots__ = ("op", "operand")

    def __init__(self, op: str, operand: Node):
        self.op, self.operand = op, operand

    def _key(self) -> tuple:
        return (self.op, self.operand)


class Binary(Node):
    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Node, right: Node):
        self.op, self.left, self.right = op, left, right

    def _key(self) -> tuple:
        return (self.op, self.left, self.right)


class Where(Node):
    __slots__ = ("cond", "a", "b")

    def __init__(self, cond: Node, a: Node, b: Node):
        self.cond, self.a, self.b = cond, a, b

    def _key(self) -> tuple:
        return (self.cond, self.a, self.b)


class Assign(Node):
    """``target = value``: the one kind of statement."""

    __slots__ = ("target", "value")

    def __init__(self, target: Read, value: Node):
        self.target, self.value = target, value

    def _key(self) -> tuple:
        return (self.target, self.value)


# -- traversal -------------------------------------------------------------------------
def walk(node: Node) -> Iterator[Node]:
    """Every node below and including ``node``, parents first."""
    yield node
    if isinstance(node, Unary):
        yield from walk(node.operand)
    elif isinstance(node, Binary):
        yield from walk(node.left)
        yield from walk(node.right)
    elif isinstance(node, Where):
        yield from walk(node.cond)
        yield from walk(node.a)
        yield from walk(node.b)
    elif isinstance(node, Assign):
        yield from walk(node.value)


def reads(node: Node) -> list[Read]:
    """The field reads of an expression (or of a statement's right-hand side), in order."""
    return [n for n in walk(node) if isinstance(n, Read)]


# -- text form -------------------------------------------------------------------------
def _scalar_text(v: Union[float, int, bool]) -> str:
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, int):
        return f"i{v}"
    return f"f{float(v).hex()}"


def _scalar_value(t: str) -> Union[float, int, bool]:
    if t in ("T", "F"):
        return t == "T"
    if t[0] == "i":
        return int(t[1:])
    return float.fromhex(t[1:])


def dumps(node: Node) -> str:
    """The canonical text of ``node`` (an S-expression; exact for every scalar)."""
    if isinstance(node, Const):
        return f"(const {_scalar_text(node.value)} {node.dtype or 'weak'})"
    if isinstance(node, Read):
        axes = " ".join(f"{a.start}:{a.step}:{a.count}{'!' if a.squeezed else ''}" for a in node.axes)
        return f"(read {node.field} {axes})"
    if isinstance(node, Unary):
        return f"({node.op} {dumps(node.operand)})"
    if isinstance(node, Binary):
        return f"({node.op} {dumps(node.left)} {dumps(node.right)})"
    if isinstance(node, Where):
        return f"(where {dumps(node.cond)} {dumps(node.a)} {dumps(node.b)})"
    if isinstance(node, Assign):
        return f"(assign {dumps(node.target)} {dumps(node.value)})"
    raise TypeError(f"not a stencil node: {node!r}")


def _tokens(text: str) -> list[str]:
    return text.replace("(", " ( ").replace(")", " ) ").split()


def loads(text: str) -> Node:
    """The node whose :func:`dumps` is ``text``."""
    toks = _tokens(text)
    pos = 0

    def parse() -> Node:
        nonlocal pos
        assert toks[pos] == "(", f"bad stencil AST text at token {pos}: {toks[pos]!r}"
        head = toks[pos + 1]
        pos += 2
        if head == "const":
            value, dtype = _scalar_value(toks[pos]), toks[pos + 1]
            pos += 3
            return Const(value, None if dtype == "weak" else dtype)
        if head == "read":
            field = int(toks[pos])
            pos += 1
            axes = []
            while toks[pos] != ")":
                t = toks[pos]
                squeezed = t.endswith("!")
                s, st, c = (int(x) for x in t.rstrip("!").split(":"))
                axes.append(Axis(s, st, c, squeezed))
                pos += 1
            pos += 1
            return Read(field, tuple(axes))
        args = []
        while toks[pos] != ")":
            args.append(parse())
        pos += 1
        if head in UNARY_OPS:
            return Unary(head, args[0])
        if head in BINARY_OPS:
            return Binary(head, args[0], args[1])
        if head == "where":
            return Where(*args)
        if head == "assign":
            target = args[0]
            assert isinstance(target, Read)
            return Assign(target, args[1])
        raise ValueError(f"unknown stencil AST node {head!r}")

    node = parse()
    if pos != len(toks):
        raise ValueError("trailing text after a stencil AST")
    return node


def digest(text: str) -> str:
    """The hash that names a statement or kernel (hex, 16 digits)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]
