"""NeuronCore-v4 MX numerics: ``nc_matmul_mx``, ``quantize_mx`` and stochastic rounding
(``docs/numerics.md``, "MX formats (NeuronCore-v4)").

The references here are written independently of ``golden/mx.py``: a scalar loop over the
declared order, AWS's CPU reference semantics (dequantise each element by its group's scale,
then a matmul) in float64 and float32, and XORWOW written out from Marsaglia's paper.
"""

import math

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import mx
from systolica.golden.mx import (
    deinterleave,
    dequantize_mx,
    interleave,
    mx_error_bound,
    nc_matmul_mx,
    pack_x4,
    quantize_mx,
    round_to_bf16,
    scales_to_quadrants,
    unpack_x4,
    xorwow_bits,
)

E4M3FN, E5M2, E2M1 = (np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                            ml_dtypes.float4_e2m1fn))
BF16, E8M0 = np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e8m0fnu)
MX = (E4M3FN, E5M2, E2M1)


def all_codes(dtype):
    n = 16 if dtype == E2M1 else 256
    return np.arange(n, dtype=np.uint8).view(dtype)


def random_operand(rng, dtype, p, f, finite=True):
    codes = rng.integers(0, 16 if dtype == E2M1 else 256, size=(p, f, 4), dtype=np.uint8)
    data = codes.view(dtype)
    if finite:
        data = np.where(np.isfinite(data.astype(np.float32)), data, data.dtype.type(1.0))
    return data.astype(dtype)


