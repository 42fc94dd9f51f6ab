"""AST -> instructions: name resolution, static types, bounds, code generation, threading.

Invariants: a module that compiles is well typed (no implicit int/float conversion: operands of
one operator share a type, ``to_float``/``to_int`` convert), every name resolves, every function
fits the bounds of ``limits`` and its operand stack is bounded statically. Each AST construct
compiles to a fixed instruction shape (documented on ``_FunctionCompiler``), which fixes the fuel
each construct costs; nothing is optimised away, so fuel is predictable from the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import nicd.nicvm.ast as ast
from nicd.nicvm.ast import Type
from nicd.nicvm.builtins import BUILTINS, CONSTANTS
from nicd.nicvm.errors import NicvmLimitError, NicvmSemanticError
from nicd.nicvm.limits import (
    MAX_CODE_LEN,
    MAX_FUNCTIONS,
    MAX_PARAMS,
    MAX_STACK,
    MAX_VARS,
)
from nicd.nicvm.opcodes import OPS, Op
from nicd.nicvm.parse import parse
from nicd.nicvm.program import Function, Instruction, Module
from nicd.nicvm.vm import thread

if TYPE_CHECKING:
    from nicd.nicvm.machine import Value

__all__ = ["compile_module"]

_INT_OPS = {"+": Op.ADD_I, "-": Op.SUB_I, "*": Op.MUL_I, "/": Op.DIV_I, "%": Op.MOD_I}
_FLOAT_OPS = {"+": Op.ADD_F, "-": Op.SUB_F, "*": Op.MUL_F, "/": Op.DIV_F}
_COMPARE_OPS = {
    "==": Op.CMP_EQ,
    "!=": Op.CMP_NE,
    "<": Op.CMP_LT,
    "<=": Op.CMP_LE,
    ">": Op.CMP_GT,
    ">=": Op.CMP_GE,
}


def compile_module(source: str) -> Module:
    """Parse, check and compile module source once; raise a ``NicvmError`` subclass if bad."""
    tree = parse(source)
    return _ModuleCompiler(source).compile(tree)


@dataclass(frozen=True, slots=True)
class _Signature:
    index: int
    node: ast.FuncDef


class _ModuleCompiler:
    def __init__(self, source: str) -> None:
        self.source = source
        self.code: list[Instruction] = []
        self.signatures: dict[str, _Signature] = {}

    def error(self, message: str, node: _Positioned, kind: type = NicvmSemanticError) -> NoReturn:
        raise kind(message, line=node.line, column=node.column, source=self.source)

    def compile(self, tree: ast.Module) -> Module:
        for func in tree.funcs:
            if len(self.signatures) == MAX_FUNCTIONS:
                self.error(f"more than {MAX_FUNCTIONS} functions", func, NicvmLimitError)
            if func.name in BUILTINS or func.name in CONSTANTS:
                self.error(f"'{func.name}' is a builtin name", func)
            if func.name in self.signatures:
                first = self.signatures[func.name].node
                self.error(f"function '{func.name}' is already defined (line {first.line})", func)
            self.signatures[func.name] = _Signature(len(self.signatures), func)
        main = self.signatures.get("main")
        if main is None:
            raise NicvmSemanticError(
                "the module has no 'func main()'", line=1, column=1, source=self.source
            )
        if main.node.params or main.node.returns is not Type.INT:
            self.error("'main' takes no parameters and returns int", main.node)
        functions = tuple(_FunctionCompiler(self, func).compile() for func in tree.funcs)
        if len(self.code) > MAX_CODE_LEN:
            raise NicvmLimitError(
                f"the module compiles to {len(self.code)} instructions; the limit is "
                f"{MAX_CODE_LEN}",
                line=1,
                column=1,
                source=self.source,
            )
        code = tuple(self.code)
        return Module(
            functions=functions,
            code=code,
            threaded=thread(code, functions),
            main=main.index,
            source_bytes=len(self.source.encode("utf-8")),
        )


_Positioned = ast.Expr | ast.Stmt | ast.FuncDef | ast.Param


class _FunctionCompiler:
    """Code shapes (each instruction costs one unit of fuel):

    literal, constant, variable   CONST / LOAD
    -a, not a, op(a)               a; NEG_x / NOT / <builtin op>
    a <op> b                       a; b; <op>
    a and b  (or: OR_JUMP)         a; AND_JUMP L; b; TO_BOOL; L:
    f(args)                        args; CALL f
    x = e                          e; STORE x
    call as a statement            call; POP
    if c then A end if             c; JUMP_IF_FALSE L; A; L:
    if c then A else B end if      c; JUMP_IF_FALSE E; A; JUMP L; E: B; L:
    while c do A end while         T: c; JUMP_IF_FALSE L; A; JUMP T; L:
    return e  /  return            e; RETURN  /  CONST 0; RETURN
    end of a function              CONST 0; RETURN
    """

    def __init__(self, owner: _ModuleCompiler, func: ast.FuncDef) -> None:
        self.owner = owner
        self.func = func
        self.code = owner.code
        self.slots: dict[str, int] = {}
        self.slot_types: list[Type] = []
        self.declared_at: dict[str, int] = {}
        self.depth = 0
        self.max_depth = 0

    def compile(self) -> Function:
        func = self.func
        if len(func.params) > MAX_PARAMS:
            self.owner.error(
                f"'{func.name}' has more than {MAX_PARAMS} parameters",
                func.params[MAX_PARAMS],
                NicvmLimitError,
            )
        for param in func.params:
            self.declare(param.name, param.type, param)
        entry = len(self.code)
        self.block(func.body)
        self.emit(Op.CONST, self.zero(func.returns), func.line)
        self.emit(Op.RETURN, None, func.line)
        return Function(
            name=func.name,
            params=tuple(p.type for p in func.params),
            returns=func.returns,
            slot_names=tuple(self.slots),
            slot_types=tuple(self.slot_types),
            entry=entry,
            max_stack=self.max_depth,
            zero_slots=tuple(self.zero(kind) for kind in self.slot_types),
        )

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def zero(kind: Type) -> Value:
        return 0.0 if kind is Type.FLOAT else 0

    def emit(self, op: Op, arg: Value | None, line: int, *, pops: int | None = None) -> int:
        info = OPS[op]
        self.depth += info.pushes - (info.pops if pops is None else pops)
        self.max_depth = max(self.max_depth, self.depth)
        self.code.append(Instruction(op, arg, line))
        return len(self.code) - 1

    def patch(self, at: int, target: int) -> None:
        old = self.code[at]
        self.code[at] = Instruction(old.op, target, old.line)

    def declare(self, name: str, kind: Type, node: ast.VarDecl | ast.Param) -> None:
        if name in CONSTANTS or name in BUILTINS:
            self.owner.error(f"'{name}' is a builtin name", node)
        if name in self.owner.signatures:
            self.owner.error(f"'{name}' is already a function", node)
        if name in self.slots:
            self.owner.error(f"'{name}' is already declared (line {self.declared_at[name]})", node)
        if len(self.slots) == MAX_VARS:
            self.owner.error(
                f"'{self.func.name}' has more than {MAX_VARS} variables", node, NicvmLimitError
            )
        self.slots[name] = len(self.slots)
        self.slot_types.append(kind)
        self.declared_at[name] = node.line

    def variable(self, name: str, node: ast.Name | ast.Assign) -> int:
        slot = self.slots.get(name)
        if slot is not None:
            return slot
        if name in self.owner.signatures or name in BUILTINS:
            self.owner.error(f"'{name}' is a function; call it as {name}(...)", node)
        self.owner.error(f"undeclared variable '{name}'", node)

    # -- statements ------------------------------------------------------------------------------

    def block(self, body: tuple[ast.Stmt, ...]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.Stmt) -> None:
        if isinstance(stmt, ast.VarDecl):
            self.declare(stmt.name, stmt.type, stmt)
        elif isinstance(stmt, ast.Assign):
            if stmt.name in CONSTANTS:
                self.owner.error(f"cannot assign to the constant '{stmt.name}'", stmt)
            slot = self.variable(stmt.name, stmt)
            kind = self.expression(stmt.value)
            want = self.slot_types[slot]
            if kind is not want:
                hint = "to_float" if want is Type.FLOAT else "to_int"
                self.owner.error(
                    f"cannot assign {kind.value} to {want.value} variable '{stmt.name}'"
                    f" (convert with {hint})",
                    stmt.value,
                )
            self.emit(Op.STORE, slot, stmt.line)
        elif isinstance(stmt, ast.CallStmt):
            self.call(stmt.call)
            self.emit(Op.POP, None, stmt.line)
        elif isinstance(stmt, ast.If):
            self.condition(stmt.cond)
            to_else = self.emit(Op.JUMP_IF_FALSE, None, stmt.line)
            self.block(stmt.then)
            if stmt.orelse is None:
                self.patch(to_else, len(self.code))
            else:
                to_end = self.emit(Op.JUMP, None, stmt.line)
                self.patch(to_else, len(self.code))
                self.block(stmt.orelse)
                self.patch(to_end, len(self.code))
        elif isinstance(stmt, ast.While):
            top = len(self.code)
            self.condition(stmt.cond)
            to_end = self.emit(Op.JUMP_IF_FALSE, None, stmt.line)
            self.block(stmt.body)
            self.emit(Op.JUMP, top, stmt.line)
            self.patch(to_end, len(self.code))
        else:
            want = self.func.returns
            if stmt.value is None:
                self.emit(Op.CONST, self.zero(want), stmt.line)
            else:
                kind = self.expression(stmt.value)
                if kind is not want:
                    self.owner.error(
                        f"'{self.func.name}' returns {want.value}, not {kind.value}", stmt.value
                    )
            self.emit(Op.RETURN, None, stmt.line)

    def condition(self, expr: ast.Expr) -> None:
        kind = self.expression(expr)
        if kind is not Type.INT:
            self.owner.error("a condition must be int (compare floats with <, == ...)", expr)

    # -- expressions -----------------------------------------------------------------------------

    def expression(self, expr: ast.Expr) -> Type:
        kind = self._expression(expr)
        if self.depth > MAX_STACK:
            self.owner.error(
                f"expression needs more than {MAX_STACK} stack slots", expr, NicvmLimitError
            )
        return kind

    def _expression(self, expr: ast.Expr) -> Type:
        if isinstance(expr, ast.IntLit):
            self.emit(Op.CONST, expr.value, expr.line)
            return Type.INT
        if isinstance(expr, ast.FloatLit):
            self.emit(Op.CONST, expr.value, expr.line)
            return Type.FLOAT
        if isinstance(expr, ast.Name):
            if expr.id in CONSTANTS:
                self.emit(Op.CONST, CONSTANTS[expr.id], expr.line)
                return Type.INT
            slot = self.variable(expr.id, expr)
            self.emit(Op.LOAD, slot, expr.line)
            return self.slot_types[slot]
        if isinstance(expr, ast.Unary):
            kind = self.expression(expr.operand)
            if expr.op == "not":
                self.require_int(kind, "'not'", expr.operand)
                self.emit(Op.NOT, None, expr.line)
            else:
                self.emit(Op.NEG_I if kind is Type.INT else Op.NEG_F, None, expr.line)
            return kind
        if isinstance(expr, ast.Binary):
            return self.binary(expr)
        if isinstance(expr, ast.Logic):
            self.require_int(self.expression(expr.left), f"'{expr.op}'", expr.left)
            jump = self.emit(Op.AND_JUMP if expr.op == "and" else Op.OR_JUMP, None, expr.line)
            self.require_int(self.expression(expr.right), f"'{expr.op}'", expr.right)
            self.emit(Op.TO_BOOL, None, expr.line)
            self.patch(jump, len(self.code))
            return Type.INT
        return self.call(expr)

    def require_int(self, kind: Type, what: str, node: ast.Expr) -> None:
        if kind is not Type.INT:
            self.owner.error(f"{what} needs an int operand, got {kind.value}", node)

    def binary(self, expr: ast.Binary) -> Type:
        left = self.expression(expr.left)
        right = self.expression(expr.right)
        if left is not right:
            self.owner.error(
                f"'{expr.op}' needs operands of one type, got {left.value} and {right.value}"
                " (convert with to_float or to_int)",
                expr,
            )
        if expr.op in _COMPARE_OPS:
            self.emit(_COMPARE_OPS[expr.op], None, expr.line)
            return Type.INT
        table = _INT_OPS if left is Type.INT else _FLOAT_OPS
        if expr.op not in table:
            self.owner.error(f"'{expr.op}' needs int operands, got {left.value}", expr)
        self.emit(table[expr.op], None, expr.line)
        return left

    def call(self, call: ast.Call) -> Type:
        builtin = BUILTINS.get(call.name)
        signature = self.owner.signatures.get(call.name)
        if builtin is not None:
            params, returns = builtin.params, builtin.returns
        elif signature is not None:
            params = tuple(p.type for p in signature.node.params)
            returns = signature.node.returns
        else:
            self.owner.error(f"unknown function '{call.name}'", call)
        if len(call.args) != len(params):
            self.owner.error(
                f"'{call.name}' takes {len(params)} argument{'s' * (len(params) != 1)},"
                f" got {len(call.args)}",
                call,
            )
        for position, (arg, want) in enumerate(zip(call.args, params, strict=True), 1):
            kind = self.expression(arg)
            if kind is not want:
                self.owner.error(
                    f"argument {position} of '{call.name}' must be {want.value}, got {kind.value}",
                    arg,
                )
        if builtin is not None:
            self.emit(builtin.op, None, call.line)
        else:
            assert signature is not None
            self.emit(Op.CALL, signature.index, call.line, pops=len(params))
        return returns
