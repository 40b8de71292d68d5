"""The bit-accurate transpose (``nc_matmul(..., is_transpose=True)``, ``nc_transpose``) on
every operand type: every special value in every position, the documented PSUM element width
(16-bit elements for 8-bit types, upper 8 bits zero), and the rules that refuse it."""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import FORMATS, TFLOAT32, WIDE_FORMATS, nc_matmul, nc_transpose
from systolica.tb.stimulus import SPECIAL_PATTERNS as SPECIALS
from systolica.tb.stimulus import special_grids

TYPES = [*FORMATS.values(), *WIDE_FORMATS.values()]


def _data(fmt, bits):
    words = np.asarray(bits, np.dtype(f"u{fmt.width // 8}"))
    return words.view(fmt.dtype)


def _expected_words(fmt, bits):
    """data.T as PSUM words, written out element by element."""
    rows, cols = len(bits), len(bits[0])
    return [[int(bits[k][m]) for k in range(rows)] for m in range(cols)]


def _words(fmt, result):
    assert result.dtype == fmt.transpose_dtype
    assert result.dtype.itemsize == max(fmt.width, 16) // 8
    return result.view(np.dtype(f"u{result.dtype.itemsize}")).tolist()


@pytest.mark.parametrize("fmt", TYPES, ids=lambda f: f.name)
def test_every_special_value_in_every_position(fmt):
    p = len(SPECIALS[fmt.width])
    for shift, bits in enumerate(special_grids(fmt.width, p, p)):   # each at every (k, m)
        got = nc_transpose(_data(fmt, bits))
        assert _words(fmt, got) == _expected_words(fmt, bits), (fmt.name, shift)


@pytest.mark.parametrize("fmt", TYPES, ids=lambda f: f.name)
def test_random_patterns_rectangular(fmt, seed):
    rng = np.random.default_rng([seed, fmt.width, len(fmt.name)])
    limit = 1 << fmt.width
    for shape in ((16, 16), (7, 3), (1, 128), (128, 1), (128, 128)):
        bits = rng.integers(0, limit, shape, dtype=np.uint64).tolist()
        got = nc_transpose(_data(fmt, bits))
        assert got.shape == shape[::-1]
        assert _words(fmt, got) == _expected_words(fmt, bits)


def test_every_fp8_pattern_goes_to_the_low_byte():
    bits = np.arange(256, dtype=np.uint8).reshape(16, 16)
    for dtype in (ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2, ml_dtypes.float8_e3m4,
                  ml_dtypes.float8_e4m3fn, np.int8):
        got = nc_transpose(bits.view(dtype))
        assert got.dtype == np.uint16
        assert (got >> 8 == 0).all()
        assert np.array_equal(got, bits.T.astype(np.uint16))


def test_selection_matrix_picks_partitions():
    rng = np.random.default_rng(5)
    data = rng.integers(0, 1 << 16, (6, 4), dtype=np.uint64).astype(np.uint16)
    data[0, 0], data[3, 1] = 0x7FC1, 0x8000            # a NaN payload and -0
    moving = np.zeros((6, 3), ml_dtypes.bfloat16)
    picks = [3, 0, 3]                                   # column n passes partition picks[n]
    for n, k in enumerate(picks):
        moving[k, n] = 1
    moving[5, 0] = ml_dtypes.bfloat16(-0.0)             # -0 counts as a zero
    got = nc_matmul(data.view(ml_dtypes.bfloat16), moving, is_transpose=True)
    assert got.view(np.uint16).tolist() == [[int(data[picks[n], m]) for n in range(3)]
                                            for m in range(4)]


def test_transpose_in_a_tile_and_tf32_words_kept_whole():
    data = np.array([[0x7F800001, 0x3F800001], [0x80000000, 0x00000001]], np.uint32)
    got = nc_transpose(data.view(TFLOAT32), tile_position=(32, 96), tile_size=(32, 32))
    assert got.dtype == TFLOAT32
    assert got.view(np.uint32).tolist() == [[0x7F800001, 0x80000000], [0x3F800001, 1]]


