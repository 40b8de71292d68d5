"""Regression tier: the full-size 128 x 128 tile generates Verilog (about a minute)."""

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
