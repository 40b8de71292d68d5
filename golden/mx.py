"""Bit-exact golden model of NeuronCore-v4's MX matmul (``nc_matmul_mx``) and of the Vector
engine's ``quantize_mx`` (``docs/numerics.md``, section "MX formats (NeuronCore-v4)").

Layout (AWS, "Trainium3 Architecture Guide for NKI", section "Quad-MXFP8/MXFP4 Matmul
Performance"): an MX operand sits in SBUF as ``[P, F]`` x4-packed elements, P <= 128
partitions; the contraction runs over the partitions *and* the four packed lanes, so
K = 4 * P <= 512. This model takes the unpacked view ``[P, F, 4]`` (lane j of partition p is
the j-th element of the x4 word) and one E8M0 scale per 32-element group of 8 partitions x 4
lanes, as a contiguous ``[P // 8, F]`` array (``nki.isa.quantize_mx``, "Layout"; the
four-quadrant SBUF placement is :func:`scales_to_quadrants`).

Declared arithmetic (AWS publishes only "FP32 accumulation"; the choices are argued in
``docs/numerics.md``):

1. Elements decode exactly (MXFP4 e2m1 values are all e4m3fn and e5m2 values, so the MXFP4 ->
   MXFP8 conversion of the default mapping is exact). Each lane product is exact in FP32
   (at most 4 x 4 significant bits, |p| in [2^-32, 2^32)).
2. The PE adds its four lane products as a tree of FP32 RNE adds: ``(p0 + p1) + (p2 + p3)``.
3. The PE multiplies that sum by ``2^(s_stationary + s_moving - 254)`` (one exponent add for
   the four lanes, which share both scales), rounding once (RNE, gradual underflow, overflow to
   +-Inf); an 0xFF scale is NaN.
4. The column chain adds the PE results with FP32 RNE adds, partition 0 first (as
   ``nc_matmul``); accumulating adds the FP32 (or upcast BF16) PSUM value with one more add.
5. A BF16 destination rounds the FP32 result once, immediately before the PSUM write: RNE, or
   stochastic rounding with 16 random bits from XORWOW (:func:`xorwow_bits`).
"""

import ml_dtypes
import numpy as np

from .bf16 import CANONICAL_NAN, check_fp_environment
from .command import MX_GROUP_ROWS, check_bool
from .matmul import ENGINE_ROWS

__all__ = ["E8M0", "ENGINE_ROWS", "GROUP_PARTITIONS", "LANES", "MX_TYPES", "check_mx_operand",
           "check_mx_operands", "command_types", "deinterleave",
           "dequantize_mx", "interleave", "mx_error_bound", "mx_pe", "nc_matmul_mx", "pack_x4",
           "quadrant_rows", "quantize_mx", "round_to_bf16", "scales_to_quadrants", "unpack_x4",
           "xorwow_bits"]

#: The scale type (OCP E8M0: value 2^(s - 127), 0xFF is NaN, no zero, no sign).
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
#: Packed elements per x4 word, and partitions per 32-element scale group.
LANES, GROUP_PARTITIONS = 4, MX_GROUP_ROWS
#: MX element types: dtype -> (short name, Emax: largest unbiased exponent, max finite).
MX_TYPES = {
    np.dtype(ml_dtypes.float8_e4m3fn): ("e4m3fn", 8, 448.0),
    np.dtype(ml_dtypes.float8_e5m2): ("e5m2", 15, 57344.0),
    np.dtype(ml_dtypes.float4_e2m1fn): ("e2m1", 2, 6.0),
}
_MX_NAMES = "float8_e4m3fn, float8_e5m2 or float4_e2m1fn"
#: Moving free size of one nc_matmul_mx by destination (``nki.isa.nc_matmul_mx``, Tile size).
_MAX_N = {np.dtype(np.float32): 512, np.dtype(ml_dtypes.bfloat16): 1024}
_MAX_M = 128
_BF16 = np.dtype(ml_dtypes.bfloat16)
_FP32 = np.dtype(np.float32)
_ROUNDINGS = ("rne", "stochastic")