def test_a_matmul_with_the_identity_is_not_a_transpose():
    # The reason for transpose mode: NaN payloads and -0 do not survive a matmul.
    data = np.array([[0x7FC1, 0x8000]], np.uint16).view(ml_dtypes.bfloat16)
    eye = np.ones((1, 1), ml_dtypes.bfloat16)
    assert nc_matmul(data, eye).view(np.uint32).tolist() == [[0x7FC00000], [0x80000000]]
    assert nc_transpose(data).view(np.uint16).tolist() == [[0x7FC1], [0x8000]]


GOOD = np.eye(2, dtype=ml_dtypes.bfloat16)


@pytest.mark.parametrize("moving,kwargs,error,text", [
    (GOOD, {"accumulate": True, "psum": np.zeros((2, 2), ml_dtypes.bfloat16)}, ValueError,
     "is_transpose=True takes no accumulate=True"),
    (GOOD, {"ftz": True}, ValueError, "is_transpose=True takes no ftz=True"),
    (GOOD, {"is_transpose": 1}, TypeError, "is_transpose must be a bool, not int"),
    (np.array([[1, 0], [1, 1]], ml_dtypes.bfloat16), {}, ValueError,
     "exactly one 1 in each column"),
    (np.array([[2, 0], [0, 1]], ml_dtypes.bfloat16), {}, ValueError,
     "exactly one 1 in each column"),
    (np.array([[1, np.nan], [0, 1]], ml_dtypes.bfloat16), {}, ValueError,
     "exactly one 1 in each column"),
    (np.array([[0, 0], [0, 1]], ml_dtypes.bfloat16), {}, ValueError,
     "exactly one 1 in each column"),
    (np.eye(2, dtype=np.float32), {}, TypeError, "tfloat32 and float32 pair only"),
    (GOOD, {"psum": np.zeros((2, 2), np.float32)}, TypeError, "psum must have dtype bfloat16"),
])
def test_bad_transposes_are_refused(moving, kwargs, error, text):
    kwargs = {"is_transpose": True, **kwargs}
    with pytest.raises(error, match=text) as info:
        nc_matmul(np.ones((2, 2), ml_dtypes.bfloat16), moving, **kwargs)
    assert "\n" not in str(info.value)


def test_transpose_refuses_double_row():
    e4m3 = np.eye(2, dtype=ml_dtypes.float8_e4m3)
    with pytest.raises(ValueError, match="is_transpose=True takes no perf_mode='double_row'"):
        nc_matmul(e4m3, e4m3, is_transpose=True, perf_mode="double_row")


@pytest.mark.parametrize("data,error,text", [
    ([[1]], TypeError, "data must be a numpy array"),
    (np.ones(3, np.float16), ValueError, "data must be 2-D"),
    (np.ones((2, 2), np.float64), TypeError, "unsupported type float64"),
    (np.ones((64, 33), np.float16), ValueError, "M = 33 .* tile's 32 columns"),
])
def test_bad_nc_transpose_input(data, error, text):
    kwargs = {"tile_position": (0, 0), "tile_size": (64, 32)} if error is ValueError and \
        "M =" in text else {}
    with pytest.raises(error, match=text):
        nc_transpose(data, **kwargs)


@pytest.mark.parametrize("shape, rows, text", [
    ((300, 200), 128, "K = 300 must be between 1 and 128"),
    ((64, 200), 128, r"M = 200 \(the stationary free size\) must be between 1 and the tile.s 128"),
    ((8, 4), 4, "K = 8 must be between 1 and 4"),
])
def test_a_transpose_larger_than_the_array_is_refused(shape, rows, text):
    """The data's partitions go down the PE rows and its free elements across the columns:
    neither may exceed the array (no silent [F, P] result of a [300, 200] input)."""
    with pytest.raises(ValueError, match=text):
        nc_transpose(np.zeros(shape, ml_dtypes.bfloat16), rows=rows)
