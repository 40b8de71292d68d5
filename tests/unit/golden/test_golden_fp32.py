"""FP32 and TF32 matmuls of the golden model against an exact reference.

The reference uses no floating point: FP32 words are decoded from their fields into integers
in units of 2^-149 (``_decode32`` of the BF16 tests), TF32 words from their sign, exponent and
upper 10 fraction bits written out here, products are exact Python ints in units of 2^-298,
and rounding to FP32 (RNE, gradual underflow, overflow to Inf) is the written-out
``round_to_fp32``; chains use the exact ``ref_add``.
"""

import numpy as np
import pytest
from test_golden_bf16 import _NAN, _decode32, _ftz32, ref_add, round_to_fp32

from systolica.golden import (
    CANONICAL_NAN,
    TFLOAT32,
    Command,
    as_tfloat32,
    command_error,
    command_schedule,
    nc_matmul,
    nc_matmul_batch,
)

_FINITE, _INF = 0, 1


def ref_decode(name, bits, ftz):
    """(kind, sign, magnitude in units of 2**-149) of an FP32 or TF32 word."""
    sign, exp = bits >> 31, (bits >> 23) & 0xFF
    if name == "fp32":
        if ftz and exp == 0:
            return _FINITE, sign, 0
        return _decode32(bits)
    frac = (bits >> 13) & 0x3FF                 # TF32: 10 fraction bits, the rest ignored
    if exp == 0xFF:
        return (_NAN if frac else _INF), sign, 0
    if exp == 0:
        return _FINITE, sign, 0 if ftz else frac << 13
    return _FINITE, sign, (1024 + frac) << (exp + 12)


def ref_mul(name_a, a, name_b, b, ftz):
    ka, sa, ma = ref_decode(name_a, a, ftz)
    kb, sb, mb = ref_decode(name_b, b, ftz)
    if _NAN in (ka, kb):
        return CANONICAL_NAN
    sign = sa ^ sb
    if _INF in (ka, kb):
        if (ka == _FINITE and ma == 0) or (kb == _FINITE and mb == 0):
            return CANONICAL_NAN
        return (sign << 31) | 0x7F800000
    result = round_to_fp32(sign, ma * mb, -298)
    return _ftz32(result) if ftz else result


def ref_matmul(sname, s_bits, mname, m_bits, psum=None, ftz=False):
    k_dim, m_dim, n_dim = s_bits.shape[0], s_bits.shape[1], m_bits.shape[1]
    out = np.zeros((m_dim, n_dim), np.uint32)
    for i in range(m_dim):
        for j in range(n_dim):
            acc = ref_mul(sname, int(s_bits[0, i]), mname, int(m_bits[0, j]), ftz)
            for k in range(1, k_dim):
                acc = ref_add(acc, ref_mul(sname, int(s_bits[k, i]), mname, int(m_bits[k, j]),
                                           ftz), ftz)
            if psum is not None:
                acc = ref_add(int(psum[i, j]), acc, ftz)
            out[i, j] = acc
    return out


def _operand(name, bits):
    words = np.asarray(bits, np.uint32)
    return words.view(TFLOAT32) if name == "tf32" else words.view(np.float32)


def _golden(sname, s_bits, mname, m_bits, **kwargs):
    return nc_matmul(_operand(sname, s_bits), _operand(mname, m_bits), **kwargs).view(np.uint32)


SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000,
            0x3F800001, 0xBF801FFF, 0x7F7FFFFF, 0xFF7FE000, 0x7F800000, 0xFF800000,
            0x7FC00001, 0xFF800001, 0x7F802000, 0x00001FFF, 0x00002000]


def _random_words(rng, shape):
    """FP32 words from regimes that reach subnormal and overflowing products and sums."""
    sign = rng.integers(0, 2, shape, dtype=np.uint32) << 31
    regime = rng.integers(0, 4)
    low, high = ((1, 255), (1, 70), (90, 166), (180, 255))[regime]
    exp = rng.integers(low, high, shape, dtype=np.uint32)
    exp = np.where(rng.random(shape) < 0.1, 0, exp).astype(np.uint32)
    words = sign | (exp << 23) | rng.integers(0, 1 << 23, shape, dtype=np.uint32)
    special = rng.random(shape) < 0.15
    return np.where(special, rng.choice(np.array(SPECIALS, np.uint32), shape), words)


