"""NICVM run time: Fig 4.3's broadcast tree, semantics, every fault and bound, fuel exhaustion."""

from __future__ import annotations

import struct

import pytest

from nicd.nicvm import limits
from nicd.nicvm.builtins import SEND_TYPE, Result
from nicd.nicvm.compiler import compile_module
from nicd.nicvm.machine import Fault, SendDescriptor
from nicd.nicvm.modules import BCAST_BINARY_TREE, NOOP, SCALE_F64
from nicd.nicvm.vm import Outcome, Packet, run

BCAST = compile_module(BCAST_BINARY_TREE)


def packet(payload: bytes = b"", *, rank: int = 0, size: int = 1, root: int = 0) -> Packet:
    return Packet(rank=rank, size=size, root=root, args=[0, 0, 0, 0], payload=bytearray(payload))


def main_returning(expr: str, decls: str = "") -> str:
    return f"func main()\n{decls}\nreturn {expr};\nend func;"


def holds(int_expr: str, value: int) -> bool:
    """Whether the module computes ``value`` for ``int_expr`` (compared inside the VM)."""
    literal = "(-9223372036854775807 - 1)" if value == -(2**63) else f"({value})"
    source = main_returning(f"({int_expr}) != {literal}")  # 0 = SUCCESS = equal
    outcome = run(compile_module(source), packet())
    assert outcome.outcome is Outcome.OK, outcome
    return outcome.result is Result.SUCCESS


# -- Fig 4.3 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "root"), [(size, root) for size in range(1, 17) for root in range(size)]
)
def test_fig_4_3_reaches_every_rank_exactly_once(size: int, root: int) -> None:
    received = {rank: 0 for rank in range(size)}
    received[root] = 1  # the root's host delegated the message to its own NIC
    pending = [root]
    results = {}
    while pending:
        rank = pending.pop()
        outcome = run(BCAST, packet(rank=rank, size=size, root=root))
        assert outcome.outcome is Outcome.OK
        results[rank] = outcome.result
        assert len(outcome.sends) <= 2
        for send in outcome.sends:
            assert send.type == SEND_TYPE
            received[send.rank] += 1
            pending.append(send.rank)
    assert received == dict.fromkeys(range(size), 1)
    # the root consumes its own packet once it has children; every other node delivers
    assert results[root] is (Result.PACKET_CONSUMED if size > 1 else Result.SUCCESS)
    assert all(results[r] is Result.SUCCESS for r in results if r != root)


def test_fig_4_3_children_of_root_zero_are_2r_plus_1_and_2r_plus_2() -> None:
    for rank in range(8):
        sends = run(BCAST, packet(rank=rank, size=8)).sends
        children = [c for c in (2 * rank + 1, 2 * rank + 2) if c < 8]
        assert sends == tuple(SendDescriptor(SEND_TYPE, c) for c in children)


# -- values ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("7 / 2", 3),
        ("(-7) / 2", -3),
        ("7 / (-2)", -3),
        ("(-7) % 2", -1),
        ("7 % (-2)", 1),
        ("9223372036854775807 + 1", -(2**63)),
        ("(-9223372036854775807 - 1) - 1", 2**63 - 1),
        ("(-9223372036854775807 - 1) / (-1)", -(2**63)),
        ("(-9223372036854775807 - 1) % (-1)", 0),
        ("-(-9223372036854775807 - 1)", -(2**63)),
        ("4294967296 * 4294967296", 0),
        ("to_int(-2.9)", -2),
        ("to_int(1e19)", 10**19 - 2**64),
        ("(3 < 4) + (4 <= 4) + (5 > 4) + (4 >= 5) + (1 == 1) + (1 != 1)", 4),
        ("(0 and 1) + (2 and 3) + (0 or 0) + (0 or 5) + (not 0) + (not 7)", 3),
        ("to_int(to_float(3) / 2.0 * 10.0)", 15),
        ("mpi_get_size()", 1),
    ],
)
def test_integer_and_float_semantics(expr: str, value: int) -> None:
    assert holds(expr, value)
    assert not holds(expr, value + 1 if value < 2**63 - 1 else 0)


