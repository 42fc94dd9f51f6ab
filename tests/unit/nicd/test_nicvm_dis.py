"""One opcode table feeds compiler, VM and disassembler; every opcode is emitted and printed."""

from __future__ import annotations

from nicd.nicvm.compiler import compile_module
from nicd.nicvm.dis import disassemble
from nicd.nicvm.modules import BCAST_BINARY_TREE
from nicd.nicvm.opcodes import OPS, Op, Operand

KITCHEN_SINK = """
func main()
    var i;
    var x: float;
    x = -payload_get_f64(0) / 2.0 - 1.0 * to_float(-i) + 0.5;
    i = to_int(x) + 2 * 3 / 1 % 5 - mpi_get_size() - mpi_get_rank() - mpi_get_root();
    i = (i == 1) + (i != 1) + (i < 1) + (i <= 1) + (i > 1) + (i >= 1) + (not i);
    i = (i and 1) + (i or 0) + packet_length() + packet_get_arg(0) + payload_get_u8(0);
    i = payload_get_u32(0) + payload_get_i32(0) + payload_set_u8(0, 1) + payload_set_u32(0, 1);
    packet_set_arg(0, payload_set_f64(0, x));
    mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, 0);
    while i < helper(i) do
        if i > 3 then i = i + 1; else i = i - 1; end if;
    end while;
    return NICVM_RESULT_SUCCESS;
end func;
func helper(n) return n; end func;
"""


def test_every_opcode_is_emitted_by_the_kitchen_sink() -> None:
    module = compile_module(KITCHEN_SINK)
    assert {ins.op for ins in module.code} == set(Op)


def test_disassembly_names_every_opcode_and_operand() -> None:
    module = compile_module(KITCHEN_SINK)
    text = disassemble(module)
    lines = [line for line in text.splitlines() if line and not line.startswith("func")]
    assert len(lines) == len(module.code)
    for pc, (line, ins) in enumerate(zip(lines, module.code, strict=True)):
        fields = line[8:].split()
        assert int(fields[0]) == pc
        assert fields[1] == ins.op.name
        kind = OPS[ins.op].operand
        if kind is Operand.NONE:
            assert len(fields) == 2
        elif kind is Operand.LOCAL:
            assert fields[3] in ("(i)", "(x)", "(n)")
        elif kind is Operand.FUNC:
            assert fields[3] == "(helper)"
        elif kind is Operand.JUMP:
            assert fields[2:] == [str(ins.arg)]


def test_fig_4_3_disassembly() -> None:
    text = disassemble(compile_module(BCAST_BINARY_TREE))
    lines = text.splitlines()
    assert lines[0] == "func main(): int  [slots 4, stack 2, entry 0]"
    assert lines[1].split() == ["8", "0", "MPI_GET_SIZE"]
    assert lines[2].split() == ["1", "STORE", "0", "(size)"]
    # the targets of the two forward jumps are marked, with their source lines
    assert [line.split() for line in lines if ">>" in line] == [
        ["18", ">>", "24", "CONST", "16"],
        ["26", ">>", "40", "LOAD", "2", "(result)"],
    ]
    assert lines[-2].split() == ["1", "42", "CONST", "0"]  # implicit return at `func main()`


def test_table_stack_effects_are_used_consistently() -> None:
    # every function's static stack bound covers what the body pushes
    module = compile_module(KITCHEN_SINK)
    assert all(f.max_stack >= 1 for f in module.functions)
    assert module.functions[0].max_stack <= 8