PAIRS = [("fp32", "fp32"), ("tf32", "tf32"), ("tf32", "fp32"), ("fp32", "tf32")]


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
@pytest.mark.parametrize("sname,mname", PAIRS)
def test_random_and_special_matmuls_match_reference(sname, mname, ftz, seed):
    rng = np.random.default_rng([seed, PAIRS.index((sname, mname)), ftz])
    for _ in range(120):
        k, m, n = rng.integers(1, 5, 3)
        s_bits, m_bits = _random_words(rng, (k, m)), _random_words(rng, (k, n))
        psum = _random_words(rng, (m, n)) if rng.random() < 0.5 else None
        got = _golden(sname, s_bits, mname, m_bits, ftz=ftz, accumulate=psum is not None,
                      psum=None if psum is None else psum.view(np.float32))
        expected = ref_matmul(sname, s_bits, mname, m_bits, psum, ftz)
        assert np.array_equal(got, expected), (sname, mname, s_bits, m_bits, psum)


@pytest.mark.parametrize("sname,mname", PAIRS)
def test_every_special_pair_matches_reference(sname, mname):
    words = np.array(SPECIALS, np.uint32)
    for ftz in (False, True):
        got = _golden(sname, words[None, :], mname, words[None, :], ftz=ftz)
        assert np.array_equal(got, ref_matmul(sname, words[None, :], mname, words[None, :],
                                              ftz=ftz))


def test_batch_equals_single(seed):
    rng = np.random.default_rng(seed)
    s, m = _random_words(rng, (3, 4, 2)), _random_words(rng, (3, 4, 5))
    batch = nc_matmul_batch(s.view(np.float32), m.view(TFLOAT32), ftz=True).view(np.uint32)
    for b in range(3):
        assert np.array_equal(batch[b], _golden("fp32", s[b], "tf32", m[b], ftz=True))


def test_fp32_product_is_rounded_once():
    # (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46: RNE drops 2^-46 -> 1 + 2^-22 (0x3F800002).
    assert _golden("fp32", [[0x3F800001]], "fp32", [[0x3F800001]])[0, 0] == 0x3F800002
    # A tie: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, and 2^-24 is half an ulp of 1 + 2^-11
    # (0x3F801000, last bit even): ties to even keeps 0x3F801000.
    assert _golden("fp32", [[0x3F800800]], "fp32", [[0x3F800800]])[0, 0] == 0x3F801000


def test_tf32_reads_only_the_upper_ten_fraction_bits():
    one = 0x3F800000
    # 1 + 2^-23 as TF32 is 1.0; as FP32 it is not.
    assert _golden("tf32", [[one | 1]], "tf32", [[one]])[0, 0] == one
    assert _golden("fp32", [[one | 1]], "tf32", [[one]])[0, 0] == one | 1
    # A NaN whose payload lies only in the lower 13 bits is Inf as TF32.
    assert _golden("tf32", [[0x7F800001]], "fp32", [[one]])[0, 0] == 0x7F800000
    assert _golden("fp32", [[0x7F800001]], "fp32", [[one]])[0, 0] == CANONICAL_NAN
    # A TF32 x TF32 product (at most 22 significant bits) is exact: (1 + 2^-10)^2.
    assert _golden("tf32", [[0x3F802000]], "tf32", [[0x3F802000]])[0, 0] == 0x3F804008


def test_ftz_keeps_a_product_that_rounds_up_to_the_smallest_normal():
    # (2 - 2^-23) 2^-63 x 2^-64 = 2^-126 - 2^-150: a tie on the subnormal grid whose even
    # neighbour is 2^-126 (0x00800000), a normal number, so FTZ keeps it.
    a, b = (64 << 23) | 0x7FFFFF, 63 << 23
    for ftz in (False, True):
        assert _golden("fp32", [[a]], "fp32", [[b]], ftz=ftz)[0, 0] == 0x00800000
    # One ulp smaller, (2 - 2^-22) 2^-127 = 2^-126 - 2^-149 exactly: subnormal, flushed to +0.
    assert _golden("fp32", [[a - 1]], "fp32", [[b]])[0, 0] == 0x007FFFFF
    assert _golden("fp32", [[a - 1]], "fp32", [[b]], ftz=True)[0, 0] == 0


def test_as_tfloat32_rounds_to_nearest_even():
    words = np.array([0x3F800FFF, 0x3F801000, 0x3F803000, 0x3F801001, 0x7F7FFFFF, 0xFF7FF000,
                      0x7F800001, 0xFFC00000, 0x80000001], np.uint32)
    got = as_tfloat32(words.view(np.float32)).view(np.uint32)
    assert got.tolist() == [0x3F800000, 0x3F800000, 0x3F804000, 0x3F802000, 0x7F800000,
                            0xFF800000, 0x7FC00000, 0xFFC00000, 0x80000000]
    with pytest.raises(TypeError, match="x must be a float32 array"):
        as_tfloat32(np.ones(2, np.float64))


