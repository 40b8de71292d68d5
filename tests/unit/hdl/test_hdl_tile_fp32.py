"""Unit tier: the TF32 / FP32 datapath of a tile generated with the ``fp32`` type set
(amaranth.sim) against the golden model and the cycle model: FP32 x FP32, TF32 x FP32 and
TF32 x TF32 matmuls on random and special words (IEEE and FTZ), accumulation into PSUM, a
row tile, the 8/16-bit types and transposes on the same 32-bit lanes, every result word and
every stamp (four passes per moving column of a matmul with an FP32 operand, two per column
of a 32-bit transpose).
"""

import numpy as np
import pytest
from test_hdl_tile_tiles import run

from systolica.golden import TFLOAT32, identity
from systolica.tb.stimulus import fp32_words as words

TYPES = "int8+bf16+fp32"


@pytest.mark.parametrize("ftz", [False, True])
@pytest.mark.parametrize(("stype", "mtype"), [("fp32", "fp32"), ("tf32", "fp32"),
                                              ("fp32", "tf32"), ("tf32", "tf32")])
def test_fp32_and_tf32_matmuls_are_bit_exact(stype, mtype, ftz):
    rng = np.random.default_rng(hash((stype, mtype, ftz)) & 0xFFFF)
    matmuls = [dict(stationary=words(rng, (4, 4), stype), moving=words(rng, (4, 6), mtype),
                    ftz=ftz, bank=0, offset=0),
               dict(stationary=words(rng, (3, 2), stype), moving=words(rng, (3, 5), mtype),
                    ftz=ftz, bank=1, offset=3)]
    run(4, 4, matmuls, types=TYPES)


def test_fp32_accumulates_into_psum_and_runs_in_a_row_tile():
    rng = np.random.default_rng(7)
    matmuls = [dict(stationary=words(rng, (2, 4), "fp32", 0), moving=words(rng, (2, 3), "fp32", 0),
                    tile_position=(0, 0), tile_size=(2, 4)),
               dict(stationary=words(rng, (2, 4), "fp32", 0), moving=words(rng, (2, 3), "fp32", 0),
                    accumulate=True, tile_position=(2, 0), tile_size=(2, 4)),
               dict(stationary=words(rng, (4, 4), "tf32", 0), moving=words(rng, (4, 3), "fp32", 0),
                    accumulate=True)]
    model = run(4, 4, matmuls, reads=[dict(n=3)], types=TYPES)
    assert [r.command.accumulate for r in model.matmuls] == [False, True, True]


def test_16_bit_and_int8_matmuls_on_32_bit_lanes_are_unchanged():
    import ml_dtypes

    rng = np.random.default_rng(3)
    bf16 = [rng.standard_normal((4, n)).astype(np.float32).astype(ml_dtypes.bfloat16)
            for n in (4, 5)]
    int8 = [rng.integers(-128, 128, (3, n)).astype(np.int8) for n in (4, 2)]
    fp32 = [words(rng, (4, n), "fp32") for n in (4, 2)]
    # FP32, then BF16 right behind it, then INT8, then FP32 again: the passes start and stop
    run(4, 4, [dict(stationary=fp32[0], moving=fp32[1]),
               dict(stationary=bf16[0], moving=bf16[1], bank=1),
               dict(stationary=int8[0], moving=int8[1]),
               dict(stationary=fp32[0], moving=fp32[1], ftz=True, bank=1)], types=TYPES)


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16"])
def test_transposes_on_32_bit_lanes_keep_every_bit(dtype):
    import ml_dtypes

    rng = np.random.default_rng(11)
    if dtype == "bf16":
        data = rng.integers(0, 1 << 16, (4, 3)).astype(np.uint16).view(ml_dtypes.bfloat16)
    else:
        data = rng.integers(0, 1 << 32, (4, 3), dtype=np.uint64).astype(np.uint32)
        data[0, :2] = [0x7F800001, 0x80000000]      # a NaN payload TF32 would not read; -0
        data = data.view(TFLOAT32 if dtype == "tf32" else np.float32)
    model = run(4, 4, [dict(stationary=data, moving=identity(4, data.dtype),
                            is_transpose=True)], types=TYPES)
    (record,) = model.matmuls       # run() checked the RTL's words against these
    bits = data.view(f"u{data.dtype.itemsize}").T.astype(np.uint32)
    np.testing.assert_array_equal(record.expected[:3], bits)
