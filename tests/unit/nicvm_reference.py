"""A small tree-walking evaluator of NICVM ASTs: the oracle the VM is checked against.

Written for obviousness, not speed, and sharing no code with ``nicd/nicvm/vm.py``: it walks the
AST and charges one unit of fuel for each instruction the compiler's documented code shapes
would execute (``_FunctionCompiler``'s docstring), in the same order, before the effect.
Semantics: 64-bit wrapping ints, C99 ``/`` and ``%``, IEEE floats, faults as in ``vm.Fault``;
the MPI builtins see root-relative ranks; on any outcome but OK the packet is left untouched.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from nicd.nicvm import ast
from nicd.nicvm.limits import MAX_CALL_DEPTH, MAX_SENDS

RESULTS = (0, 1, 2)
SEND_TYPE = 16  # GM_ST_RELIABLE_NICVM_NIC_DATA
CONSTANTS = {
    "NICVM_RESULT_SUCCESS": 0,
    "NICVM_RESULT_PACKET_CONSUMED": 1,
    "NICVM_RESULT_FAILURE": 2,
    "GM_ST_RELIABLE_NICVM_NIC_DATA": SEND_TYPE,
}


def wrap(value: int) -> int:
    value %= 2**64
    return value - 2**64 if value >= 2**63 else value


def c_div(a: int, b: int) -> int:
    quotient = a // b  # floors; C truncates toward zero
    if quotient < 0 and quotient * b != a:
        quotient += 1
    return quotient


@dataclass
class Outcome:
    kind: str  # "ok", "fault", "out_of_fuel"
    result: int | None
    sends: list[tuple[int, int]]
    fuel_used: int
    fault: str | None  # the vm.Fault member name
    payload: bytes
    args: list[int]


class _Exhausted(Exception):
    pass


class _Faulted(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


class _Returned(Exception):
    def __init__(self, value: int | float) -> None:
        self.value = value


def evaluate(
    module: ast.Module,
    *,
    rank: int,
    size: int,
    root: int,
    args: list[int],
    payload: bytes,
    fuel: int,
) -> Outcome:
    machine = _Reference(module, rank=rank, size=size, root=root, args=args, payload=payload)
    machine.budget = fuel
    main = machine.funcs["main"]
    try:
        value = machine.invoke(main, [])
        if value not in RESULTS:
            raise _Faulted("BAD_RESULT")
    except _Exhausted:
        return Outcome("out_of_fuel", None, [], machine.used, None, payload, list(args))
    except _Faulted as fault:
        return Outcome("fault", None, [], machine.used, fault.name, payload, list(args))
    return Outcome(
        "ok", int(value), machine.sends, machine.used, None, bytes(machine.payload), machine.args
    )


class _Reference:
    def __init__(
        self,
        module: ast.Module,
        *,
        rank: int,
        size: int,
        root: int,
        args: list[int],
        payload: bytes,
    ) -> None:
        self.funcs = {func.name: func for func in module.funcs}
        self.size = size
        self.root = root
        self.relative_rank = (rank - root) % size
        self.args = list(args)
        self.payload = bytearray(payload)
        self.sends: list[tuple[int, int]] = []
        self.used = 0
        self.budget = 0
        self.depth = 0

    def charge(self) -> None:
        if self.used == self.budget:
            raise _Exhausted
        self.used += 1

    # -- functions and statements ----------------------------------------------------------------

    def invoke(self, func: ast.FuncDef, values: list[int | float]) -> int | float:
        if self.depth == MAX_CALL_DEPTH:
            raise _Faulted("CALL_DEPTH")
        self.depth += 1
        env: dict[str, int | float] = {}
        for decl in _declarations(func):
            env[decl.name] = 0.0 if decl.type is ast.Type.FLOAT else 0
        for param, value in zip(func.params, values, strict=True):
            env[param.name] = value
        try:
            self.block(func.body, env)
            self.charge()  # CONST 0
            self.charge()  # RETURN
            value: int | float = 0.0 if func.returns is ast.Type.FLOAT else 0
        except _Returned as returned:
            value = returned.value
        self.depth -= 1
        return value

    def block(self, body: tuple[ast.Stmt, ...], env: dict[str, int | float]) -> None:
        for stmt in body:
            self.statement(stmt, env)

    def statement(self, stmt: ast.Stmt, env: dict[str, int | float]) -> None:
        if isinstance(stmt, ast.VarDecl):
            return
        if isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value, env)
            self.charge()  # STORE
            env[stmt.name] = value
        elif isinstance(stmt, ast.CallStmt):
            self.expr(stmt.call, env)
            self.charge()  # POP
        elif isinstance(stmt, ast.If):
            cond = self.expr(stmt.cond, env)
            self.charge()  # JUMP_IF_FALSE
            if cond != 0:
                self.block(stmt.then, env)
                if stmt.orelse is not None:
                    self.charge()  # JUMP over the else part
            elif stmt.orelse is not None:
                self.block(stmt.orelse, env)
        elif isinstance(stmt, ast.While):
            while True:
                cond = self.expr(stmt.cond, env)
                self.charge()  # JUMP_IF_FALSE
                if cond == 0:
                    break
                self.block(stmt.body, env)
                self.charge()  # JUMP back
        else:
            if stmt.value is None:
                self.charge()  # CONST 0
                value: int | float = 0
            else:
                value = self.expr(stmt.value, env)
            self.charge()  # RETURN
            raise _Returned(value)

    # -- expressions -----------------------------------------------------------------------------

    def expr(self, expr: ast.Expr, env: dict[str, int | float]) -> int | float:
        if isinstance(expr, ast.IntLit | ast.FloatLit):
            self.charge()
            return expr.value
        if isinstance(expr, ast.Name):
            self.charge()
            return CONSTANTS[expr.id] if expr.id in CONSTANTS else env[expr.id]
        if isinstance(expr, ast.Unary):
            value = self.expr(expr.operand, env)
            self.charge()
            if expr.op == "not":
                return 1 if value == 0 else 0
            return wrap(-value) if isinstance(value, int) else -value
        if isinstance(expr, ast.Logic):
            left = self.expr(expr.left, env)
            self.charge()  # AND_JUMP / OR_JUMP
            if expr.op == "and" and left == 0:
                return 0
            if expr.op == "or" and left != 0:
                return 1
            right = self.expr(expr.right, env)
            self.charge()  # TO_BOOL
            return 0 if right == 0 else 1
        if isinstance(expr, ast.Binary):
            left = self.expr(expr.left, env)
            right = self.expr(expr.right, env)
            self.charge()
            return _binary(expr.op, left, right)
        values = [self.expr(arg, env) for arg in expr.args]
        self.charge()  # the builtin's instruction, or CALL
        if expr.name in self.funcs:
            return self.invoke(self.funcs[expr.name], values)
        return self.builtin(expr.name, values)

    def builtin(self, name: str, values: list[int | float]) -> int | float:
        if name == "mpi_get_size":
            return self.size
        if name == "mpi_get_rank":
            return self.relative_rank
        if name == "mpi_get_root":
            return 0
        if name == "mpi_send_message":
            kind, rank = values
            if kind != SEND_TYPE:
                raise _Faulted("SEND_TYPE")
            if not 0 <= rank < self.size:
                raise _Faulted("SEND_RANK")
            if len(self.sends) == MAX_SENDS:
                raise _Faulted("SEND_LIMIT")
            self.sends.append((int(kind), (int(rank) + self.root) % self.size))
            return 0
        if name == "packet_length":
            return len(self.payload)
        if name == "to_float":
            return float(values[0])
        if name == "to_int":
            if math.isnan(values[0]) or math.isinf(values[0]):
                raise _Faulted("FLOAT_TO_INT")
            return wrap(math.trunc(values[0]))
        if name in ("packet_get_arg", "packet_set_arg"):
            index = int(values[0])
            if index < 0 or index >= len(self.args):
                raise _Faulted("ARG_RANGE")
            if name == "packet_get_arg":
                return self.args[index]
            self.args[index] = int(values[1]) % 2**32
            return 0
        return self.payload_access(name, values)

    def payload_access(self, name: str, values: list[int | float]) -> int | float:
        width = {"u8": 1, "u32": 4, "i32": 4, "f64": 8}[name[-3:].lstrip("_")]
        start = int(values[0]) * width
        if start < 0 or start + width > len(self.payload):
            raise _Faulted("PAYLOAD_RANGE")
        field = slice(start, start + width)
        if name.startswith("payload_get_"):
            if name.endswith("f64"):
                return float(struct.unpack("<d", self.payload[field])[0])
            signed = name.endswith("i32")
            return int.from_bytes(self.payload[field], "little", signed=signed)
        if name.endswith("f64"):
            self.payload[field] = struct.pack("<d", values[1])
        else:
            self.payload[field] = (int(values[1]) % 2 ** (8 * width)).to_bytes(width, "little")
        return 0


def _binary(op: str, left: int | float, right: int | float) -> int | float:
    if op in ("==", "!=", "<", "<=", ">", ">="):
        holds = {
            "==": left == right,
            "!=": left != right,
            "<": left < right,
            "<=": left <= right,
            ">": left > right,
            ">=": left >= right,
        }[op]
        return 1 if holds else 0
    if op in ("/", "%") and right == 0:
        raise _Faulted("DIV_ZERO")
    if op == "+":
        value = left + right
    elif op == "-":
        value = left - right
    elif op == "*":
        value = left * right
    elif isinstance(left, float):
        return left / right
    elif op == "/":
        value = c_div(left, int(right))
    else:
        return left - right * c_div(left, int(right))
    return value if isinstance(value, float) else wrap(value)


def _declarations(func: ast.FuncDef) -> list[ast.VarDecl]:
    found: list[ast.VarDecl] = []
    pending: list[ast.Stmt] = list(func.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, ast.VarDecl):
            found.append(stmt)
        elif isinstance(stmt, ast.If):
            pending += [*stmt.then, *(stmt.orelse or ())]
        elif isinstance(stmt, ast.While):
            pending += stmt.body
    return found
