"""Regression tier: the full-size 128 x 128 tile, built (as a grid of 16 x 16 blocks) and run
in CI: a BF16 and an INT8 ``[K=128, M=128] x [K=128, N=512]`` matmul, bit for bit against the
golden model, every stamp equal to the cycle model's.

The build takes minutes on CI's two cores; this module is collected first (see
``pytest_collection_modifyitems`` in ``conftest.py``) so that it overlaps the rest of the
regression instead of finishing it.
"""

import json
import re

import ml_dtypes
import numpy as np

from systolica.golden import nc_matmul, program_cycles
from systolica.hdl.layouts import command_layout
from systolica.sim import Matmul, run_program
from systolica.sim.builder.generate import (
    BLOCK_MODULE,
    PE_MODULE,
    RESULT_MODULE,
    TOPLEVEL,
    grid_block,
)


def test_full_size_tile_runs_bf16_and_int8_matmuls_bit_exact_and_on_the_model(seed):
    rng = np.random.default_rng([seed, 128])
    bf16 = (rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((128, 512)).astype(ml_dtypes.bfloat16))
    int8 = (rng.integers(-128, 128, (128, 128), dtype=np.int8),
            rng.integers(-128, 128, (128, 512), dtype=np.int8))
    result = run_program([Matmul(*bf16), Matmul(*int8)], rows=128, cols=128)
    assert result.build.directory.joinpath("Vsystolica_block").is_dir()   # built in blocks
    assert result.mismatches == 0
    # An independent check of the returned PSUM as well as the scoreboard's.
    assert (result.psums[0].view(np.uint32) == nc_matmul(*bf16).view(np.uint32)).all()
    assert (result.psums[1] == nc_matmul(*int8)).all()
    assert result.model_agrees()
    assert result.cycles == program_cycles(128, 128, [(128, 512)] * 2)
    _check_grid_of_blocks(result.build.verilog.read_text(),
                          json.loads(result.build.ports.read_text()))


def _check_grid_of_blocks(text, meta):
    """The 128 x 128 Verilog the run was built from: a grid of sub-array blocks, 16-bit
    operand lanes, the PSUM's zero-init loop."""
    block = grid_block(128, 128)
    assert block is not None and 128 % block == 0
    assert meta["rows"] == meta["cols"] == 128 and meta["block"] == block
    # 16-bit operand lanes, the four row cells' bits of a moving beat; the command stream
    # carries the rest. Results: 32-bit lanes, four column cells' groups and last bits.
    assert meta["ports"]["moving__payload"]["width"] == 128 * 16 + 4
    assert meta["ports"]["stationary__payload"]["width"] == 128 * 16
    assert meta["ports"]["command__payload"]["width"] == command_layout().size
    assert meta["ports"]["result__payload"]["width"] == 128 * 32 + 4 + 4
    assert text.count(f"module {PE_MODULE}(") == 1
    assert text.count(f"module {BLOCK_MODULE}(") == 1
    # block x block PE instances in the block module, (128 / block)^2 blocks in the tile.
    assert len(re.findall(rf"^\s*{PE_MODULE} ", text, re.M)) == block * block
    assert len(re.findall(rf"^\s*{BLOCK_MODULE} ", text, re.M)) == (128 // block) ** 2
    assert f"module {TOPLEVEL}(" in text
    # The result path, converted in a second process, instanced once by the top.
    assert text.count(f"module {RESULT_MODULE}(") == 1
    assert len(re.findall(rf"^\s*{RESULT_MODULE} result \(", text, re.M)) == 1
    assert "memory__init_i < 4096" in text      # 8 banks x 512 entries, all zero
