"""Source text -> AST: the lark LALR parser, the size and nesting bounds, friendly syntax errors.

Invariants: every lark exception becomes a ``NicvmSyntaxError`` carrying lark's line and column;
the nesting bound is checked iteratively before any recursive pass (the transformer, the
compiler, the reference evaluator) sees the tree, so no source can exhaust Python's stack.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

import nicd.nicvm.ast as ast
from nicd.nicvm.errors import NicvmLimitError, NicvmSyntaxError
from nicd.nicvm.limits import MAX_NESTING, MAX_SOURCE_BYTES

if TYPE_CHECKING:
    from lark.tree import Meta

__all__ = ["GRAMMAR_FILE", "parse"]

GRAMMAR_FILE = "grammar.lark"
"""The NICVM grammar, package data of ``nicd.nicvm``."""

# How lark's terminal names read in an error message.
_TERMINAL_TEXT = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a float",
    "COMP_OP": "a comparison",
    "MUL_OP": "'*', '/' or '%'",
    "$END": "end of module",
}
_STATEMENT_STARTS = frozenset({"END", "VAR", "IF", "WHILE", "RETURN", "NAME", "ELSE"})


@functools.cache
def _parser() -> Lark:
    """Built once per process, on first use (a few tens of ms). The grammar is package data
    (``nicd/nicvm/grammar.lark``, shipped in the wheel), read through importlib.resources so it
    is found however the package was installed."""
    grammar = resources.files("nicd.nicvm").joinpath(GRAMMAR_FILE).read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="basic", propagate_positions=True)


def parse(source: str) -> ast.Module:
    """Parse module source into an AST; raise ``NicvmSyntaxError`` or ``NicvmLimitError``."""
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        line, column = _position_of(source, _char_index_of_byte(source, MAX_SOURCE_BYTES))
        raise NicvmLimitError(
            f"module source is {size} bytes; the limit is {MAX_SOURCE_BYTES}",
            line=line,
            column=column,
            source=source,
        )
    try:
        tree = _parser().parse(source)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, source) from None
    _check_nesting(tree, source)
    try:
        module = _ToAst().transform(tree)
    except VisitError as exc:  # a literal out of range, raised inside a callback
        if isinstance(exc.orig_exc, NicvmSyntaxError):
            orig = exc.orig_exc
            raise NicvmSyntaxError(
                orig.message, line=orig.line, column=orig.column, source=source
            ) from None
        raise
    assert isinstance(module, ast.Module)
    return module


# -- errors ------------------------------------------------------------------------------------


def _syntax_error(exc: UnexpectedInput, source: str) -> NicvmSyntaxError:
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedCharacters):
        at = exc.pos_in_stream
        char = source[at] if at is not None and at < len(source) else "?"
        message = f"unexpected character {char!r}"
    elif isinstance(exc, UnexpectedToken):
        token, expected = exc.token, set(exc.expected)
        if token.type == "$END":
            line, column = _position_of(source, len(source.rstrip()))
            found = "end of module"
        else:
            found = repr(str(token))
        if token.type == "EQUAL" and "COMP_OP" in expected:
            message = "use '==' to compare; '=' assigns"
        elif "SEMICOLON" in expected and token.type in _STATEMENT_STARTS | {"$END"}:
            message = f"missing ';' before {found}"
        else:
            wanted = ", ".join(sorted(_terminal_text(name) for name in expected))
            message = f"unexpected {found}; expected {wanted}"
    else:  # pragma: no cover - the LALR parser raises only the two above (and EOF as a token)
        message = "syntax error"
    if line < 1:  # lark leaves -1 when it has no position
        line, column = _position_of(source, len(source))
    return NicvmSyntaxError(message, line=line, column=column, source=source)


def _terminal_text(name: str) -> str:
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    pattern = _parser().get_terminal(name).pattern
    return repr(pattern.value)


def _position_of(source: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of the character at ``index``."""
    before = source[:index]
    line = before.count("\n") + 1
    return line, index - (before.rfind("\n") + 1) + 1


def _char_index_of_byte(source: str, limit: int) -> int:
    """Index of the first character whose UTF-8 encoding ends past byte ``limit``."""
    used = 0
    for index, char in enumerate(source):
        used += len(char.encode("utf-8"))
        if used > limit:
            return index
    return len(source)


def _check_nesting(tree: Tree[Token], source: str) -> None:
    stack: list[tuple[Tree[Token], int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            meta = node.meta
            raise NicvmLimitError(
                f"nested more than {MAX_NESTING} levels deep",
                line=getattr(meta, "line", 1),
                column=getattr(meta, "column", 1),
                source=source,
            )
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))


# -- lark tree -> AST ----------------------------------------------------------------------------


def _pos(meta: Meta) -> tuple[int, int]:
    return meta.line, meta.column


