"""NICVM front end: good programs compile, bad ones fail with the exact line, column and caret."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster import nicvm as host_nicvm
from nicd.nicvm import limits
from nicd.nicvm.compiler import compile_module
from nicd.nicvm.errors import NicvmError, NicvmLimitError, NicvmSemanticError, NicvmSyntaxError
from nicd.nicvm.modules import BCAST_BINARY_TREE, NOOP, SCALE_F64

GOOD = [
    BCAST_BINARY_TREE,
    NOOP,
    SCALE_F64,
    # helpers with parameters and results, forward calls, recursion, floats, comments
    """
    func main()
        var x: float;
        x = twice(1.5) + to_float(fact(5));  // 3.0 + 120.0
        if x == 123.0 and not (x < 0.0) or 0 then
            return NICVM_RESULT_PACKET_CONSUMED;
        else
            return NICVM_RESULT_FAILURE;
        end if;
    end func;
    func twice(v: float): float return v * 2.0; end func;
    func fact(n: int): int
        if n <= 1 then return 1; end if;
        return n * fact(n - 1);
    end func;
    """,
    "func main() return; end func;",
    "func main(): int var i; while i < 3 do i = i + 1; end while; end func;",
]


@pytest.mark.parametrize("source", GOOD)
def test_good_programs_compile_and_pass_check(source: str) -> None:
    module = compile_module(source)
    assert module.functions[module.main].name == "main"
    assert host_nicvm.check(source) is None


def error_of(source: str) -> NicvmError:
    with pytest.raises(NicvmError) as info:
        compile_module(source)
    return info.value


# (source, error class, line, column, words the message must contain)
BAD = [
    ("func main() if a = b then end if; end func;", NicvmSyntaxError, 1, 18, "'=='"),
    ("func main()\n  var x;\n  x = 1\nend func;", NicvmSyntaxError, 4, 1, "missing ';'"),
    ("func main() return 0; end func", NicvmSyntaxError, 1, 31, "missing ';'"),
    ("func main() var x; x = $; end func;", NicvmSyntaxError, 1, 24, "'$'"),
    ("func main()\n  return 0;\nend if;", NicvmSyntaxError, 3, 5, "unexpected 'if'"),
    ("", NicvmSyntaxError, 1, 1, "end of module"),
    ("func main() var x; x = 9223372036854775808; end func;", NicvmSyntaxError, 1, 24, "64 bits"),
    ("func main() var if; end func;", NicvmSyntaxError, 1, 17, "unexpected 'if'"),
    ("func main()\n  y = 1;\nend func;", NicvmSemanticError, 2, 3, "undeclared variable 'y'"),
    ("func main()\n  return y;\nend func;", NicvmSemanticError, 2, 10, "undeclared variable 'y'"),
    ("func main()\n  foo(1);\nend func;", NicvmSemanticError, 2, 3, "unknown function 'foo'"),
    (
        "func main()\n  mpi_send_message(1);\nend func;",
        NicvmSemanticError,
        2,
        3,
        "takes 2 arguments, got 1",
    ),
    (
        "func f(a, b) return a; end func;\nfunc main() return f(1); end func;",
        NicvmSemanticError,
        2,
        20,
        "'f' takes 2 arguments, got 1",
    ),
    ("func main()\n  var x;\n  var x;\nend func;", NicvmSemanticError, 3, 7, "already declared"),
    ("func f(a, a) return 0; end func; func main() end func;", NicvmSemanticError, 1, 11, "a"),
    (
        "func main() end func;\nfunc main() end func;",
        NicvmSemanticError,
        2,
        6,
        "already defined (line 1)",
    ),
    ("func helper() return 0; end func;", NicvmSemanticError, 1, 1, "no 'func main()'"),
    ("func main(a) return a; end func;", NicvmSemanticError, 1, 6, "no parameters"),
    ("func main(): float return 0.0; end func;", NicvmSemanticError, 1, 6, "returns int"),
    ("func main() var x; x = 1.5; end func;", NicvmSemanticError, 1, 24, "to_int"),
    ("func main() var x: float; x = 1; end func;", NicvmSemanticError, 1, 31, "to_float"),
    ("func main() return 1 + 2.0; end func;", NicvmSemanticError, 1, 22, "one type"),
    ("func main() return to_int(5.0 % 2.0); end func;", NicvmSemanticError, 1, 31, "int"),
    ("func main() if 1.0 then end if; end func;", NicvmSemanticError, 1, 16, "condition"),
    ("func main() return not 1.0; end func;", NicvmSemanticError, 1, 24, "'not'"),
    ("func main() return 1 and 2.0; end func;", NicvmSemanticError, 1, 26, "'and'"),
    ("func main() return to_int(7); end func;", NicvmSemanticError, 1, 27, "must be float"),
    ("func f(): float return 1; end func; func main() end func;", NicvmSemanticError, 1, 24, ""),
    ("func main() NICVM_RESULT_SUCCESS = 1; end func;", NicvmSemanticError, 1, 13, "constant"),
    ("func main() var mpi_get_rank; end func;", NicvmSemanticError, 1, 17, "builtin"),
    ("func to_int() return 0; end func; func main() end func;", NicvmSemanticError, 1, 6, ""),
    ("func f() end func; func main() var f; end func;", NicvmSemanticError, 1, 36, "function"),
    ("func f() end func; func main() return f; end func;", NicvmSemanticError, 1, 39, "call"),
]


@pytest.mark.parametrize(("source", "kind", "line", "column", "words"), BAD)
def test_bad_program_error_position(
    source: str, kind: type[NicvmError], line: int, column: int, words: str
) -> None:
    error = error_of(source)
    assert type(error) is kind, error
    assert (error.line, error.column) == (line, column), str(error)
    assert words in error.message
    # the caret sits under the column of the reported line
    text, caret = error.snippet.split("\n")
    assert text == source.splitlines()[line - 1] if source else text == ""
    assert caret == " " * (column - 1) + "^"
    # and emucluster.nicvm.check raises the same error
    with pytest.raises(host_nicvm.NicvmError) as info:
        host_nicvm.check(source)
    assert (info.value.line, info.value.column) == (line, column)


def test_str_of_error_has_position_message_and_caret() -> None:
    error = error_of("func main()\n  y = 1;\nend func;")
    assert str(error) == "line 2, column 3: undeclared variable 'y'\n  y = 1;\n  ^"


# -- limits --------------------------------------------------------------------------------------


def test_source_size_limit_points_at_the_first_byte_past_it() -> None:
    body = "func main() return 0; end func;\n"
    padding = "// " + "x" * (limits.MAX_SOURCE_BYTES - len(body) - 4) + "\n"
    exactly = body + padding
    assert len(exactly.encode()) == limits.MAX_SOURCE_BYTES
    compile_module(exactly)
    error = error_of(exactly + "x")
    assert isinstance(error, NicvmLimitError)
    assert (error.line, error.column) == (3, 1)


def test_nesting_limit() -> None:
    deep = "func main() return " + "-" * limits.MAX_NESTING + "1; end func;"
    error = error_of(deep)
    assert isinstance(error, NicvmLimitError)
    assert "nested" in error.message
    compile_module("func main() return " + "-" * (limits.MAX_NESTING // 2) + "1; end func;")


def test_function_count_limit() -> None:
    helpers = "".join(f"func f{i}() end func;\n" for i in range(limits.MAX_FUNCTIONS - 1))
    compile_module(helpers + "func main() end func;")
    error = error_of(helpers + "func g() end func;\nfunc main() end func;")
    assert isinstance(error, NicvmLimitError)
    assert (error.line, error.column) == (limits.MAX_FUNCTIONS + 1, 6)


def test_parameter_limit() -> None:
    names = [f"p{i}" for i in range(limits.MAX_PARAMS + 1)]
    compile_module(f"func f({', '.join(names[:-1])}) end func; func main() end func;")
    error = error_of(f"func f({', '.join(names)}) end func; func main() end func;")
    assert isinstance(error, NicvmLimitError)
    assert error.column == len("func f(") + len(", ".join(names[:-1])) + 3


def test_variable_limit() -> None:
    decls = "".join(f"var v{i};\n" for i in range(limits.MAX_VARS))
    compile_module(f"func main()\n{decls}end func;")
    error = error_of(f"func main()\n{decls}var extra;\nend func;")
    assert isinstance(error, NicvmLimitError)
    assert (error.line, error.column) == (limits.MAX_VARS + 2, 5)


def test_stack_limit() -> None:
    # right-nested additions keep every left operand on the stack
    def nested(n: int) -> str:
        return "1" if n == 0 else f"(1 + {nested(n - 1)})"

    compile_module(f"func main() return {nested(limits.MAX_STACK - 1)} - 1; end func;")
    error = error_of(f"func main() return {nested(limits.MAX_STACK)}; end func;")
    assert isinstance(error, NicvmLimitError)
    assert "stack" in error.message


def test_code_length_limit() -> None:
    stmt = "x = x + 1;\n"  # 4 instructions
    count = limits.MAX_CODE_LEN // 4
    error = error_of(f"func main()\nvar x;\n{stmt * count}end func;")
    assert isinstance(error, NicvmLimitError)
    assert "instructions" in error.message


# -- robustness ----------------------------------------------------------------------------------

TOKENS = [
    "func", "main", "(", ")", "end", ";", "var", "x", "=", "==", "if", "then", "else", "while",
    "do", "return", "1", "2.5", "+", "-", "*", "/", "%", "and", "or", "not", ",", ":", "int",
    "float", "mpi_send_message", "NICVM_RESULT_SUCCESS", "\n", "<", "$",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(TOKENS), max_size=60)))
def test_any_input_compiles_or_raises_nicvm_error(source: str | list[str]) -> None:
    text = source if isinstance(source, str) else " ".join(source)
    position = (1, 1)
    try:
        compile_module(text)
    except NicvmError as error:
        position = (error.line, error.column)
    assert position >= (1, 1)