# ---------------------------------------------------------------------------------------------
# Checks


def _check_element(name, array, other=None):
    """The element rule: an MX type; legacy e4m3 and non-MX partners are named."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of {_MX_NAMES}, not "
                        f"{type(array).__name__}")
    if array.dtype in MX_TYPES:
        return MX_TYPES[array.dtype]
    if array.dtype == np.dtype(ml_dtypes.float8_e4m3):
        raise TypeError(f"{name} is legacy float8_e4m3 (NeuronCore-v2/v3, max 240), which does "
                        "not mix with MX: MX matmuls take OCP float8_e4m3fn, float8_e5m2 or "
                        "float4_e2m1fn")
    partner = f" (its partner {other} is MX: both operands must be MX)" if other else ""
    raise TypeError(f"{name} has dtype {array.dtype.name}, not an MX element type{partner}; "
                    f"nc_matmul_mx takes {_MX_NAMES} for both operands (use nc_matmul for "
                    "non-MX types)")


def _check_scale(name, scale, shape):
    if not isinstance(scale, np.ndarray) or scale.dtype not in (E8M0, np.dtype(np.uint8)):
        shown = scale.dtype.name if isinstance(scale, np.ndarray) else type(scale).__name__
        raise TypeError(f"{name} must be a float8_e8m0fnu (or uint8 bit patterns) array, not "
                        f"{shown}")
    if scale.shape != shape:
        raise ValueError(f"{name} must have shape [P // 8, F] = {shape} (one scale per 8 "
                         f"partitions x 4 lanes), not {scale.shape}")
    return scale.view(np.uint8)


def _check_operand(name, array, rows=None):
    """[P, F, 4] with P a positive multiple of 8, at most ``rows`` (None: no limit)."""
    if array.ndim != 3 or array.shape[2] != LANES:
        raise ValueError(f"{name} must be [P, F, 4] (partitions, free, x4 lanes), not shape "
                         f"{array.shape}")
    p = array.shape[0]
    if p < 1 or p % GROUP_PARTITIONS or (rows is not None and p > rows):
        where = f" in 8..{rows}" if rows is not None else ""
        raise ValueError(f"{name} has P = {p} partitions; P must be a multiple of 8 (K = 4 P "
                         f"a multiple of 32, whole scale groups){where}")


def _check_dst(dst_dtype, rounding, seed):
    try:
        dst = np.dtype(dst_dtype)
    except TypeError:
        dst = None
    if dst not in _MAX_N:
        raise TypeError(f"dst_dtype must be float32 or bfloat16, not {dst_dtype!r}")
    if rounding not in _ROUNDINGS:
        raise ValueError(f"rounding must be 'rne' or 'stochastic', not {rounding!r}")
    if rounding == "stochastic":
        if dst == _FP32:
            raise ValueError("stochastic rounding applies to a bfloat16 destination only; "
                             "FP32 results are written as accumulated (use rounding='rne')")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) \
                or not 0 <= seed < 2**32:
            raise ValueError(f"stochastic rounding needs seed, an integer in 0..2**32-1, not "
                             f"{seed!r}")
    elif seed is not None:
        raise ValueError("seed applies to rounding='stochastic' only; leave it None for RNE")
    return dst


# ---------------------------------------------------------------------------------------------
# Rounding to BF16 and the XORWOW generator


def xorwow_constants(lanes):
    """The per-lane constants of the XORWOW seeding, ``[5, lanes]`` uint32: word i of lane m
    is ``fmix32((5 m + i + 1) * 0x9E3779B9 mod 2^32)`` (MurmurHash3's finaliser), fixed
    when the tile is generated (:func:`xorwow_bits` XORs the seed into them)."""
    lane = np.arange(lanes, dtype=np.uint64)
    words = []
    for i in range(5):
        h = ((lane * 5 + i + 1) * 0x9E3779B9) & 0xFFFFFFFF
        for shift, mult in ((16, 0x85EBCA6B), (13, 0xC2B2AE35), (16, None)):   # fmix32
            h ^= h >> shift
            if mult is not None:
                h = (h * mult) & 0xFFFFFFFF
        words.append(h.astype(np.uint32))
    return np.array(words, np.uint32)


def _xorwow_init(seed, lanes):
    """State words (x, y, z, w, v, d) of one XORWOW generator per lane (uint32 arrays)."""
    words = list(xorwow_constants(lanes) ^ np.uint32(seed))
    words[0] = np.where(np.all(np.array(words) == 0, axis=0), np.uint32(1), words[0])
    lane = np.arange(lanes, dtype=np.uint32)
    return words + [(np.uint32(6615241) + lane).astype(np.uint32)]


def xorwow_bits(seed, lanes, steps):
    """Random bits of stochastic rounding: ``steps`` outputs of ``lanes`` XORWOW generators.

    Each PSUM partition (lane) has its own generator (Marsaglia 2003, "Xorshift RNGs",
    section 3.1: five xorshift words and a Weyl counter ``d += 362437``, output ``v + d``),
    as NeuronCore-v4's Vector engine holds XORWOW states per compute lane (AWS, "Trainium3
    Architecture Guide for NKI", "XORWOW-based PRNG"). Lane m's words are
    ``seed XOR fmix32((5 m + i + 1) * 0x9E3779B9)`` for i = 0..4 (:func:`xorwow_constants`;
    x = 1 if all five would be zero) and ``d = 6615241 + m``: the hashing is done once, when
    the tile is generated, and a command's seed costs one XOR per word.

    Parameters
    ----------
    seed : int, 0 .. 2**32 - 1
    lanes, steps : int

    Returns
    -------
    numpy.ndarray, uint32, shape [lanes, steps]: output s of lane m at ``[m, s]``.
    """
    x, y, z, w, v, d = _xorwow_init(int(seed), lanes)
    out = np.empty((lanes, steps), np.uint32)
    with np.errstate(over="ignore"):
        for s in range(steps):
            t = x ^ (x >> np.uint32(2))
            x, y, z, w = y, z, w, v
            v = (v ^ (v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
            d = d + np.uint32(362437)
            out[:, s] = v + d
    return out


def round_to_bf16(x, rounding="rne", seed=None):
    """Round FP32 values to BF16 as the PSUM write does.

    Parameters
    ----------
    x : numpy.ndarray, float32, shape [M, N]
    rounding : "rne" or "stochastic"
        ``"rne"``: round to nearest, ties to even. ``"stochastic"``: add 16 random bits to the
        16 FP32 bits BF16 drops (sign-magnitude, so the magnitude rounds up with probability
        equal to the dropped fraction) and truncate; the bits are the upper halves of
        ``xorwow_bits(seed, M, N)``, element [m, n] taking lane m's n-th output.
    seed : int or None
        Required for stochastic rounding.

    Returns
    -------
    numpy.ndarray, bfloat16, shape [M, N]; NaN is the canonical 0x7FC0, overflow gives +-Inf.
    """
    x = np.asarray(x)
    if x.dtype != _FP32 or x.ndim != 2:
        raise TypeError(f"x must be a 2-D float32 array, not {x.dtype} with shape {x.shape}")
    _check_dst(_BF16, rounding, seed)
    bits = x.view(np.uint32)
    nan = np.isnan(x)
    if rounding == "rne":
        out = x.astype(_BF16).view(np.uint16)
    else:
        noise = xorwow_bits(seed, x.shape[0], x.shape[1]) >> np.uint32(16)
        finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
        added = np.where(finite, bits + noise, bits)       # magnitude + noise, carry may reach Inf
        out = (added >> np.uint32(16)).astype(np.uint16)
    return np.where(nan, np.uint16(CANONICAL_NAN >> 16), out).view(_BF16)


# ---------------------------------------------------------------------------------------------
# The matmul


def _scale_bits(scale):
    """E8M0 scales (float8_e8m0fnu, or their bits as integers) -> uint8 bit patterns."""
    scale = np.asarray(scale)
    return scale.view(np.uint8) if scale.dtype == E8M0 else scale.astype(np.uint8)


def _scale_values(bits):
    """E8M0 bit patterns -> float64 scale values (0xFF -> NaN)."""
    values = np.ldexp(1.0, bits.astype(np.int64) - 127)
    return np.where(bits == 0xFF, np.nan, values)


def mx_pe(stationary, moving, stationary_scale, moving_scale):
    """One PE's MX step (declared arithmetic 1-3): the four lane products of an x4 word pair,
    added as ``(p0 + p1) + (p2 + p3)`` with FP32 RNE adds, times
    ``2^(s_stationary + s_moving - 254)`` rounded once (RNE, gradual underflow, overflow to
    +-Inf); a 0xFF scale gives NaN.

    Parameters
    ----------
    stationary, moving : numpy.ndarray, shape [..., 4]
        The x4 words' elements, lane j at ``[..., j]``: an MX element type or their float32
        values (the two broadcast against each other).
    stationary_scale, moving_scale : numpy.ndarray, uint8 or float8_e8m0fnu
        E8M0 scale bits, broadcast against the words' leading shape.

    Returns
    -------
    numpy.ndarray, float32, the broadcast leading shape; NaN is canonical (0x7FC00000).

    Raises
    ------
    RuntimeError
        The CPU's FP mode (FTZ/DAZ) would make the model inexact.
    """
    check_fp_environment()
    scaled = _pe_step(np.asarray(stationary).astype(np.float32),
                      np.asarray(moving).astype(np.float32),
                      _scale_values(_scale_bits(stationary_scale))
                      * _scale_values(_scale_bits(moving_scale)))    # exact in float64
    return np.where(np.isnan(scaled), np.uint32(CANONICAL_NAN),
                    scaled.view(np.uint32)).view(_FP32)


def _pe_step(a, b, scale):
    """:func:`mx_pe` on float32 lanes ``a``, ``b`` [..., 4] and the float64 product of the
    two scale values (NaN not made canonical): the one place of the PE arithmetic, which
    :func:`nc_matmul_mx` calls per partition with the inputs converted once."""
    with np.errstate(all="ignore"):
        lane = np.multiply(a, b, dtype=np.float32)          # exact: <= 4 x 4 significant bits
        quad = (lane[..., 0] + lane[..., 1]) + (lane[..., 2] + lane[..., 3])
        return (quad.astype(np.float64) * scale).astype(np.float32)


def check_mx_operand(name, data, scale):
    """The rules one MX operand follows whatever its size (a whole GEMM operand before it is
    cut into matmuls): ``data`` [P, F, 4] of an MX element type with P a multiple of 8,
    ``scale`` [P // 8, F] E8M0 (float8_e8m0fnu or uint8 bits). Returns the scale's bits
    (uint8 array); ``name`` (str) names the operand in the one-line error.

    Raises
    ------
    TypeError, ValueError
        As :func:`nc_matmul_mx` for that operand and its scale (no limit on P or F).
    """
    _check_element(name, data)
    _check_operand(name, data)
    return _check_scale(f"{name} scale", scale, (data.shape[0] // GROUP_PARTITIONS,
                                                 data.shape[1]))


def check_mx_operands(stationary, moving, stationary_scale, moving_scale, *,
                      dst_dtype=np.float32, rows=ENGINE_ROWS):
    """The operand rules of :func:`nc_matmul_mx` (its arguments of the same names), without
    computing it: returns the two scales' E8M0 bits (uint8 arrays).

    Raises
    ------
    TypeError, ValueError
        As :func:`nc_matmul_mx` for the operands and scales (one line each).
    """
    _check_element("stationary", stationary)
    _check_element("moving", moving, other=stationary.dtype.name)
    _check_operand("stationary", stationary, rows)
    _check_operand("moving", moving, rows)
    dst = np.dtype(dst_dtype)
    p, m, n = stationary.shape[0], stationary.shape[1], moving.shape[1]
    if moving.shape[0] != p:
        raise ValueError(f"stationary and moving must share P; got {stationary.shape} and "
                         f"{moving.shape}")
    if m > _MAX_M or n > _MAX_N[dst]:
        raise ValueError(f"M = {m}, N = {n}: nc_matmul_mx takes M <= {_MAX_M} and N <= "
                         f"{_MAX_N[dst]} with a {dst.name} destination")
    return (_check_scale("stationary_scale", stationary_scale, (p // GROUP_PARTITIONS, m)),
            _check_scale("moving_scale", moving_scale, (p // GROUP_PARTITIONS, n)))


def command_types(stationary, moving):
    """The tile command's view of an MX operand pair (checked elements): ``(dtype,
    moving_dtype)`` short names and ``fp4`` per side; an MXFP4 (e2m1) side is ``e4m3fn``,
    the type its elements convert to in front of the array (``Command.fp4``)."""
    e2m1 = np.dtype(ml_dtypes.float4_e2m1fn)
    fp4 = (stationary.dtype == e2m1, moving.dtype == e2m1)
    names = tuple("e4m3fn" if is_fp4 else MX_TYPES[a.dtype][0]
                  for a, is_fp4 in zip((stationary, moving), fp4, strict=True))
    return names, fp4


def nc_matmul_mx(stationary, moving, stationary_scale, moving_scale, *, psum=None,
                 accumulate=False, dst_dtype=np.float32, rounding="rne", seed=None,
                 rows=ENGINE_ROWS):
    """MX matmul of the NeuronCore-v4 Tensor Engine: dequantise by the block scales and
    compute ``stationary.T @ moving`` over K = 4 P, into PSUM (FP32 or BF16).

    Parameters
    ----------
    stationary : numpy.ndarray, [P, M, 4], float8_e4m3fn, float8_e5m2 or float4_e2m1fn
        Element ``[p, m, j]`` is lane j of the x4 word at partition p (:func:`interleave` makes
        this layout from a [K, M] matrix). M <= 128.
    moving : numpy.ndarray, [P, N, 4], an MX element type (may differ from stationary's)
        N <= 512 for an FP32 destination, 1024 for BF16 (``nki.isa.nc_matmul_mx``, Tile size).
    stationary_scale, moving_scale : numpy.ndarray, float8_e8m0fnu (or uint8 bits), [P // 8, M]
        and [P // 8, N]: ``scale[g, f]`` applies to elements ``[8 g .. 8 g + 7, f, 0..3]``.
    psum : numpy.ndarray, [M, N], dtype ``dst_dtype``, optional
        Required with ``accumulate``; never read otherwise.
    accumulate : bool
    dst_dtype : numpy.float32 or ml_dtypes.bfloat16
        The PSUM tile's type.
    rounding : "rne" or "stochastic"
        Rounding of the FP32 result to a BF16 destination (stochastic needs BF16).
    seed : int or None
        XORWOW seed of stochastic rounding (:func:`xorwow_bits`); None for RNE.
    rows : int
        Partition rows of the array (P <= rows); 128 on NeuronCore-v4.

    Returns
    -------
    numpy.ndarray, [M, N], ``dst_dtype``: the new PSUM contents (the declared order in the
    module docstring; NaN is canonical).

    Raises
    ------
    TypeError
        A non-MX operand (legacy e4m3 named as such), a scale that is not E8M0/uint8, a wrong
        ``dst_dtype`` or ``psum`` dtype, a non-bool ``accumulate``.
    ValueError
        A shape that is not [P, F, 4] with P a multiple of 8 up to ``rows``, differing P, M or N
        over the limits, scale shapes, ``accumulate`` without ``psum``, an unknown rounding,
        stochastic rounding with FP32 output or without a seed, a seed with RNE.
    RuntimeError
        The CPU's FP mode (FTZ/DAZ) would make the model inexact.
    """
    _check_element("stationary", stationary)    # the types first, as they always were
    _check_element("moving", moving, other=stationary.dtype.name)
    check_bool("accumulate", accumulate)
    dst = _check_dst(dst_dtype, rounding, seed)
    s_bits, m_bits = check_mx_operands(stationary, moving, stationary_scale, moving_scale,
                                       dst_dtype=dst, rows=rows)
    m, n = stationary.shape[1], moving.shape[1]
    if accumulate and psum is None:
        raise ValueError(f"accumulate=True needs psum, the [M, N] {dst.name} PSUM contents")
    if psum is not None and (not isinstance(psum, np.ndarray) or psum.dtype != dst
                             or psum.shape != (m, n)):
        shown = (psum.dtype, psum.shape) if isinstance(psum, np.ndarray) else type(psum)
        raise TypeError(f"psum must be a {dst.name} array of shape [M, N] = {(m, n)}, not "
                        f"{shown}")
    acc = mx_sums(stationary, moving, s_bits, m_bits)
    if accumulate:
        with np.errstate(all="ignore"):
            acc = _canonical(np.add(acc, psum.astype(np.float32), dtype=np.float32))
    if dst == _FP32:
        return acc
    return round_to_bf16(acc, rounding, seed)


def mx_sums(stationary, moving, stationary_bits, moving_bits):
    """The FP32 column sums of an MX matmul before any PSUM add or BF16 rounding (what
    :func:`nc_matmul_mx` computes first), for operands :func:`check_mx_operands` passed and
    the E8M0 bits it returned; any N (the columns are independent: a tile whose region
    crosses banks takes more than the instruction's 512).

    Returns
    -------
    numpy.ndarray, [M, N], float32, NaN canonical.

    Raises
    ------
    RuntimeError
        The CPU's FP mode (FTZ/DAZ) would make the model inexact.
    """
    check_fp_environment()
    a = stationary.astype(np.float32)          # exact: every MX element is an FP32 value
    b = moving.astype(np.float32)
    s_scale, m_scale = _scale_values(stationary_bits), _scale_values(moving_bits)
    acc = None
    with np.errstate(all="ignore"):
        for part in range(stationary.shape[0]):
            group = part // GROUP_PARTITIONS
            scaled = _pe_step(a[part, :, None, :], b[part, None, :, :],
                              s_scale[group][:, None] * m_scale[group][None, :])
            acc = scaled if acc is None else np.add(acc, scaled, dtype=np.float32)
    return _canonical(acc)


def _canonical(acc):
    """FP32 ``acc`` with every NaN the canonical one."""
    return np.where(np.isnan(acc), np.uint32(CANONICAL_NAN), acc.view(np.uint32)).view(_FP32)


def mx_error_bound(p, magnitude):
    """Bound on |golden - exact| implied by the declared order, for P partitions (K = 4 P).

    Each product reaches the result through two lane-tree adds and at most P - 1 chain adds,
    P + 1 RNE roundings of unit u = 2^-24 (the scaling is exact in the normal range), so
    ``|nc_matmul_mx - sum_k a_k b_k X_a X_b| <= gamma(P + 1) * sum_k |a_k b_k X_a X_b|`` with
    ``gamma(n) = n u / (1 - n u)`` (Higham, "Accuracy and Stability of Numerical Algorithms",
    2nd ed., section 3.1 and lemma 3.1), plus (P + 1) * 2^-150 per element if values reach
    the subnormal range.

    Parameters
    ----------
    p : int
    magnitude : numpy.ndarray, float64: ``sum_k |a_k b_k X_a X_b|`` per result element.

    Returns
    -------
    numpy.ndarray, float64, same shape.
    """
    u = 2.0**-24
    n = p + 1
    return n * u / (1 - n * u) * magnitude + n * 2.0**-150


# ---------------------------------------------------------------------------------------------
# quantize_mx and the layouts


def quantize_mx(src, dtype, *, rule="aws"):
    """Quantise BF16/FP16 data to MX elements and E8M0 scales, as ``nki.isa.quantize_mx``.

    Parameters
    ----------
    src : numpy.ndarray, [P, F, 4], bfloat16 or float16 (or float32 with ``rule="ocp"``)
        In the interleaved layout (:func:`interleave`); P a multiple of 8 up to 128 (the
        instruction needs a multiple of 32).
    dtype : float8_e4m3fn or float8_e5m2 (``rule="aws"``); also float4_e2m1fn with "ocp"
    rule : "aws" or "ocp"
        ``"aws"`` (the instruction, ``nki.isa.quantize_mx``, "Scale calculation"): scale
        ``X = 2^(floor(log2 amax) - (Emax - 1))``, twice OCP's, so |v / X| < 2^Emax rounds to
        2^Emax at most, below the type's max: no value saturates. ``"ocp"`` (OCP MX v1.0's
        conversion, the CPU reference's inputs): ``X = 2^(floor(log2 amax) - Emax)`` and
        values beyond the type's max clip to it.
        Both: amax is the group's largest |v|; an all-zero group gets X = 2^-127 (code 0);
        exponents are clamped to E8M0's -127..127; v / X is cast with RNE. A group holding
        NaN or Inf gets the NaN scale 0xFF and NaN (e4m3fn, e5m2) or 0 (e2m1) elements (not
        published; see ``docs/numerics.md``).

    Returns
    -------
    (numpy.ndarray [P, F, 4] of ``dtype``, numpy.ndarray [P // 8, F] float8_e8m0fnu)
    """
    if rule not in ("aws", "ocp"):
        raise ValueError(f"rule must be 'aws' or 'ocp', not {rule!r}")
    sources = (_BF16, np.dtype(np.float16)) + ((_FP32,) if rule == "ocp" else ())
    if not isinstance(src, np.ndarray) or src.dtype not in sources:
        shown = src.dtype.name if isinstance(src, np.ndarray) else type(src).__name__
        raise TypeError(f"src must be {' or '.join(d.name for d in sources)} with "
                        f"rule={rule!r}, not {shown}")
    try:
        out = np.dtype(dtype)
    except TypeError:
        out = None
    allowed = tuple(MX_TYPES)[:2] if rule == "aws" else tuple(MX_TYPES)
    if out not in allowed:
        raise TypeError(f"dtype must be {' or '.join(d.name for d in allowed)} with "
                        f"rule={rule!r} (quantize_mx writes MXFP8 only), not {dtype!r}")
    _check_operand("src", src, ENGINE_ROWS)
    _, emax, top = MX_TYPES[out]
    p, f = src.shape[:2]
    x = src.astype(np.float64).reshape(p // GROUP_PARTITIONS, GROUP_PARTITIONS, f, LANES)
    bad = ~np.isfinite(x).all(axis=(1, 3))
    amax = np.where(bad, 0.0, np.abs(np.where(np.isfinite(x), x, 0.0)).max(axis=(1, 3)))
    exp = np.frexp(amax)[1] - 1                       # floor(log2 amax), exact
    shift = emax - 1 if rule == "aws" else emax
    code = np.where(amax == 0, 0, np.clip(exp - shift, -127, 127) + 127)
    scaled = np.ldexp(x, -(code.astype(np.int64) - 127)[:, None, :, None])
    scaled = np.clip(scaled, -top, top)
    nan_code = 0 if out == np.dtype(ml_dtypes.float4_e2m1fn) else np.nan
    scaled = np.where(bad[:, None, :, None], nan_code, scaled)
    data = scaled.astype(np.float32).astype(out).reshape(p, f, LANES)
    code = np.where(bad, 0xFF, code).astype(np.uint8)
    return data, code.view(E8M0)


def dequantize_mx(data, scale):
    """AWS's CPU reference dequantisation: each element times its group's scale, as float64
    (exact), shape [P, F, 4] (``nc_matmul_mx_golden`` of the NKI MX tutorial code,
    ``mx_cpu_utils.py``; an 0xFF scale gives NaN)."""
    _check_element("data", data)
    _check_operand("data", data)
    bits = _check_scale("scale", scale, (data.shape[0] // GROUP_PARTITIONS, data.shape[1]))
    values = np.repeat(_scale_values(bits), GROUP_PARTITIONS, axis=0)[:, :, None]
    return data.astype(np.float64) * values


def interleave(matrix):
    """[K, F] -> [K / 4, F, 4]: lane j of partition p holds row ``j * K / 4 + p`` (four
    elements K / 4 apart packed together: "Trainium3 Architecture Guide for NKI", section
    "Quad-MXFP8/MXFP4 Matmul Performance"; NKI MX tutorial, "Data Tensor"). K a multiple of 4."""
    k = matrix.shape[0]
    if matrix.ndim != 2 or k % LANES:
        raise ValueError(f"matrix must be [K, F] with K a multiple of 4, not {matrix.shape}")
    return matrix.reshape(LANES, k // LANES, matrix.shape[1]).transpose(1, 2, 0)


def deinterleave(packed):
    """Inverse of :func:`interleave`: [P, F, 4] -> [4 P, F]."""
    if packed.ndim != 3 or packed.shape[2] != LANES:
        raise ValueError(f"packed must be [P, F, 4], not {packed.shape}")
    return packed.transpose(2, 0, 1).reshape(LANES * packed.shape[0], packed.shape[1])


def pack_x4(data):
    """Bits of NKI's x4 words: [P, F, 4] -> uint32 (FP8, lane j in bits 8 j + 7 .. 8 j) or
    uint16 (FP4, lane j in bits 4 j + 3 .. 4 j), as the tutorial's ``pack_mx_data_into_x4``
    lays bytes (little-endian, first element lowest)."""
    _check_element("data", data)
    codes = data.view(np.uint8).astype(np.uint32)
    width = 4 if data.dtype == np.dtype(ml_dtypes.float4_e2m1fn) else 8
    words = sum((codes[..., j] & ((1 << width) - 1)) << (width * j) for j in range(LANES))
    return words.astype(np.uint16 if width == 4 else np.uint32)


def unpack_x4(words, dtype):
    """Inverse of :func:`pack_x4`: uint32 (FP8) or uint16 (FP4) words -> [..., 4] ``dtype``."""
    out = np.dtype(dtype)
    if out not in MX_TYPES:
        raise TypeError(f"dtype must be {_MX_NAMES}, not {dtype!r}")
    width = 4 if out == np.dtype(ml_dtypes.float4_e2m1fn) else 8
    want = np.dtype(np.uint16 if width == 4 else np.uint32)
    if words.dtype != want:
        raise TypeError(f"{out.name} x4 words are {want.name}, not {words.dtype}")
    w = words.astype(np.uint32)
    lanes = [(w >> (width * j)) & ((1 << width) - 1) for j in range(LANES)]
    return np.stack(lanes, axis=-1).astype(np.uint8).view(out)


def quadrant_rows(groups):
    """SBUF partitions (list of int) of ``groups`` scale groups of an MX tile: group i (data
    partitions 8 i .. 8 i + 7) sits at ``32 * (i // 4) + i % 4``, in the 32-partition
    quadrant its data came from (NKI MX tutorial, "Scale Tensor")."""
    return [32 * (i // 4) + i % 4 for i in range(groups)]


def scales_to_quadrants(scale):
    """Contiguous [P // 8, F] scales -> the SBUF layout [P, F] uint8 that ``nc_matmul_mx`` reads
    for P > 32: group i sits at partition ``32 * (i // 4) + i % 4``, in the quadrant its data
    came from; the other partitions are 0 (NKI MX tutorial, "Scale Tensor";
    ``get_p_contiguous_scale`` of its CPU utilities is the inverse)."""
    bits = np.asarray(scale).view(np.uint8)
    groups = bits.shape[0]
    out = np.zeros((groups * GROUP_PARTITIONS, bits.shape[1]), np.uint8)
    out[quadrant_rows(groups)] = bits
    return out
