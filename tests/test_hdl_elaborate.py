"""Unit tier: every tile size elaborates; bad parameters are refused with clear errors."""

import re

import pytest
from amaranth.back import verilog

from systolica.hdl import SkewBuffer, SystolicArray, Tile
from systolica.sim.generate import PE_MODULE, TOPLEVEL, generate_verilog


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (3, 2), (5, 7)])
def test_native_tile_elaborates(rows, cols):
    text = verilog.convert(Tile(rows, cols), name="top", emit_src=False)
    assert "module top(" in text
    # Every PE is a named submodule, visible in waveforms.
    assert f"pe_{rows - 1}_{cols - 1}" in text


def test_full_size_128x128_tile_generates_verilog():
    text, meta = generate_verilog(128, 128)
    assert meta["rows"] == meta["cols"] == 128
    assert meta["ports"]["moving__payload"]["width"] == 128 * 8 + 1
    assert meta["ports"]["result__payload"]["width"] == 128 * 32 + 1
    assert text.count(f"module {PE_MODULE}(") == 1
    assert len(re.findall(rf"^\s*{PE_MODULE} ", text, re.M)) == 128 * 128
    assert f"module {TOPLEVEL}(" in text


@pytest.mark.parametrize("factory,text", [
    (lambda: Tile(0, 4), "rows must be a positive integer, not 0"),
    (lambda: Tile(4, -1), "cols must be a positive integer, not -1"),
    (lambda: Tile(2.5, 4), "rows must be a positive integer, not 2.5"),
    (lambda: SystolicArray(2, 2, pe_module="1bad name"), "pe_module must be None or a Verilog"),
    (lambda: SkewBuffer(8, []), "delays must name at least one lane"),
    (lambda: SkewBuffer(8, [0, -1]), "every delay must be a non-negative integer"),
])
def test_bad_parameters_are_refused(factory, text):
    with pytest.raises(ValueError, match=re.escape(text)):
        factory()