def _stmts(children: list[object]) -> tuple[ast.Stmt, ...]:
    return tuple(child for child in children if not isinstance(child, Token))  # type: ignore[misc]


@v_args(meta=True)
class _ToAst(Transformer[Token, object]):
    """One method per grammar rule or alias; each returns an AST node."""

    def start(self, meta: Meta, children: list[ast.FuncDef]) -> ast.Module:
        return ast.Module(tuple(children))

    def func_def(self, meta: Meta, children: list[object]) -> ast.FuncDef:
        name, params, returns, body = children
        assert isinstance(name, Token)
        return ast.FuncDef(
            str(name),
            params if isinstance(params, tuple) else (),
            returns if isinstance(returns, ast.Type) else ast.Type.INT,
            body,  # type: ignore[arg-type]
            name.line,  # type: ignore[arg-type]
            name.column,  # type: ignore[arg-type]
        )

    def params(self, meta: Meta, children: list[ast.Param]) -> tuple[ast.Param, ...]:
        return tuple(children)

    def param(self, meta: Meta, children: list[object]) -> ast.Param:
        name, kind = children
        return ast.Param(str(name), kind or ast.Type.INT, *_pos(meta))  # type: ignore[arg-type]

    def int_type(self, meta: Meta, children: list[object]) -> ast.Type:
        return ast.Type.INT

    def float_type(self, meta: Meta, children: list[object]) -> ast.Type:
        return ast.Type.FLOAT

    def body(self, meta: Meta, children: list[object]) -> tuple[ast.Stmt, ...]:
        return _stmts(children)

    def var_decl(self, meta: Meta, children: list[object]) -> ast.VarDecl:
        name, kind = children
        assert isinstance(name, Token)
        return ast.VarDecl(str(name), kind or ast.Type.INT, name.line, name.column)  # type: ignore[arg-type]

    def assign(self, meta: Meta, children: list[object]) -> ast.Assign:
        name, value = children
        return ast.Assign(str(name), value, *_pos(meta))  # type: ignore[arg-type]

    def call_stmt(self, meta: Meta, children: list[ast.Call]) -> ast.CallStmt:
        return ast.CallStmt(children[0], *_pos(meta))

    def if_stmt(self, meta: Meta, children: list[object]) -> ast.If:
        cond, then, orelse = children
        return ast.If(cond, then, orelse, *_pos(meta))  # type: ignore[arg-type]

    def else_part(self, meta: Meta, children: list[object]) -> tuple[ast.Stmt, ...]:
        body = children[0]
        assert isinstance(body, tuple)
        return body

    def while_stmt(self, meta: Meta, children: list[object]) -> ast.While:
        cond, body = children
        return ast.While(cond, body, *_pos(meta))  # type: ignore[arg-type]

    def return_stmt(self, meta: Meta, children: list[object]) -> ast.Return:
        return ast.Return(children[0], *_pos(meta))  # type: ignore[arg-type]

    def or_op(self, meta: Meta, children: list[ast.Expr]) -> ast.Logic:
        return ast.Logic("or", children[0], children[1], *_pos(meta))

    def and_op(self, meta: Meta, children: list[ast.Expr]) -> ast.Logic:
        return ast.Logic("and", children[0], children[1], *_pos(meta))

    def not_op(self, meta: Meta, children: list[ast.Expr]) -> ast.Unary:
        return ast.Unary("not", children[0], *_pos(meta))

    def binop(self, meta: Meta, children: list[object]) -> ast.Binary:
        left, op, right = children
        assert isinstance(op, Token)
        return ast.Binary(str(op), left, right, op.line, op.column)  # type: ignore[arg-type]

    def neg(self, meta: Meta, children: list[object]) -> ast.Unary:
        return ast.Unary("-", children[1], *_pos(meta))  # type: ignore[arg-type]

    def int_lit(self, meta: Meta, children: list[Token]) -> ast.IntLit:
        token = children[0]
        value = int(token)
        if value > 2**63 - 1:
            raise NicvmSyntaxError(
                "integer literal does not fit in 64 bits",
                line=token.line,  # type: ignore[arg-type]
                column=token.column,  # type: ignore[arg-type]
            )
        return ast.IntLit(value, *_pos(meta))

    def float_lit(self, meta: Meta, children: list[Token]) -> ast.FloatLit:
        return ast.FloatLit(float(children[0]), *_pos(meta))

    def name(self, meta: Meta, children: list[Token]) -> ast.Name:
        return ast.Name(str(children[0]), *_pos(meta))

    def call(self, meta: Meta, children: list[object]) -> ast.Call:
        name, args = children
        return ast.Call(str(name), args if isinstance(args, tuple) else (), *_pos(meta))

    def args(self, meta: Meta, children: list[ast.Expr]) -> tuple[ast.Expr, ...]:
        return tuple(children)