def test_and_or_short_circuit() -> None:
    # the right operand would fault; it is never evaluated
    assert holds("0 and (1 / 0)", 0)
    assert holds("1 or (1 / 0)", 1)


def test_float_payload_transform() -> None:
    ctx = packet(struct.pack("<3d", 1.0, -2.5, 4.0))
    ctx.args[0] = 3
    outcome = run(compile_module(SCALE_F64), ctx)
    assert outcome.outcome is Outcome.OK
    assert struct.unpack("<3d", ctx.payload) == (3.0, -7.5, 12.0)


def test_payload_and_header_words() -> None:
    source = """
    func main()
        payload_set_u32(1, payload_get_u32(0) + 1);
        payload_set_u8(0, 300);
        packet_set_arg(3, packet_get_arg(2) - 1);
        if payload_get_i32(2) != -2 then return NICVM_RESULT_FAILURE; end if;
        return NICVM_RESULT_SUCCESS;
    end func;
    """
    ctx = packet(struct.pack("<IIi", 0xFFFFFFFF, 0, -2))
    ctx.args[2] = 0
    outcome = run(compile_module(source), ctx)
    assert outcome.result is Result.SUCCESS
    assert struct.unpack("<IIi", ctx.payload) == (0xFFFFFF2C, 0, -2)
    assert ctx.args == [0, 0, 0, 0xFFFFFFFF]


def test_helper_functions_and_recursion() -> None:
    source = (
        main_returning(
            "fib(10) - 55",
            "",
        )
        + "\nfunc fib(n) if n < 2 then return n; end if; return fib(n - 1) + fib(n - 2); end func;"
    )
    assert run(compile_module(source), packet()).result is Result.SUCCESS


def test_noop_costs_two_instructions() -> None:
    outcome = run(compile_module(NOOP), packet())
    assert (outcome.outcome, outcome.result, outcome.fuel_used) == (Outcome.OK, Result.SUCCESS, 2)


def test_root_relative_view() -> None:
    source = main_returning(
        "NICVM_RESULT_SUCCESS", "mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, mpi_get_rank());"
    )
    outcome = run(compile_module(source), packet(rank=1, size=5, root=3))
    assert outcome.sends == (SendDescriptor(SEND_TYPE, 1),)  # relative rank 3 -> real rank 1


# -- faults: each is an outcome, the packet is left as it was ------------------------------------


@pytest.mark.parametrize(
    ("body", "fault"),
    [
        ("return 1 / 0;", Fault.DIV_ZERO),
        ("return 1 % 0;", Fault.DIV_ZERO),
        ("return to_int(1.0 / 0.0);", Fault.DIV_ZERO),
        ("return to_int(1e300 * 1e300);", Fault.FLOAT_TO_INT),
        ("return to_int((1e300 * 1e300) - (1e300 * 1e300));", Fault.FLOAT_TO_INT),
        ("return payload_get_u8(8);", Fault.PAYLOAD_RANGE),
        ("return payload_get_u8(-1);", Fault.PAYLOAD_RANGE),
        ("return payload_get_u32(2);", Fault.PAYLOAD_RANGE),
        ("return to_int(payload_get_f64(1));", Fault.PAYLOAD_RANGE),
        ("return payload_set_f64(-1, 1.0);", Fault.PAYLOAD_RANGE),
        ("return packet_get_arg(4);", Fault.ARG_RANGE),
        ("return packet_set_arg(-1, 0);", Fault.ARG_RANGE),
        ("return mpi_send_message(3, 0);", Fault.SEND_TYPE),
        ("return mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, 2);", Fault.SEND_RANK),
        ("return mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, -1);", Fault.SEND_RANK),
        ("return 3;", Fault.BAD_RESULT),
        ("return -1;", Fault.BAD_RESULT),
    ],
)
def test_fault_is_an_outcome_and_the_packet_is_restored(body: str, fault: Fault) -> None:
    source = (
        "func main()\npayload_set_u8(0, 9);\npacket_set_arg(0, 9);\n"
        "mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, 0);\n"
        f"{body}\nend func;"
    )
    ctx = packet(bytes(range(8)), size=2)
    outcome = run(compile_module(source), ctx)
    assert (outcome.outcome, outcome.fault) == (Outcome.FAULT, fault)
    assert outcome.result is Result.FAILURE
    assert outcome.sends == ()
    assert outcome.line == 5
    assert ctx.payload == bytes(range(8))
    assert ctx.args == [0, 0, 0, 0]