@pytest.mark.parametrize("stationary,moving,text", [
    (np.float32, np.float16,
     "tfloat32 and float32 pair only with tfloat32 or float32; got stationary float32 and "
     "moving float16"),
    (TFLOAT32, np.int8, "int8 pairs only with int8; got stationary tfloat32 and moving int8"),
])
def test_wide_pairs_only_with_wide(stationary, moving, text):
    with pytest.raises(TypeError, match=text) as info:
        nc_matmul(np.zeros((2, 2), stationary), np.zeros((2, 2), moving))
    assert "\n" not in str(info.value)


def test_double_row_refuses_fp32():
    with pytest.raises(TypeError, match="double_row' needs both operands float8"):
        nc_matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32),
                  perf_mode="double_row")


def test_the_command_word_takes_32_bit_types_only_with_each_other():
    assert Command("matmul", dtype="fp32", moving_dtype="tf32").mtype == "tf32"
    with pytest.raises(TypeError, match="tfloat32 and float32 pair only with"):
        Command("matmul", dtype="bf16", moving_dtype="tf32")


def test_a_tile_without_the_32_bit_types_rejects_them():
    command = Command("matmul", k=2, m=2, n=2, dtype="tf32")
    narrow = ("int8", "bf16", "fp16", "e4m3", "e5m2", "e3m4", "e4m3fn")
    assert command_error(command, rows=4, cols=4, dtypes=narrow) == "TYPE_NOT_BUILT"
    assert command_error(command, rows=4, cols=4, dtypes=("tf32", "fp32")) is None


@pytest.mark.parametrize(("dtype", "mtype", "transpose", "passes"), [
    ("fp32", "fp32", False, 4), ("tf32", "fp32", False, 4), ("tf32", "tf32", False, 1),
    ("fp32", "fp32", True, 2), ("bf16", "bf16", False, 1)])
def test_the_cycle_model_spends_passes_on_each_moving_column(dtype, mtype, transpose, passes):
    # Back-to-back: the second matmul's beats follow the first's last pass; a moving beat
    # is taken on its first pass and its result leaves latency cycles after its last.
    rows = cols = 4
    command = Command("matmul", k=2, m=2, n=3, dtype=dtype, moving_dtype=mtype,
                      is_transpose=transpose)
    first, second = command_schedule(rows, cols, [command, command])
    start = first.issues[0]
    assert first.issues == tuple(start + passes * j for j in range(3))
    assert first.results == tuple(t + passes - 1 + rows + cols for t in first.issues)
    assert second.issues[0] == start + 3 * passes
    stepped = command_schedule(rows, cols, [command, command], result_ready=lambda c: True)
    assert stepped == [first, second]


@pytest.mark.parametrize(("stype", "mtype"), [("fp32", "bf16"), ("e4m3", "tf32"),
                                              ("tf32", "int8"), ("int8", "fp32")])
def test_a_pair_no_tile_takes_is_type_not_built_on_every_tile(stype, mtype):
    """The command word Command refuses (32-bit with 8/16-bit, INT8 with a float type) can
    still be sent; every tile rejects it, even one generated for both of its types (the
    RTL's check: is_wide(stype) == is_wide(mtype)), and the stepped cycle model gives it
    no beats."""
    from systolica.golden.command import unpaired_command

    with pytest.raises(TypeError):
        Command("matmul", dtype=stype, moving_dtype=mtype)
    base = Command("matmul", k=2, m=2, n=3, dtype=stype, accumulate=True)
    word = unpaired_command(base, mtype)
    assert (word.dtype, word.mtype, word.k, word.n, word.accumulate) == (stype, mtype, 2, 3,
                                                                         True)
    assert base.mtype == stype                    # the original is left as it was
    assert command_error(word, rows=4, cols=4) == "TYPE_NOT_BUILT"
    legal = Command("matmul", k=2, m=2, n=2, dtype="fp32")
    timing = command_schedule(4, 4, [word, legal, word], offer=lambda stream, cycle: True)
    assert [t.error for t in timing] == ["TYPE_NOT_BUILT", None, "TYPE_NOT_BUILT"]
    assert timing[0].issues == timing[2].issues == ()
    assert timing[1].issues[1] - timing[1].issues[0] == 4      # FP32: four passes a column
    with pytest.raises(ValueError, match="moving_dtype must be one of"):
        unpaired_command(base, "fp64")
    with pytest.raises(ValueError, match="only a matmul"):
        unpaired_command(Command("read"), "bf16")
