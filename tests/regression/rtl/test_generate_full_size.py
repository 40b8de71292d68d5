"""Regression tier: Verilog generation, from the PSUM init to the full-size 128 x 128 tile."""

import re

from systolica.hdl.config import TileConfig
from systolica.hdl.layouts import command_layout
from systolica.sim.builder.generate import (
    BLOCK_MODULE,
    PE_MODULE,
    TOPLEVEL,
    _add_zero_init,
    generate_verilog,
    grid_block,
)


def test_full_size_128x128_tile_generates_verilog_as_a_grid_of_blocks():
    block = grid_block(128, 128)
    assert block is not None and 128 % block == 0
    text, meta = generate_verilog(TileConfig(128, 128), block)
    assert meta["rows"] == meta["cols"] == 128 and meta["block"] == block
    # 16-bit operand lanes only; the command stream carries the rest.
    assert meta["ports"]["moving__payload"]["width"] == 128 * 16
    assert meta["ports"]["stationary__payload"]["width"] == 128 * 16
    assert meta["ports"]["command__payload"]["width"] == command_layout().size
    assert meta["ports"]["result__payload"]["width"] == 128 * 32 + 1
    assert text.count(f"module {PE_MODULE}(") == 1
    assert text.count(f"module {BLOCK_MODULE}(") == 1
    # block x block PE instances in the block module, (128 / block)^2 blocks in the tile.
    assert len(re.findall(rf"^\s*{PE_MODULE} ", text, re.M)) == block * block
    assert len(re.findall(rf"^\s*{BLOCK_MODULE} ", text, re.M)) == (128 // block) ** 2
    assert f"module {TOPLEVEL}(" in text
    assert "memory__init_i < 4096" in text      # 8 banks x 512 entries, all zero


def test_every_memory_declaration_gets_a_zero_init_loop():
    text = "module m;\n  reg [7:0] mem [2:0];\n  reg [3:0] other;\nendmodule\n"
    assert _add_zero_init(text) == (
        "module m;\n  reg [7:0] mem [2:0];\n  integer mem__init_i;\n  initial begin\n"
        "    for (mem__init_i = 0; mem__init_i < 3; mem__init_i = mem__init_i + 1) "
        "mem[mem__init_i] = 0;\n  end\n  reg [3:0] other;\nendmodule\n")
    text, _ = generate_verilog(TileConfig(2, 2, "int8"))
    assert "memory__init_i < 4096" in text and "memory[0] =" not in text
    assert grid_block(2, 2) is None              # small tiles stay flat
