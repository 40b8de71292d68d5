"""Regression tier: Verilog generation details (the PSUM memory's zero-init loop). The
full-size 128 x 128 tile's Verilog (a grid of blocks) is checked by ``test_full_size_tile.py``
on the build it runs, so that CI generates it once."""

from systolica.hdl.config import TileConfig
from systolica.sim.builder.generate import (
    _add_zero_init,
    generate_verilog,
    grid_block,
)


def test_every_memory_declaration_gets_a_zero_init_loop():
    text = "module m;\n  reg [7:0] mem [2:0];\n  reg [3:0] other;\nendmodule\n"
    assert _add_zero_init(text) == (
        "module m;\n  reg [7:0] mem [2:0];\n  integer mem__init_i;\n  initial begin\n"
        "    for (mem__init_i = 0; mem__init_i < 3; mem__init_i = mem__init_i + 1) "
        "mem[mem__init_i] = 0;\n  end\n  reg [3:0] other;\nendmodule\n")
    text, _ = generate_verilog(TileConfig(2, 2, "int8"))
    assert "memory__init_i < 4096" in text and "memory[0] =" not in text
    assert grid_block(2, 2) is None              # small tiles stay flat
