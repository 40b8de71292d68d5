"""Stimulus for the tile: random INT8, BF16 and FP32 matrices, specials, directed values."""

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16

#: BF16 bit patterns of the special values mixed into random matrices.
SPECIALS = {
    "+0": 0x0000, "-0": 0x8000, "+inf": 0x7F80, "-inf": 0xFF80,
    "qnan": 0x7FC0, "-qnan payload": 0xFFC5, "snan payload": 0x7F81,
    "max finite": 0x7F7F, "-max finite": 0xFF7F, "min subnormal": 0x0001,
    "-min subnormal": 0x8001, "max subnormal": 0x007F, "min normal": 0x0080,
}


#: Special bit patterns of every operand width (NaN payloads and signs, Inf, -0, subnormals,
#: extremes of each type of that width), for transposes that must pass them unchanged.
SPECIAL_PATTERNS = {
    8: [0x00, 0x80, 0x01, 0x81, 0x07, 0x7F, 0xFF, 0x78, 0xF8, 0x7C, 0xFE, 0x7E, 0x3C, 0x40],
    16: [0x0000, 0x8000, 0x0001, 0x8001, 0x7C00, 0xFC00, 0x7F80, 0xFF80, 0x7E01, 0xFD55,
         0x7FC1, 0xFF81, 0x7BFF, 0x03FF, 0x3C00, 0x007F],
    32: [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000,
         0x7FC00000, 0xFFC00001, 0x7F800001, 0xFFBFFFFF, 0x7F7FFFFF, 0x3F800001,
         0x00001FFF, 0x7F801FFF],
}


def special_grids(width, rows, cols):
    """``rows x cols`` grids of :data:`SPECIAL_PATTERNS` ``[width]`` (lists of lists of int),
    one per pattern: over the grids, every pattern sits at every position once."""
    specials = SPECIAL_PATTERNS[width]
    p = len(specials)
    return [[[specials[(k + m + shift) % p] for m in range(cols)] for k in range(rows)]
            for shift in range(p)]


def fp32_words(rng, shape, dtype="fp32", specials=0.25):
    """Random FP32 words for TF32 / FP32 matmuls, viewed as ``dtype`` (``"fp32"``: float32,
    ``"tf32"``: ``golden.TFLOAT32``): exponents near 1.0 (products and sums in range), near
    0 (subnormal operands and products) and near 64 (products at the FP32 subnormal
    boundary), about ``specials`` of them replaced by :data:`SPECIAL_PATTERNS` ``[32]`` or
    the pair whose product is the tie that rounds up to 2^-126 (0x207FFFFF, 0x1F800000)."""
    from systolica.golden import TFLOAT32

    exponent = rng.choice(np.stack([rng.integers(110, 145, shape), rng.integers(0, 20, shape),
                                    rng.integers(60, 70, shape)]), axis=0)
    bits = ((rng.integers(0, 2, shape) << 31) | (exponent.astype(np.int64) << 23)
            | rng.integers(0, 1 << 23, shape)).astype(np.uint32)
    special = rng.random(shape) < specials
    pool = np.array(SPECIAL_PATTERNS[32] + [0x207FFFFF, 0x1F800000], np.uint32)
    bits[special] = rng.choice(pool, size=int(special.sum()))
    return bits.view(TFLOAT32 if dtype == "tf32" else np.float32)


def from_bits(bits):
    """BF16 array from raw uint16 bit patterns."""
    return np.asarray(bits, dtype=np.uint16).view(BF16)


def random_int8(rng, shape):
    """Uniform random int8 array of ``shape`` from numpy Generator ``rng``."""
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def bf16_normal(rng, shape):
    """Normal-range BF16 values: standard normal samples rounded to BF16 (RNE)."""
    return rng.standard_normal(shape).astype(np.float32).astype(BF16)


def bf16_wide(rng, shape):
    """Random finite BF16 bit patterns over the whole exponent range.

    Exponents are drawn uniformly from 0..254 (0 gives subnormals and zeros), so products
    underflow and overflow and sums cancel; a third of the values sit at the small end
    (exponents 0..8) so that subnormal products and sums are common.
    """
    exponent = rng.integers(0, 255, size=shape)
    small = rng.random(shape) < 1 / 3
    exponent = np.where(small, rng.integers(0, 9, size=shape), exponent)
    fraction = rng.integers(0, 128, size=shape)
    sign = rng.integers(0, 2, size=shape)
    return from_bits((sign << 15) | (exponent << 7) | fraction)


def with_specials(rng, values, fraction=0.1):
    """Copy of BF16 ``values`` with about ``fraction`` of them replaced by :data:`SPECIALS`."""
    bits = values.view(np.uint16).copy()
    pick = rng.random(bits.shape) < fraction
    bits[pick] = rng.choice(np.array(list(SPECIALS.values()), np.uint16), int(pick.sum()))
    return from_bits(bits)


def bf16(values):
    """BF16 array from Python floats (exactly representable values are kept exactly)."""
    return np.asarray(values, dtype=np.float32).astype(BF16)
