"""The VM against the reference evaluator on hypothesis-generated, well-typed programs.

Same outcome, result code, sends, fuel used, fault kind and final packet, for every budget:
both finish or both run out of fuel, at the same instruction (STYLE §8; byterun's vmtest).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nicd.nicvm.compiler import compile_module
from nicd.nicvm.parse import parse
from nicd.nicvm.vm import Outcome, Packet, run
from tests.unit.nicvm_reference import Outcome as RefOutcome
from tests.unit.nicvm_reference import evaluate

INT_LITERALS = [
    "0",
    "1",
    "2",
    "3",
    "5",
    "(-7)",
    "255",
    "4294967295",
    "4611686018427387904",
    "9223372036854775807",
    "(-9223372036854775807 - 1)",
]
FLOAT_LITERALS = ["0.0", "1.5", "2.25", "0.1", "1e300", "3.0e-5"]
INT_LEAVES = [
    "mpi_get_rank()",
    "mpi_get_size()",
    "mpi_get_root()",
    "packet_length()",
    "NICVM_RESULT_SUCCESS",
    "NICVM_RESULT_PACKET_CONSUMED",
    "GM_ST_RELIABLE_NICVM_NIC_DATA",
]
ARITH = ["+", "-", "*", "/", "%"]
COMPARE = ["==", "!=", "<", "<=", ">", ">="]
SIGNATURES = """
func h0(p, q: float)
{h0}
end func;

func h1(r: float): float
{h1}
end func;
"""


class _Gen:
    """Draws source text for expressions and statements of a scope (its int and float names)."""

    def __init__(self, draw: st.DrawFn, ints: list[str], floats: list[str], counter: str) -> None:
        self.draw, self.ints, self.floats, self.counter = draw, ints, floats, counter

    def pick(self, options: list[str]) -> str:
        return self.draw(st.sampled_from(options))

    def int_expr(self, depth: int) -> str:
        if depth == 0 or self.draw(st.integers(0, 3)) == 0:
            return self.pick([*INT_LITERALS, *self.ints, *INT_LEAVES])
        d = depth - 1
        kind = self.draw(st.integers(0, 11))
        if kind == 0:
            op = self.pick(ARITH)
            right = "0" if op in "/%" and self.draw(st.integers(0, 3)) == 0 else self.int_expr(d)
            return f"({self.int_expr(d)} {op} {right})"
        if kind == 1:
            left, right = (
                (self.int_expr(d), self.int_expr(d))
                if self.draw(st.booleans())
                else (self.float_expr(d), self.float_expr(d))
            )
            return f"({left} {self.pick(COMPARE)} {right})"
        if kind == 2:
            return f"({self.int_expr(d)} {self.pick(['and', 'or'])} {self.int_expr(d)})"
        if kind == 3:
            return f"({self.pick(['not ', '-'])}{self.int_expr(d)})"
        if kind == 4:
            arg = self.float_expr(d) if self.draw(st.integers(0, 4)) else "(1e300 * 1e300)"
            return f"to_int({arg})"
        if kind == 5:
            getter = self.pick(["payload_get_u8", "payload_get_u32", "payload_get_i32"])
            return f"{getter}({self.index(d)})"
        if kind == 6:
            return f"packet_get_arg({self.index(d)})"
        if kind == 7:
            setter = self.pick(["payload_set_u8", "payload_set_u32", "packet_set_arg"])
            return f"{setter}({self.index(d)}, {self.int_expr(d)})"
        if kind == 8:
            return f"payload_set_f64({self.index(d)}, {self.float_expr(d)})"
        if kind == 9:
            kind_expr = self.pick(["GM_ST_RELIABLE_NICVM_NIC_DATA"] * 4 + ["3"])
            rank = self.pick(["0", "1", "2"]) if self.draw(st.booleans()) else self.int_expr(d)
            return f"mpi_send_message({kind_expr}, {rank})"
        return f"h0({self.int_expr(d)}, {self.float_expr(d)})"

    def index(self, depth: int) -> str:
        """Mostly in range for the 8..40-byte payloads and 4 header words; sometimes not."""
        kind = self.draw(st.integers(0, 9))
        if kind == 0 and depth > 0:
            return self.int_expr(0)
        return self.pick(["-1", "9"]) if kind == 1 else self.pick(["0", "1", "2", "3"])

    def float_expr(self, depth: int) -> str:
        if depth == 0 or self.draw(st.integers(0, 2)) == 0:
            return self.pick([*FLOAT_LITERALS, *self.floats])
        d = depth - 1
        kind = self.draw(st.integers(0, 4))
        if kind == 0:
            op = self.pick(["+", "-", "*", "/"])
            right = "0.0" if op == "/" and self.draw(st.integers(0, 3)) == 0 else self.float_expr(d)
            return f"({self.float_expr(d)} {op} {right})"
        if kind == 1:
            return f"(-{self.float_expr(d)})"
        if kind == 2:
            return f"to_float({self.int_expr(d)})"
        if kind == 3:
            return f"payload_get_f64({self.index(d)})"
        return f"h1({self.float_expr(d)})"

    def block(self, depth: int, returns: str) -> str:
        count = self.draw(st.integers(0, 3))
        return "\n".join(self.statement(depth, returns) for _ in range(count))

    def statement(self, depth: int, returns: str) -> str:
        kind = self.draw(st.integers(0, 8 if depth > 0 else 4))
        if kind == 0 and self.ints:
            return f"{self.pick(self.ints)} = {self.int_expr(2)};"
        if kind == 1 and self.floats:
            return f"{self.pick(self.floats)} = {self.float_expr(2)};"
        if kind == 2:
            return f"h0({self.int_expr(1)}, {self.float_expr(1)});"
        if kind == 3:
            return f"payload_set_u8({self.index(1)}, {self.int_expr(1)});"
        if kind == 4:
            return f"mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, {self.pick(['0', '1'])});"
        d = depth - 1
        if kind in (5, 6):
            orelse = f"else\n{self.block(d, returns)}\n" if self.draw(st.booleans()) else ""
            return f"if {self.int_expr(2)} then\n{self.block(d, returns)}\n{orelse}end if;"
        if kind == 7:
            c = self.counter
            bound = self.draw(st.integers(0, 6))
            body = self.block(d, returns)
            return f"{c} = 0;\nwhile {c} < {bound} do\n{body}\n{c} = {c} + 1;\nend while;"
        if kind == 8:
            return f"while {self.int_expr(1)} do\n{self.block(d, returns)}\nend while;"
        value = self.int_expr(1) if returns == "int" else self.float_expr(1)
        return f"return {value};"


@st.composite
def programs(draw: st.DrawFn) -> str:
    h0 = _Gen(draw, ["p", "t"], ["q"], "t")
    h1 = _Gen(draw, ["t"], ["r"], "t")
    main = _Gen(draw, ["a", "b", "c"], ["x", "y"], "c")
    helpers = SIGNATURES.format(
        h0=f"var t;\n{h0.block(1, 'int')}\nreturn {h0.int_expr(1)};",
        h1=f"var t;\n{h1.block(1, 'float')}\nreturn {h1.float_expr(1)};",
    )
    result = main.pick(["NICVM_RESULT_SUCCESS", "NICVM_RESULT_PACKET_CONSUMED", "a", "(a % 3)"])
    body = main.block(2, "int")
    return (
        "func main()\nvar a;\nvar b;\nvar c;\nvar x: float;\nvar y: float;\n"
        f"{body}\nreturn {result};\nend func;\n{helpers}"
    )


U32 = st.sampled_from([0, 1, 2, 7, 255, 2**31, 2**32 - 1])


@st.composite
def contexts(draw: st.DrawFn) -> Packet:
    size = draw(st.integers(1, 8))
    return Packet(
        rank=draw(st.integers(0, size - 1)),
        size=size,
        root=draw(st.integers(0, size - 1)),
        args=draw(st.lists(U32, min_size=4, max_size=4)),
        payload=bytearray(draw(st.binary(min_size=8, max_size=40))),
    )


def both(source: str, ctx: Packet, fuel: int) -> tuple[RefOutcome, RefOutcome]:
    """(VM, reference) results in the reference's shape; the VM runs on a copy of ``ctx``."""
    module = compile_module(source)
    packet = Packet(ctx.rank, ctx.size, ctx.root, list(ctx.args), bytearray(ctx.payload))
    got = run(module, packet, fuel=fuel)
    vm = RefOutcome(
        got.outcome.value,
        int(got.result) if got.outcome is Outcome.OK else None,
        [tuple(send) for send in got.sends],  # type: ignore[misc]
        got.fuel_used,
        got.fault.name if got.fault else None,
        bytes(packet.payload),
        packet.args,
    )
    ref = evaluate(
        parse(source),
        rank=ctx.rank,
        size=ctx.size,
        root=ctx.root,
        args=list(ctx.args),
        payload=bytes(ctx.payload),
        fuel=fuel,
    )
    return vm, ref


