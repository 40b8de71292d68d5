"""Unit tier: the front end's TensorE instructions go through the golden model for every
feature it has: FP32/TF32 operands (and their cost), transposes (``nc_transpose`` and
``nc_matmul(is_transpose=True)``) and the row/column tile rules."""

import ml_dtypes
import numpy as np
import pytest

from systolica import golden, nki
from systolica.nki import NkiError
from systolica.nki import isa as nisa
from systolica.nki import language as nl

BF16 = ml_dtypes.bfloat16
TYPES = {"float32": nl.float32, "tfloat32": nl.tfloat32, "bfloat16": nl.bfloat16}


def _matmul(s_type, m_type, onezero=False):
    def kernel(a, b):
        sa = nl.ndarray(a.shape, TYPES[s_type], buffer=nl.sbuf)
        sb = nl.ndarray(b.shape, TYPES[m_type], buffer=nl.sbuf)
        nisa.dma_copy(dst=sa, src=a)
        nisa.dma_copy(dst=sb, src=b)
        acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=sa, moving=sb, is_moving_onezero=onezero)
        out = nl.ndarray(acc.shape, nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out
    return kernel


def _golden_operand(x, kind):
    return golden.as_tfloat32(x) if kind == "tfloat32" else x


@pytest.mark.parametrize("s_type, m_type", [("float32", "float32"), ("tfloat32", "tfloat32"),
                                            ("tfloat32", "float32")])
def test_fp32_and_tf32_matmuls_equal_the_golden_model_bit_for_bit(s_type, m_type):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 96)).astype(np.float32)
    out = nki.simulate(_matmul(s_type, m_type))(a, b)
    expected = golden.nc_matmul(_golden_operand(a, s_type), _golden_operand(b, m_type))
    assert np.array_equal(out.view(np.uint32), expected.view(np.uint32))
    # The 13 low bits count for FP32 and not for TF32: the two results differ.
    other = golden.nc_matmul(golden.as_tfloat32(a) if s_type == "float32" else a, b)
    assert not np.array_equal(out, other)


@pytest.mark.parametrize("s_type, m_type, onezero, cycles", [
    ("bfloat16", "bfloat16", False, 512), ("tfloat32", "tfloat32", False, 512),
    ("float32", "float32", False, 4 * 512), ("tfloat32", "float32", False, 4 * 512),
    ("float32", "float32", True, 2 * 512)])
def test_fp32_matmuls_cost_four_times_the_bf16_and_tf32_interval(s_type, m_type, onezero,
                                                                  cycles):
    a = np.ones((128, 128), np.float32)
    b = np.ones((128, 512), np.float32)
    if s_type == "bfloat16":
        a, b = a.astype(BF16), b.astype(BF16)
    _out, profile = nki.profile(_matmul(s_type, m_type, onezero), target="trn2")(a, b)
    assert profile.busy_cycles["tensor"] == pytest.approx(cycles)


def _transposes(a, identity):
    t = nl.load(a)
    pe = nisa.nc_transpose(t)
    mode = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=mode, stationary=t, moving=nl.load(identity), is_transpose=True)
    outs = []
    for v in (pe, mode):
        o = nl.ndarray(v.shape, v.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=v)
        outs.append(o)
    return tuple(outs)


@pytest.mark.parametrize("dtype, specials", [
    (ml_dtypes.float8_e4m3, [0x7F, 0x80, 0x01, 0xFF]),           # NaN, -0, subnormal
    (ml_dtypes.float8_e5m2, [0x7C, 0x7D, 0x80, 0x03]),           # Inf, NaN, -0, subnormal
    (BF16, [0x7FC1, 0xFF81, 0x8000, 0x0001]),                    # NaN payloads, -0, subnormal
])
def test_transposes_move_every_bit_through_the_golden_model(dtype, specials):
    width = np.dtype(dtype).itemsize
    words = np.random.default_rng(3).integers(0, 1 << (8 * width), (32, 48))
    words[0, :4] = specials
    x = words.astype(f"u{width}").view(dtype)
    eye = np.eye(32, dtype=np.float32).astype(dtype)
    pe, mode = nki.simulate(_transposes)(x, eye)
    for out in (pe, mode):
        assert out.dtype == np.dtype(dtype)      # 8-bit types come back from uint16 PSUM
        assert np.array_equal(out.view(f"u{width}"), x.T.view(f"u{width}"))


def _bad_transpose(a, moving, accumulate):
    t = nl.load(a)
    out = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=out, stationary=t, moving=nl.load(moving), is_transpose=True,
                   accumulate=accumulate)
    return out


@pytest.mark.parametrize("moving, accumulate, rule", [
    (np.ones((16, 16), BF16), False, "exactly one 1 in each column"),
    (np.eye(16, dtype=BF16), True, "is_transpose=True takes no accumulate"),
])
def test_transpose_mode_rules_are_the_golden_models(moving, accumulate, rule):
    x = np.ones((16, 8), BF16)
    with pytest.raises(NkiError, match=rule):
        nki.run(_bad_transpose, x, moving, accumulate)
    nki.run(_bad_transpose, x, np.eye(16, dtype=BF16), False)


def _tiled(a, b, position, size):
    return nisa.nc_matmul(nl.load(a), nl.load(b), tile_position=position, tile_size=size)


def test_tiled_matmuls_check_the_stationary_fits_the_tile_and_keep_the_numbers():
    a, b = np.ones((64, 32), BF16), np.ones((64, 128), BF16)
    out = nki.run(_tiled, a, b, (64, 0), (64, 128), target="trn1").outputs
    assert np.array_equal(out, golden.nc_matmul(a, b))
    with pytest.raises(NkiError, match="K = 64 must be between 1 and 32"):
        nki.run(_tiled, a, b, (0, 0), (32, 128), target="trn2")
    with pytest.raises(NkiError, match="must be given together"):
        nki.run(_tiled, a, b, (0, 0), (), target="trn2")
