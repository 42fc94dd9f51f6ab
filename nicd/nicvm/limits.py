"""Every bound the NICVM enforces, in one place (thesis §4.2.4-4.2.5; eBPF's verifier limits).

Compile-time bounds are checked once, at upload, by the compiler; run-time bounds are checked
by the VM on each invocation and end the module with a fault outcome, never an exception.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_FUEL",
    "INT_MAX",
    "INT_MIN",
    "MAX_CALL_DEPTH",
    "MAX_CODE_LEN",
    "MAX_FUEL",
    "MAX_FUNCTIONS",
    "MAX_NESTING",
    "MAX_PARAMS",
    "MAX_SENDS",
    "MAX_SOURCE_BYTES",
    "MAX_STACK",
    "MAX_VARS",
]

# -- compile time (upload) ---------------------------------------------------------------------
MAX_SOURCE_BYTES = 16 * 1024  # bytes of UTF-8 module source
MAX_FUNCTIONS = 32  # functions in one module, main included
MAX_PARAMS = 8  # parameters of one function
MAX_VARS = 64  # variable slots of one function (parameters + `var` declarations)
MAX_NESTING = 64  # depth of the parse tree (blocks inside blocks, expressions inside expressions)
MAX_STACK = 32  # operand-stack slots one function may need (computed statically)
MAX_CODE_LEN = 4096  # VM instructions in one module

# -- run time (each invocation) ----------------------------------------------------------------
DEFAULT_FUEL = 10_000  # instructions one invocation may execute unless the caller says otherwise
MAX_FUEL = 1_000_000  # the largest budget the VM accepts; larger requests are clamped
MAX_CALL_DEPTH = 16  # active frames, main included; a deeper call is a STACK_DEPTH fault
MAX_SENDS = 16  # send descriptors one invocation may record; one more is a SEND_LIMIT fault

# -- integer semantics -------------------------------------------------------------------------
# Integers are 64-bit two's complement: +, -, *, /, unary - and to_int wrap modulo 2**64.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