FUELS = st.sampled_from([0, 1, 7, 60, 3000, 3000, 3000, 3000])
FAST = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(programs(), contexts(), FUELS)
def test_vm_matches_reference(source: str, ctx: Packet, fuel: int) -> None:
    vm, ref = both(source, ctx, fuel)
    assert vm.kind != "vm_error", source
    assert vm == ref, source


@FAST
@given(programs(), contexts())
def test_fuel_is_exact_one_less_runs_out(source: str, ctx: Packet) -> None:
    vm, _ = both(source, ctx, 3000)
    if vm.kind == "out_of_fuel":
        return
    short, _ = both(source, ctx, vm.fuel_used - 1)
    again, _ = both(source, ctx, vm.fuel_used)
    assert short.kind == "out_of_fuel"
    assert short.fuel_used == vm.fuel_used - 1
    assert again == vm


INT64 = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2, -2, 7, -7, 2**31, 2**32, 2**62, 2**63 - 1, -(2**63)]),
)


def literal(value: int) -> str:
    return "(-9223372036854775807 - 1)" if value == -(2**63) else f"({value})"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ARITH + COMPARE), INT64, INT64)
def test_int_operator_matches_reference(op: str, a: int, b: int) -> None:
    """Each int operator on edge-biased int64 pairs: the VM's value is the reference's."""
    source = (
        "func main()\nvar r;\n"
        f"r = {literal(a)} {op} {literal(b)};\n"
        "payload_set_u32(0, r);\npayload_set_u32(1, r / 4294967296);\n"
        "payload_set_u8(8, r < 0);\nreturn NICVM_RESULT_SUCCESS;\nend func;\n"
    )
    ctx = Packet(0, 1, 0, [0, 0, 0, 0], bytearray(9))
    vm, ref = both(source, ctx, 100)
    assert vm == ref, source
