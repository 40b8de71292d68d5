"""Which tiles are generated as a grid of sub-array blocks, and of which size
(``sim/builder/generate.py``, ``grid_block``; the sizes' measurements: docs/benchmarks.md,
"Block size")."""

import pytest

from systolica.sim.builder.generate import grid_block


@pytest.mark.parametrize("rows,cols,block", [
    (1, 1, None), (8, 8, None), (8, 16, None),      # under 16 x 16 PEs: flat
    (16, 16, 8), (16, 32, 8), (32, 32, 8), (80, 80, 8), (128, 128, 8),   # 8 x 8 blocks
    (20, 20, 4), (24, 40, 8), (96, 112, 8),         # the largest power of two up to 8
    (17, 16, None), (18, 18, None),                 # only 1 or 2 divides both: flat ...
    (65, 64, 1), (66, 66, 2),                       # ... unless too large to build flat
])
def test_tiles_from_16_x_16_are_built_in_blocks_of_up_to_8_x_8(rows, cols, block, monkeypatch):
    monkeypatch.delenv("SYSTOLICA_BLOCK", raising=False)
    assert grid_block(rows, cols) == block


@pytest.mark.parametrize("forced,block", [("0", None), ("2", 2), ("16", 16)])
def test_the_environment_forces_a_block_size(forced, block, monkeypatch):
    monkeypatch.setenv("SYSTOLICA_BLOCK", forced)
    assert grid_block(32, 32) == block


@pytest.mark.parametrize("forced", ["3", "64", "x", "-4"])
def test_a_forced_block_that_does_not_divide_the_tile_is_refused(forced, monkeypatch):
    monkeypatch.setenv("SYSTOLICA_BLOCK", forced)
    with pytest.raises(ValueError, match="SYSTOLICA_BLOCK must be 0 .flat. or a power of two"):
        grid_block(32, 32)
