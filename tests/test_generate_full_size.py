"""Regression tier: Verilog generation, from the PSUM init to the full-size 128 x 128 tile."""

import re

from systolica.sim.generate import PE_MODULE, TOPLEVEL, generate_verilog


def test_full_size_128x128_tile_generates_verilog():
    text, meta = generate_verilog(128, 128)
    assert meta["rows"] == meta["cols"] == 128
    # 16-bit operand lanes only; the command stream carries the rest.
    assert meta["ports"]["moving__payload"]["width"] == 128 * 16
    assert meta["ports"]["stationary__payload"]["width"] == 128 * 16
    assert meta["ports"]["command__payload"]["width"] == 76
    assert meta["ports"]["result__payload"]["width"] == 128 * 32 + 1
    assert text.count(f"module {PE_MODULE}(") == 1
    assert len(re.findall(rf"^\s*{PE_MODULE} ", text, re.M)) == 128 * 128
    assert f"module {TOPLEVEL}(" in text


def test_zero_psum_init_is_a_loop_and_other_init_is_kept():
    from systolica.sim.generate import _compact_zero_init

    zeros = "  initial begin\n" + "".join(f"    mem[{i}] = 8'h00;\n" for i in range(3)) + \
        "  end\n"
    assert _compact_zero_init(zeros) == (
        "  integer mem__init_i;\n  initial begin\n    for (mem__init_i = 0; mem__init_i < 3; "
        "mem__init_i = mem__init_i + 1) mem[mem__init_i] = 0;\n  end\n")
    ones = zeros.replace("mem[1] = 8'h00", "mem[1] = 8'h01")
    assert _compact_zero_init(ones) == ones          # not all zero: left as written
    gap = zeros.replace("mem[2]", "mem[5]")
    assert _compact_zero_init(gap) == gap            # not entries 0..N-1: left as written
    text, _ = generate_verilog(2, 2)
    assert "memory__init_i < 4096" in text and "memory[0] =" not in text
