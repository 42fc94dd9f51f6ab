"""The NICVM module AST: frozen dataclasses, each carrying its 1-based line and column.

Built by ``parse.py`` from lark's tree; read by the compiler and by the test suite's reference
evaluator. Nodes hold no types: the compiler infers them (``Type``) while generating code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "Assign",
    "Binary",
    "Call",
    "CallStmt",
    "Expr",
    "FloatLit",
    "FuncDef",
    "If",
    "IntLit",
    "Logic",
    "Module",
    "Name",
    "Param",
    "Return",
    "Stmt",
    "Type",
    "Unary",
    "VarDecl",
    "While",
]


class Type(Enum):
    """The two value types: 64-bit wrapping integers and IEEE float64."""

    INT = "int"
    FLOAT = "float"


@dataclass(frozen=True, slots=True)
class IntLit:
    value: int
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class FloatLit:
    value: float
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Name:
    """A variable or a named constant (``NICVM_RESULT_SUCCESS``)."""

    id: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-" or "not"
    operand: Expr
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Binary:
    """Arithmetic (+ - * / %) or comparison (== != < <= > >=)."""

    op: str
    left: Expr
    right: Expr
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Logic:
    """Short-circuit ``and`` / ``or``; the value is 0 or 1."""

    op: str
    left: Expr
    right: Expr
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Call:
    """A call of a builtin or of a function of the module."""

    name: str
    args: tuple[Expr, ...]
    line: int
    column: int


Expr = IntLit | FloatLit | Name | Unary | Binary | Logic | Call


@dataclass(frozen=True, slots=True)
class VarDecl:
    name: str
    type: Type
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Assign:
    name: str
    value: Expr
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class CallStmt:
    call: Call
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] | None  # None: no `else` (an empty `else` is ())
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class While:
    cond: Expr
    body: tuple[Stmt, ...]
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Return:
    value: Expr | None
    line: int
    column: int


Stmt = VarDecl | Assign | CallStmt | If | While | Return


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: Type
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class FuncDef:
    name: str
    params: tuple[Param, ...]
    returns: Type
    body: tuple[Stmt, ...]
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Module:
    funcs: tuple[FuncDef, ...]