def test_send_limit() -> None:
    loop = "var i;\nwhile i < {n} do mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, 0); i = i + 1;"
    source = main_returning("0", loop.format(n=limits.MAX_SENDS) + " end while;")
    assert len(run(compile_module(source), packet()).sends) == limits.MAX_SENDS
    source = main_returning("0", loop.format(n=limits.MAX_SENDS + 1) + " end while;")
    outcome = run(compile_module(source), packet())
    assert (outcome.outcome, outcome.fault) == (Outcome.FAULT, Fault.SEND_LIMIT)


def test_call_depth_limit() -> None:
    def source(depth: int) -> str:
        helper = "func down(n) if n == 0 then return 0; end if; return down(n - 1); end func;"
        return main_returning(f"down({depth})") + "\n" + helper

    # main is frame 1, down(k) ... down(0) are k + 1 more
    assert run(compile_module(source(limits.MAX_CALL_DEPTH - 2)), packet()).outcome is Outcome.OK
    outcome = run(compile_module(source(limits.MAX_CALL_DEPTH - 1)), packet())
    assert (outcome.outcome, outcome.fault) == (Outcome.FAULT, Fault.CALL_DEPTH)


def test_unbounded_recursion_stops() -> None:
    source = main_returning("f()") + "\nfunc f() return f(); end func;"
    outcome = run(compile_module(source), packet())
    assert (outcome.outcome, outcome.fault) == (Outcome.FAULT, Fault.CALL_DEPTH)


# -- fuel ----------------------------------------------------------------------------------------


def test_infinite_loop_runs_out_of_fuel() -> None:
    source = (
        "func main()\nvar i;\npayload_set_u8(0, 1);\nwhile 1 do\ni = i + 1;\nend while;\nend func;"
    )
    ctx = packet(b"\x00")
    outcome = run(compile_module(source), ctx)
    assert outcome.outcome is Outcome.OUT_OF_FUEL
    assert outcome.fuel_used == limits.DEFAULT_FUEL
    assert outcome.line in (4, 5)
    assert ctx.payload == b"\x00"  # restored


@pytest.mark.parametrize("fuel", [0, 1, 41])
def test_fig_4_3_budget_below_its_cost_runs_out(fuel: int) -> None:
    # the root of 8 executes 42 instructions
    assert run(BCAST, packet(size=8), fuel=42).outcome is Outcome.OK
    outcome = run(BCAST, packet(size=8), fuel=fuel)
    assert (outcome.outcome, outcome.fuel_used, outcome.sends) == (Outcome.OUT_OF_FUEL, fuel, ())


def test_fuel_is_clamped() -> None:
    source = "func main() while 1 do end while; end func;"
    module = compile_module(source)
    assert run(module, packet(), fuel=-5).fuel_used == 0
    assert run(module, packet(), fuel=limits.MAX_FUEL * 10).fuel_used == limits.MAX_FUEL


@pytest.mark.parametrize(("rank", "size", "root"), [(0, 0, 0), (3, 2, 0), (0, 2, 5), (-1, 2, 0)])
def test_bad_context_is_a_vm_error_not_an_exception(rank: int, size: int, root: int) -> None:
    outcome = run(BCAST, packet(rank=rank, size=size, root=root))
    assert outcome.outcome is Outcome.VM_ERROR
    assert "bad context" in outcome.detail


def test_vm_bug_is_reported_not_raised() -> None:
    # a context whose payload is not a bytearray makes a handler raise inside the VM
    ctx = Packet(rank=0, size=1, root=0, args=[0], payload=None)  # type: ignore[arg-type]
    outcome = run(compile_module(SCALE_F64), ctx)
    assert outcome.outcome is Outcome.VM_ERROR
    assert "TypeError" in outcome.detail
