"""Unit tier: the INT8 golden nc_matmul against an independent pure-Python reference."""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import nc_matmul, nc_matmul_batch, wrap_int32


def reference(stationary, moving, psum=None):
    """Independent reference: Python ints, explicit loops, explicit two's-complement wrap."""
    k, m = stationary.shape
    n = moving.shape[1]
    out = np.zeros((m, n), dtype=np.int32)
    for i in range(m):
        for j in range(n):
            total = sum(int(stationary[r, i]) * int(moving[r, j]) for r in range(k))
            if psum is not None:
                total += int(psum[i, j])
            total &= 0xFFFFFFFF
            out[i, j] = total - (1 << 32) if total >= 1 << 31 else total
    return out


@pytest.mark.parametrize("k,m,n", [(1, 1, 1), (3, 2, 5), (8, 8, 8), (17, 5, 3)])
def test_nc_matmul_matches_reference(k, m, n):
    rng = np.random.default_rng(k * 100 + m * 10 + n)
    s = rng.integers(-128, 128, (k, m), dtype=np.int8)
    mv = rng.integers(-128, 128, (k, n), dtype=np.int8)
    got = nc_matmul(s, mv)
    assert got.dtype == np.int32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, reference(s, mv))


def test_nc_matmul_is_not_int8_numpy_matmul():
    # numpy's int8 @ int8 wraps to int8; the golden model must not.
    s = np.full((4, 1), 127, np.int8)
    mv = np.full((4, 1), 127, np.int8)
    assert nc_matmul(s, mv)[0, 0] == 4 * 127 * 127


def test_accumulate_wraps_modulo_2_32():
    s = np.full((2, 2), -128, np.int8)
    mv = np.full((2, 3), -128, np.int8)   # each product 16384, column sum 32768
    psum = np.full((2, 3), np.iinfo(np.int32).max - 100, np.int32)
    got = nc_matmul(s, mv, psum=psum, accumulate=True)
    np.testing.assert_array_equal(got, reference(s, mv, psum))
    assert got[0, 0] < 0  # wrapped past INT32_MAX


def test_sum_wraps_without_psum_for_large_k():
    k = (1 << 17) + 1  # K * 128 * 128 > 2**31
    s = np.full((k, 1), -128, np.int8)
    mv = np.full((k, 1), -128, np.int8)
    assert nc_matmul(s, mv)[0, 0] == wrap_int32(k * 16384)


def test_overwrite_ignores_psum():
    s = np.ones((2, 2), np.int8)
    mv = np.ones((2, 2), np.int8)
    psum = np.full((2, 2), 1000, np.int32)
    np.testing.assert_array_equal(nc_matmul(s, mv, psum=psum, accumulate=False),
                                  np.full((2, 2), 2, np.int32))


def test_wrap_int32_edges():
    np.testing.assert_array_equal(
        wrap_int32([2**31, -(2**31) - 1, 2**32, -1, 2**31 - 1]),
        np.array([-(2**31), 2**31 - 1, 0, -1, 2**31 - 1], np.int32))


@pytest.mark.parametrize("kwargs,error,text", [
    ({"stationary": np.zeros((2, 2), np.int16)}, TypeError,
     "stationary has unsupported type int16"),
    ({"moving": [[1, 2], [3, 4]]}, TypeError, "moving must be a numpy array"),
    ({"moving": np.zeros((3, 2), np.int8)}, ValueError, "must share K"),
    ({"stationary": np.zeros((2,), np.int8)}, ValueError, "must be 2-D"),
    ({"accumulate": True}, ValueError, "accumulate=True needs psum"),
    ({"psum": np.zeros((2, 2), np.int64)}, TypeError, "psum must have dtype int32"),
    ({"psum": np.zeros((3, 2), np.int32)}, ValueError, "psum must have shape"),
    ({"accumulate": 1}, TypeError, "accumulate must be a bool"),
])
def test_bad_input_is_rejected(kwargs, error, text):
    args = {"stationary": np.zeros((2, 2), np.int8), "moving": np.zeros((2, 2), np.int8)}
    args.update(kwargs)
    stationary, moving = args.pop("stationary"), args.pop("moving")
    with pytest.raises(error, match=text):
        nc_matmul(stationary, moving, **args)


@pytest.mark.parametrize("dtype,ftz", [("int8", False), ("bf16", False), ("bf16", True)])
def test_batched_column_sums_equal_one_matmul_at_a_time(dtype, ftz):
    """nc_matmul_batch (the testbench's per-program path) is nc_matmul per matmul, bit for
    bit, on every BF16 bit pattern class (random 16-bit patterns: NaN, Inf, subnormals)."""
    rng = np.random.default_rng(17)
    if dtype == "bf16":
        def operand(shape):
            return rng.integers(0, 1 << 16, shape, dtype=np.uint16).view(ml_dtypes.bfloat16)
    else:
        def operand(shape):
            return rng.integers(-128, 128, shape, dtype=np.int8)
    stationary, moving = operand((40, 6, 5)), operand((40, 6, 9))
    batch = nc_matmul_batch(stationary, moving, ftz=ftz)
    for b in range(40):
        one = nc_matmul(stationary[b], moving[b], ftz=ftz) if ftz else \
            nc_matmul(stationary[b], moving[b])
        assert (batch[b].view(np.uint32) == one.view(np.uint32)).all()


def test_batched_column_sums_refuse_bad_stacks():
    with pytest.raises(ValueError, match="must share B and K"):
        nc_matmul_batch(np.zeros((2, 3, 4), np.int8), np.zeros((2, 2, 4), np.int8))
    with pytest.raises(ValueError, match="stationary must be 3-D, not 2-D"):
        nc_matmul_batch(np.zeros((3, 4), np.int8), np.zeros((2, 3, 4), np.int8))
    with pytest.raises(TypeError, match="int8 pairs only with int8"):
        nc_matmul_batch(np.zeros((1, 1, 1), np.int8),
                        np.zeros((1, 1, 1), ml_dtypes.bfloat16))
