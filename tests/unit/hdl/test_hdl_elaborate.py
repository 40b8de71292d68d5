"""Unit tier: every tile size elaborates; bad parameters are refused with clear errors."""

import re

import pytest
from amaranth.back import verilog

from systolica.hdl import SkewBuffer, SystolicArray, Tile
from systolica.hdl.config import TileConfig


#: The sizes that are about the grid (5 x 7) elaborate the INT8 PE: the all-types PE is
#: elaborated by the smaller sizes here (and by every build of the regression); at 5 x 7 it
#: cost a CI worker about 18 s.
@pytest.mark.parametrize("rows,cols,types", [(1, 1, "all"), (2, 3, "all"), (3, 2, "all"),
                                             (5, 7, "int8")])
def test_native_tile_elaborates(rows, cols, types):
    text = verilog.convert(Tile(TileConfig(rows, cols, types)), name="top", emit_src=False)
    assert "module top(" in text
    # Every PE is a named submodule, visible in waveforms.
    assert f"pe_{rows - 1}_{cols - 1}" in text


@pytest.mark.parametrize("factory,text", [
    (lambda: SystolicArray(2, 2, pe_module="1bad name"), "pe_module must be None or a Verilog"),
    (lambda: SystolicArray(4, 4, block=3), "block must be a power of two dividing rows = 4"),
    (lambda: SystolicArray(4, 6, block=4), "block must be a power of two dividing rows = 4"),
    (lambda: Tile(TileConfig(4, 4), block=0), "block must be a power of two dividing"),
    (lambda: SystolicArray(4, 4, block_module="blk"), "block_module needs block"),
    (lambda: SkewBuffer(8, []), "delays must name at least one lane"),
    (lambda: SkewBuffer(8, [0, -1]), "every delay must be a non-negative integer"),
])
def test_bad_parameters_are_refused(factory, text):
    with pytest.raises(ValueError, match=re.escape(text)):
        factory()
