"""Regression tier: transpose mode on the RTL tile through the run API, on both simulators.

Every operand type's special bit patterns (NaN payloads, Inf, -0, subnormals, extremes) at
every position of a 4 x 4 stationary come out transposed bit for bit; the program mixes the
transposes with matmuls and a READ, every word checked by the scoreboard and every stamp
against the cycle model. The tile is the all-types 4 x 4 one the fuzzer's CI sample builds
(Verilator; an Icarus build costs seconds).
"""

import numpy as np
import pytest

from systolica.golden import FORMATS, format_of, identity
from systolica.hdl.config import TileConfig
from systolica.sim import Matmul, Read, run_matmul, run_program
from systolica.tb.stimulus import special_grids

CONFIG = TileConfig(4, 4)


def _data(name, bits):
    fmt = FORMATS[name]
    return np.asarray(bits, f"u{fmt.width // 8}").view(fmt.dtype)


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_every_special_pattern_of_every_type_in_every_position(simulator):
    jobs, grids = [], []
    rng = np.random.default_rng(25)
    for name, fmt in FORMATS.items():
        for bits in special_grids(fmt.width, 4, 4):
            jobs.append(Matmul(_data(name, bits), identity(4, fmt.dtype), is_transpose=True,
                               bank=1, offset=4 * (len(grids) % 8)))
            grids.append((len(jobs) - 1, bits))
        # a matmul between the transposes, into another bank
        jobs.append(Matmul(rng.integers(-128, 128, (4, 4), dtype=np.int8),
                           rng.integers(-128, 128, (4, 3), dtype=np.int8)))
    jobs.append(Read(32, bank=1))
    result = run_program(jobs, config=CONFIG, simulator=simulator)
    assert result.mismatches == 0 and result.model_agrees()
    for index, bits in grids:
        psum = result.psums[index]
        assert psum.dtype == format_of(jobs[index].stationary.dtype).transpose_dtype
        # data[k, m] at (m, k), written out element by element
        assert psum.view(np.uint16).astype(int).T.tolist() == bits, index
    # The READ returns the last eight transposes' words, upper bits zero.
    words = result.psums[-1]
    assert words.dtype == np.uint32 and not (words >> 16).any()


def test_run_matmul_transposes_and_refuses_what_transpose_mode_does_not_take():
    data = _data("bf16", [[0x7F81, 0x8000, 0x0001], [0xFF80, 0x3F80, 0xFFC5]])
    out, cycles = run_matmul(data, identity(2, data.dtype), config=CONFIG,
                             is_transpose=True)
    assert out.dtype == data.dtype
    assert out.view(np.uint16).tolist() == data.view(np.uint16).T.tolist()
    assert cycles == 2 + CONFIG.rows + CONFIG.cols     # N beats, then rows + cols to PSUM
    with pytest.raises(ValueError, match="^is_transpose=True takes no accumulate=True"):
        run_matmul(data, identity(2, data.dtype), config=CONFIG, is_transpose=True,
                   accumulate=True, psum=np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="exactly one 1 in each column"):
        run_matmul(data, np.ones((2, 2), data.dtype), config=CONFIG, is_transpose=True)
    with pytest.raises(ValueError, match="exactly one 1 in each column"):
        run_program([Matmul(data, np.ones((2, 2), data.dtype), is_transpose=True)],
                    config=CONFIG)