def scales(rng, p, f, low=110, high=145):
    return rng.integers(low, high, size=(p // 8, f), dtype=np.uint8).view(E8M0)


# ----- premises of the declared order ---------------------------------------------------------


@pytest.mark.parametrize("a", MX, ids=lambda d: d.name)
@pytest.mark.parametrize("b", MX, ids=lambda d: d.name)
def test_every_lane_product_is_exact_in_fp32(a, b):
    x = all_codes(a).astype(np.float64)[:, None]
    y = all_codes(b).astype(np.float64)[None, :]
    with np.errstate(invalid="ignore"):
        exact = x * y
        single = (x.astype(np.float32) * y.astype(np.float32)).astype(np.float64)
    finite = np.isfinite(exact)
    assert np.array_equal(single[finite], exact[finite])
    assert np.abs(exact[finite]).max() < 2.0**32


@pytest.mark.parametrize("target", (E4M3FN, E5M2), ids=lambda d: d.name)
def test_mxfp4_to_mxfp8_conversion_is_exact(target):
    values = all_codes(E2M1).astype(np.float32)
    assert np.array_equal(values.astype(target).astype(np.float32), values)


# ----- the declared order, against a scalar loop ----------------------------------------------


def scalar_reference(a, b, sa, sb):
    """The declared order, one element at a time with Python floats and np.float32 scalars."""
    p_count, m_count, n_count = a.shape[0], a.shape[1], b.shape[1]
    out = np.empty((m_count, n_count), np.float32)
    sa, sb = sa.view(np.uint8), sb.view(np.uint8)
    for m in range(m_count):
        for n in range(n_count):
            acc = None
            for p in range(p_count):
                prods = [np.float32(a[p, m, j]) * np.float32(b[p, n, j]) for j in range(4)]
                quad = (prods[0] + prods[1]) + (prods[2] + prods[3])
                ea, eb = int(sa[p // 8, m]), int(sb[p // 8, n])
                factor = math.nan if 0xFF in (ea, eb) else \
                    math.ldexp(1.0, ea - 127) * math.ldexp(1.0, eb - 127)
                term = np.float32(float(quad) * factor)
                acc = term if acc is None else np.float32(acc + term)
            out[m, n] = acc
    return out


@pytest.mark.parametrize("pair", [(E4M3FN, E4M3FN), (E5M2, E5M2), (E4M3FN, E5M2),
                                  (E2M1, E5M2), (E4M3FN, E2M1), (E2M1, E2M1)],
                         ids=lambda p: f"{p[0].name}x{p[1].name}")
def test_matches_scalar_reference_with_special_values(pair):
    rng = np.random.default_rng(7)
    a = random_operand(rng, pair[0], 16, 3, finite=False)
    b = random_operand(rng, pair[1], 16, 5, finite=False)
    sa = rng.integers(0, 256, size=(2, 3), dtype=np.uint8)
    sb = rng.integers(0, 256, size=(2, 5), dtype=np.uint8)
    sa[0, :2] = (0, 254)        # the extremes 2^-127 and 2^127 ...
    sb[1, :2] = (0xFF, 127)     # ... NaN, and 1.0
    with np.errstate(all="ignore"):
        want = scalar_reference(a, b, sa.view(E8M0), sb.view(E8M0))
    got = nc_matmul_mx(a, b, sa.view(E8M0), sb.view(E8M0))
    want = np.where(np.isnan(want), np.float32(np.nan), want)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got.view(np.uint32)[~np.isnan(got)],
                          want.view(np.uint32)[~np.isnan(want)])
    assert set(got.view(np.uint32)[np.isnan(got)]) <= {0x7FC00000}


def test_scale_of_each_group_applies_to_its_8_partitions_and_4_lanes():
    # One element per group is 1, its scale 2^g; every other element 0: result = sum 2^g.
    a = np.zeros((32, 1, 4), E4M3FN)
    b = np.zeros((32, 1, 4), E4M3FN)
    for g in range(4):
        a[8 * g + 7, 0, g] = b[8 * g + 7, 0, g] = 1.0
    sa = np.array([[127 + g] for g in range(4)], np.uint8).view(E8M0)
    sb = np.full((4, 1), 127, np.uint8).view(E8M0)
    assert nc_matmul_mx(a, b, sa, sb)[0, 0] == 1 + 2 + 4 + 8


def test_lane_tree_order_is_visible():
    # Lane products 2^24, 1, 1, -2^24 (exact sum 2): the tree (2^24 + 1) + (1 - 2^24) rounds
    # the first pair to 2^24 (tie to even) and keeps 1 - 2^24 exactly, giving 1; a serial
    # sum would give 0.
    a = np.zeros((8, 1, 4), E5M2)
    b = np.zeros((8, 1, 4), E5M2)
    a[0, 0] = (4096.0, 1.0, 1.0, -4096.0)
    b[0, 0] = (4096.0, 1.0, 1.0, 4096.0)
    one = np.full((1, 1), 127, np.uint8).view(E8M0)
    assert nc_matmul_mx(a, b, one, one)[0, 0] == 1.0


# ----- against AWS's CPU reference semantics --------------------------------------------------


@pytest.mark.parametrize("pair", [(E4M3FN, E4M3FN), (E5M2, E5M2), (E4M3FN, E5M2),
                                  (E2M1, E2M1), (E2M1, E4M3FN), (E5M2, E2M1)],
                         ids=lambda p: f"{p[0].name}x{p[1].name}")
def test_within_declared_bound_of_dequantise_then_matmul(pair):
    rng = np.random.default_rng(11)
    k, m, n = 512, 128, 256
    x = (rng.standard_normal((k, m)) * np.exp2(rng.integers(-6, 6, size=(k, 1))))
    y = (rng.standard_normal((k, n)) * np.exp2(rng.integers(-6, 6, size=(k, 1))))
    a, sa = quantize_mx(interleave(x.astype(np.float32)), pair[0], rule="ocp")
    b, sb = quantize_mx(interleave(y.astype(np.float32)), pair[1], rule="ocp")
    got = nc_matmul_mx(a, b, sa, sb).astype(np.float64)
    da, db = dequantize_mx(a, sa), dequantize_mx(b, sb)
    exact = np.einsum("pmj,pnj->mn", da, db)                  # float64: exact to 2^-53
    magnitude = np.einsum("pmj,pnj->mn", np.abs(da), np.abs(db))
    bound = mx_error_bound(k // 4, magnitude)
    assert np.all(np.abs(got - exact) <= bound + 2 * k * 2.0**-53 * magnitude)
    # AWS's reference itself (float32 dequantise + matmul) adds its own rounding: gamma(K).
    ref32 = np.einsum("pmj,pnj->mn", da.astype(np.float32), db.astype(np.float32))
    u = 2.0**-24
    assert np.all(np.abs(got - ref32) <= bound + k * u / (1 - k * u) * magnitude)
    # The bound is not vacuous: it is a few parts per million of the magnitude.
    assert np.median(bound / magnitude) < 1e-5


@pytest.mark.parametrize("rounding, ulps", [("rne", 0.5), ("stochastic", 1.0)])
def test_bf16_destination_adds_one_bf16_rounding_to_the_bound(rounding, ulps):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    y = rng.standard_normal((256, 64)).astype(np.float32)
    a, sa = quantize_mx(interleave(x), E2M1, rule="ocp")
    b, sb = quantize_mx(interleave(y), E4M3FN, rule="ocp")
    seed = 77 if rounding == "stochastic" else None
    got = nc_matmul_mx(a, b, sa, sb, dst_dtype=BF16, rounding=rounding, seed=seed)
    da, db = dequantize_mx(a, sa), dequantize_mx(b, sb)
    exact = np.einsum("pmj,pnj->mn", da, db)
    fp32_bound = mx_error_bound(64, np.einsum("pmj,pnj->mn", np.abs(da), np.abs(db)))
    # One BF16 rounding of the FP32 result: half an ulp (RNE) or less than one (stochastic),
    # an ulp being at most 2^-7 of |result|.
    bf16_bound = ulps * 2.0**-7 * (np.abs(exact) + fp32_bound)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= fp32_bound + bf16_bound)


# ----- PSUM and BF16 ---------------------------------------------------------------------------


def operands(seed=3, p=32, m=8, n=16):
    rng = np.random.default_rng(seed)
    a = random_operand(rng, E4M3FN, p, m)
    b = random_operand(rng, E5M2, p, n)
    return a, b, scales(rng, p, m), scales(rng, p, n)


def test_accumulate_adds_fp32_psum_once():
    a, b, sa, sb = operands()
    fresh = nc_matmul_mx(a, b, sa, sb)
    psum = np.random.default_rng(1).standard_normal(fresh.shape).astype(np.float32)
    got = nc_matmul_mx(a, b, sa, sb, psum=psum, accumulate=True)
    assert np.array_equal(got, (fresh + psum).astype(np.float32))
    assert np.array_equal(nc_matmul_mx(a, b, sa, sb, psum=psum), fresh)   # overwrite: not read


def test_bf16_destination_rounds_the_fp32_result_once_rne():
    a, b, sa, sb = operands()
    fp32 = nc_matmul_mx(a, b, sa, sb)
    got = nc_matmul_mx(a, b, sa, sb, dst_dtype=BF16)
    assert got.dtype == BF16
    assert np.array_equal(got.view(np.uint16), fp32.astype(BF16).view(np.uint16))


def test_bf16_accumulate_upcasts_adds_and_rounds_back():
    a, b, sa, sb = operands()
    fp32 = nc_matmul_mx(a, b, sa, sb)
    psum = np.random.default_rng(2).standard_normal(fp32.shape).astype(BF16)
    got = nc_matmul_mx(a, b, sa, sb, psum=psum, accumulate=True, dst_dtype=BF16)
    want = (fp32 + psum.astype(np.float32)).astype(np.float32).astype(BF16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def ref_xorwow(seed, lane, steps):
    """XORWOW (Marsaglia 2003, section 3.1) for one lane, seeded as documented."""
    def fmix32(h):
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        return h ^ (h >> 16)
    x, y, z, w, v = (seed ^ fmix32(((5 * lane + i + 1) * 0x9E3779B9) & 0xFFFFFFFF)
                     for i in range(5))
    d, out = 6615241 + lane, []
    for _ in range(steps):
        t = x ^ (x >> 2)
        x, y, z, w = y, z, w, v
        v = (v ^ (v << 4) ^ t ^ (t << 1)) & 0xFFFFFFFF
        d = (d + 362437) & 0xFFFFFFFF
        out.append((v + d) & 0xFFFFFFFF)
    return out


def test_xorwow_matches_the_paper_recurrence():
    bits = xorwow_bits(12345, 3, 50)
    for lane in range(3):
        assert bits[lane].tolist() == ref_xorwow(12345, lane, 50)


def test_stochastic_rounding_picks_a_neighbour_and_is_reproducible():
    x = np.random.default_rng(4).standard_normal((16, 64)).astype(np.float32)
    one = round_to_bf16(x, "stochastic", seed=9)
    assert np.array_equal(one.view(np.uint16), round_to_bf16(x, "stochastic", 9).view(np.uint16))
    assert not np.array_equal(one.view(np.uint16),
                              round_to_bf16(x, "stochastic", 10).view(np.uint16))
    down = (x.view(np.uint32) >> 16).astype(np.uint16)
    assert np.all((one.view(np.uint16) == down) | (one.view(np.uint16) == down + 1))


def test_stochastic_rounding_is_unbiased():
    # 65,536 draws of one value 0.3 BF16 ulp above a BF16 number: RNE is off by 0.3 ulp, the
    # SR mean must be within 5 sigma of the exact value.
    ulp = 2.0**-7
    value = np.float32(1.0 + 0.3 * ulp)
    x = np.full((128, 512), value, np.float32)
    sr = round_to_bf16(x, "stochastic", seed=2024).astype(np.float64)
    sigma = ulp * math.sqrt(0.3 * 0.7 / x.size)
    assert abs(sr.mean() - float(value)) < 5 * sigma
    rne = round_to_bf16(x).astype(np.float64)
    assert abs(rne.mean() - float(value)) > 100 * sigma


def test_stochastic_rounding_through_the_matmul_and_specials():
    a, b, sa, sb = operands()
    fp32 = nc_matmul_mx(a, b, sa, sb)
    got = nc_matmul_mx(a, b, sa, sb, dst_dtype=BF16, rounding="stochastic", seed=5)
    assert np.array_equal(got.view(np.uint16), round_to_bf16(fp32, "stochastic", 5).view(np.uint16))
    special = np.array([[np.inf, -np.inf, np.nan, 0.0, -0.0, 3.3895314e38]], np.float32)
    bits = round_to_bf16(special, "stochastic", 1).view(np.uint16)[0]
    assert bits[:5].tolist() == [0x7F80, 0xFF80, 0x7FC0, 0x0000, 0x8000]
    assert bits[5] in (0x7F7F, 0x7F80)          # BF16 max or, rounding up, +Inf


# ----- quantize_mx ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,emax", [(E4M3FN, 8), (E5M2, 15)], ids=["e4m3fn", "e5m2"])
@pytest.mark.parametrize("amax", [1.0, 1.9921875, 448.0, 3.0e-5, 60000.0])
def test_quantize_scale_rule_is_twice_ocp(dtype, emax, amax):
    src = np.full((8, 2, 4), 0.0, np.float32)
    src[3, 1, 2] = -amax
    src[0, 0, 0] = amax / 4
    src = src.astype(BF16)
    data, scale = quantize_mx(src, dtype)
    a = float(abs(src.astype(np.float32)).max(axis=(0, 2))[1])
    want = math.floor(math.log2(a)) - (emax - 1) + 127
    assert scale.view(np.uint8)[0, 1] == want
    ocp = quantize_mx(src, dtype, rule="ocp")[1]
    assert ocp.view(np.uint8)[0, 1] == want - 1
    # No saturation: every value divides to below 2^Emax, so RNE reaches 2^Emax at most, below
    # the type's max (448, 57344).
    values = data.astype(np.float32)
    assert np.abs(values).max() <= 2.0**emax
    assert values[3, 1, 2] == np.float32(-a / 2.0 ** (want - 127)).astype(dtype).astype(np.float32)


def test_quantize_all_zero_group_gets_smallest_scale_and_nan_group_gets_nan():
    src = np.zeros((16, 1, 4), BF16)
    src[9, 0, 1] = np.nan
    data, scale = quantize_mx(src, E4M3FN)
    assert scale.view(np.uint8).tolist() == [[0], [0xFF]]
    assert np.all(data[:8].astype(np.float32) == 0)
    assert np.all(np.isnan(data[8:].astype(np.float32)))


def test_quantize_ocp_saturates_and_rounds_the_rest_to_nearest():
    x = np.random.default_rng(5).standard_normal((32, 8, 4)).astype(np.float32)
    data, scale = quantize_mx(x, E4M3FN, rule="ocp")
    unit = dequantize_mx(np.ones_like(data), scale)          # the group's scale X per element
    back = dequantize_mx(data, scale)
    over = np.abs(x) > 448 * unit
    assert over.any()                                         # OCP's scale leaves values above max
    assert np.array_equal(back[over], np.sign(x[over]) * 448 * unit[over])
    # The others are normal e4m3fn values (3 fraction bits): within 2^-4 relative.
    assert np.all(np.abs(back - x)[~over] <= np.abs(x[~over]) * 2.0**-4)


# ----- layouts ----------------------------------------------------------------------------------


def test_interleave_packs_four_elements_k_over_4_apart():
    k, f = 64, 3
    matrix = np.arange(k * f).reshape(k, f)
    packed = interleave(matrix)
    assert packed.shape == (16, 3, 4)
    for p in range(16):
        for j in range(4):
            assert packed[p, 2, j] == matrix[j * 16 + p, 2]
    assert np.array_equal(deinterleave(packed), matrix)


def test_pack_x4_puts_lane_0_in_the_low_bits():
    data = np.array([[[1.0, 2.0, -1.0, 0.5]]], np.float32)
    word = pack_x4(data.astype(E4M3FN))[0, 0]
    assert word == 0x38 | 0x40 << 8 | 0xB8 << 16 | 0x30 << 24
    half = pack_x4(data.astype(E2M1))[0, 0]
    assert half == 0x2 | 0x4 << 4 | 0xA << 8 | 0x1 << 12
    assert np.array_equal(unpack_x4(np.array([half], np.uint16), E2M1).astype(np.float32)[0],
                          data[0, 0])


def test_scales_to_quadrants_spreads_groups_over_the_four_quadrants():
    scale = np.arange(16, dtype=np.uint8).reshape(16, 1).view(E8M0)
    hw = scales_to_quadrants(scale)
    assert hw.shape == (128, 1)
    assert [int(hw[32 * q + i, 0]) for q in range(4) for i in range(4)] == list(range(16))
    assert int(hw[4:32].sum()) == 0


# ----- one-line errors ------------------------------------------------------------------------


def call(**change):
    a, b, sa, sb = operands()
    args = {"stationary": a, "moving": b, "stationary_scale": sa, "moving_scale": sb}
    args.update(change)
    return nc_matmul_mx(**args)


@pytest.mark.parametrize("change,error,text", [
    ({"moving": np.zeros((32, 16, 4), BF16)}, TypeError, "not an MX element type"),
    ({"stationary": np.zeros((32, 8, 4), ml_dtypes.float8_e4m3)}, TypeError, "legacy"),
    ({"stationary": np.zeros((12, 8, 4), E4M3FN)}, ValueError, "multiple of 8"),
    ({"stationary": np.zeros((32, 8), E4M3FN)}, ValueError, "[P, F, 4]"),
    ({"stationary": np.zeros((136, 8, 4), E4M3FN)}, ValueError, "8..128"),
    ({"moving": np.zeros((32, 513, 4), E5M2)}, ValueError, "N <= 512"),
    ({"stationary_scale": np.zeros((4, 8), np.int8)}, TypeError, "float8_e8m0fnu"),
    ({"moving_scale": np.zeros((3, 16), E8M0)}, ValueError, "[P // 8, F]"),
    ({"dst_dtype": np.float16}, TypeError, "float32 or bfloat16"),
    ({"rounding": "stochastic", "seed": 1}, ValueError, "bfloat16 destination only"),
    ({"rounding": "stochastic", "dst_dtype": BF16}, ValueError, "needs seed"),
    ({"seed": 3}, ValueError, "stochastic' only"),
    ({"rounding": "up"}, ValueError, "'rne' or 'stochastic'"),
    ({"accumulate": True}, ValueError, "needs psum"),
    ({"accumulate": 1}, TypeError, "accumulate"),
    ({"psum": np.zeros((8, 16), BF16)}, TypeError, "float32 array"),
])
def test_illegal_inputs_give_one_line_errors(change, error, text):
    with pytest.raises(error) as info:
        call(**change)
    message = str(info.value)
    assert text in message and "\n" not in message


@pytest.mark.parametrize("args,text", [
    ((np.zeros((8, 1, 4), np.float32), E4M3FN), "bfloat16 or float16"),
    ((np.zeros((8, 1, 4), BF16), E2M1), "MXFP8 only"),
    ((np.zeros((8, 1, 4), BF16), np.int8), "MXFP8 only"),
])
def test_quantize_errors(args, text):
    with pytest.raises(TypeError, match=text):
        quantize_mx(*args)


def test_quantize_shape_errors():
    with pytest.raises(ValueError, match="8..128"):
        quantize_mx(np.zeros((136, 1, 4), BF16), E4M3FN)
    with pytest.raises(ValueError, match=r"\[P, F, 4\]"):
        quantize_mx(np.zeros((8, 4), BF16), E4M3FN)


def test_module_exports_are_importable():
    assert set(mx.__all__) <= set(dir(mx))
