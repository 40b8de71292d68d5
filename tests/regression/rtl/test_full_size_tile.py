"""Regression tier: the full-size 128 x 128 tile, built (as a grid of 16 x 16 blocks) and run
in CI: a BF16 and an INT8 ``[K=128, M=128] x [K=128, N=512]`` matmul, bit for bit against the
golden model, every stamp equal to the cycle model's.

The build takes minutes on CI's two cores; this module is collected first (see
``pytest_collection_modifyitems`` in ``conftest.py``) so that it overlaps the rest of the
regression instead of finishing it.
"""

import ml_dtypes
import numpy as np

from systolica.golden import nc_matmul, program_cycles
from systolica.sim import Matmul, run_program


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
