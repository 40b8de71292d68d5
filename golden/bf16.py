"""Bit-exact BF16 x BF16 -> FP32 numerics of the tensor engine (see ``docs/numerics.md``).

Every function here computes exactly what one PE (or the PSUM adder) of the RTL computes:

- ``bf16_product``: the exact product of two BF16 values, rounded to FP32 with
  round-to-nearest-even (IEEE 754-2019 section 4.3.1), gradual underflow, overflow to +-Inf
  (section 7.4). The exact product has at most 16 significant bits, so it is exact in FP32
  unless it leaves the normal range.
- ``fp32_add``: an IEEE 754 FP32 add, one RNE rounding, signed zeros per section 6.3.
- Any NaN result is the canonical quiet NaN ``CANONICAL_NAN`` (0x7FC00000, positive sign),
  whatever the NaN payloads or signs that went in (section 6.2 leaves the payload open).
- ``ftz=True``: subnormal operands are flushed to zero of the same sign before use, and a
  result whose correctly rounded IEEE value (with gradual underflow) is subnormal is replaced
  by zero of the same sign.

The arithmetic is numpy float32 on values converted exactly from BF16 (by bit shifting), which
is IEEE RNE with gradual underflow as long as the CPU is not in flush-to-zero (FTZ) or
denormals-are-zero (DAZ) mode, and the rounding mode is the default round-to-nearest-even.
Every public entry point checks that first (:func:`check_fp_environment`) and raises
``RuntimeError`` otherwise. FTZ mode is then applied explicitly, bit by bit.
"""

import ml_dtypes
import numpy as np

from .command import check_bool

__all__ = ["CANONICAL_NAN", "bf16_bits", "bf16_product", "check_fp_environment",
           "flush_subnormals", "fp32_add", "fp32_bits", "fp32_chain", "fp32_chain_batch",
           "from_bf16_bits", "from_fp32_bits"]

#: Bit pattern of every NaN the model produces: the quiet NaN with positive sign, no payload.
CANONICAL_NAN = 0x7FC00000

BF16 = np.dtype(ml_dtypes.bfloat16)
FP32 = np.dtype(np.float32)

_FP32_EXP = np.uint32(0x7F800000)
_FP32_SIGN = np.uint32(0x80000000)
_BF16_EXP = np.uint16(0x7F80)
_BF16_SIGN = np.uint16(0x8000)


# ---------------------------------------------------------------------------------------------
# Floating-point environment self-check


def _environment_problem():
    """Return a description of what is wrong with this thread's FP environment, or None."""
    one = np.ones(1, FP32)
    with np.errstate(all="ignore"):
        # DAZ: a subnormal operand read as zero.
        min_sub = np.array([1], np.uint32).view(FP32)          # 2**-149
        if (min_sub * one).view(np.uint32)[0] != 1:
            return "subnormal float32 operands are read as zero (DAZ mode is on)"
        # FTZ: a subnormal result written as zero.
        min_norm = np.array([0x00800000], np.uint32).view(FP32)  # 2**-126
        if (min_norm * np.float32(0.5)).view(np.uint32)[0] != 0x00400000:
            return "subnormal float32 results are flushed to zero (FTZ mode is on)"
        # Rounding direction: two exact ties, one rounding down and one up to even.
        tie = np.float32(2.0**-24)
        if (one + tie).view(np.uint32)[0] != 0x3F800000 or (
                (np.array([0x3F800001], np.uint32).view(FP32) + tie).view(np.uint32)[0]
                != 0x3F800002):
            return "float32 adds do not round to nearest, ties to even"
    return None


def check_fp_environment():
    """Check that numpy float32 arithmetic is IEEE 754 RNE with gradual underflow.

    Called by every public function of this module (a few microseconds), because a library
    loaded later (for example one built with ``-ffast-math``) can switch the CPU's FTZ/DAZ
    flags on for the thread.

    Raises
    ------
    RuntimeError
        If subnormals are flushed (FTZ) or read as zero (DAZ), or adds do not round to nearest
        even: the golden model would then not be bit-exact.
    """
    problem = _environment_problem()
    if problem is not None:
        raise RuntimeError(
            f"the BF16 golden model needs IEEE float32 arithmetic, but {problem} in this "
            "thread; something switched the CPU's floating-point mode (a library built with "
            "-ffast-math?), so results would not be bit-exact")


# ---------------------------------------------------------------------------------------------
# Bit patterns


def _require(name, value, dtype):
    array = np.asarray(value)
    if array.dtype != dtype:
        raise TypeError(f"{name} must be a {dtype.name} array (or scalar), not {array.dtype}; "
                        f"convert it first, e.g. with .astype({dtype.name})")
    return array


def _bits_array(name, value, dtype, limit):
    array = np.asarray(value)
    if array.dtype == dtype:
        return array.copy()
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer bit patterns, not {array.dtype}")
    if array.size and (array.min() < 0 or array.max() > limit):
        raise ValueError(f"{name} must hold bit patterns in 0..{limit:#x}; got values from "
                         f"{int(array.min()):#x} to {int(array.max()):#x}")
    return array.astype(dtype)


def bf16_bits(x):
    """Raw bit patterns of a bfloat16 array (or scalar) ``x``, as uint16 of the same shape.

    Raises ``TypeError`` if ``x`` is not bfloat16.
    """
    return _require("x", x, BF16).view(np.uint16)


def from_bf16_bits(bits):
    """bfloat16 array with the bit patterns ``bits`` (uint16, or integers in 0..0xFFFF).

    NaN payloads and signs are kept exactly. Raises ``TypeError`` for non-integer input and
    ``ValueError`` for values outside 0..0xFFFF.
    """
    return _bits_array("bits", bits, np.dtype(np.uint16), 0xFFFF).view(BF16)


def fp32_bits(x):
    """Raw bit patterns of a float32 array (or scalar) ``x``, as uint32 of the same shape.

    Raises ``TypeError`` if ``x`` is not float32.
    """
    return _require("x", x, FP32).view(np.uint32)


def from_fp32_bits(bits):
    """float32 array with the bit patterns ``bits`` (uint32, or integers in 0..0xFFFFFFFF).

    NaN payloads and signs are kept exactly. Raises ``TypeError`` for non-integer input and
    ``ValueError`` for values outside 0..0xFFFFFFFF.
    """
    return _bits_array("bits", bits, np.dtype(np.uint32), 0xFFFFFFFF).view(FP32)


# ---------------------------------------------------------------------------------------------
# Unchecked internals: float32 arrays in, float32 arrays out


def _flush32(x):
    """Subnormal float32 -> zero of the same sign (exponent field 0 keeps only the sign)."""
    bits = x.view(np.uint32)
    return np.where((bits & _FP32_EXP) == 0, bits & _FP32_SIGN, bits).view(FP32)


def _bf16_to_fp32(x):
    """Exact BF16 -> FP32: the BF16 bits are the FP32 value's upper half."""
    return (x.view(np.uint16).astype(np.uint32) << 16).view(FP32)


def _canonical(x):
    """Replace every NaN by the canonical quiet NaN."""
    return np.where(np.isnan(x), np.uint32(CANONICAL_NAN), x.view(np.uint32)).view(FP32)


def _mul(a, b, ftz):
    """a * b, rounded once (RNE); with ftz, operands and result flushed. NaNs not canonical."""
    if ftz:
        a, b = _flush32(a), _flush32(b)
    with np.errstate(all="ignore"):
        product = np.multiply(a, b, dtype=FP32)
    return _flush32(product) if ftz else product


def _add(a, b, ftz):
    """a + b, rounded once (RNE); with ftz, operands and result flushed. NaNs not canonical."""
    if ftz:
        a, b = _flush32(a), _flush32(b)
    with np.errstate(all="ignore"):
        total = np.add(a, b, dtype=FP32)
    return _flush32(total) if ftz else total


# ---------------------------------------------------------------------------------------------
# Public operations


def flush_subnormals(x):
    """Flush subnormals to zero of the same sign, as FTZ mode does to every operand.

    Parameters
    ----------
    x : numpy.ndarray (or scalar), float32 or bfloat16
        Values to flush.

    Returns
    -------
    numpy.ndarray, same dtype and shape as ``x``
        ``x`` with each subnormal (exponent field 0, fraction not 0) replaced by +-0. All other
        values, NaNs with their payloads included, are returned unchanged (the flush is the
        operand stage of a PE, before any arithmetic; it makes no NaN).

    Raises
    ------
    TypeError
        If ``x`` is neither float32 nor bfloat16.
    """
    array = np.asarray(x)
    if array.dtype == FP32:
        return _flush32(array)
    if array.dtype == BF16:
        bits = array.view(np.uint16)
        return np.where((bits & _BF16_EXP) == 0, bits & _BF16_SIGN, bits).view(BF16)
    raise TypeError(f"x must be a float32 or bfloat16 array, not {array.dtype}")


def bf16_product(a, b, *, ftz=False):
    """The PE multiplier: exact BF16 x BF16 product, rounded to FP32.

    Parameters
    ----------
    a, b : numpy.ndarray (or scalars), bfloat16, shapes that broadcast together
    ftz : bool
        ``False`` (IEEE mode): gradual underflow. ``True``: subnormal ``a``/``b`` are read as
        signed zero and a subnormal product is replaced by zero of the same sign.

    Returns
    -------
    numpy.ndarray, float32, the broadcast shape
        ``a * b`` rounded to nearest even (only when the product leaves the FP32 normal range),
        +-Inf on overflow, canonical NaN (0x7FC00000) for NaN operands and for 0 x Inf.

    Raises
    ------
    TypeError
        If ``a`` or ``b`` is not bfloat16, or ``ftz`` is not a bool.
    ValueError
        If the shapes do not broadcast.
    RuntimeError
        If the CPU's FP mode would make numpy float32 arithmetic inexact
        (see :func:`check_fp_environment`).
    """
    a = _require("a", a, BF16)
    b = _require("b", b, BF16)
    check_bool("ftz", ftz)
    check_fp_environment()
    return _canonical(_mul(_bf16_to_fp32(a), _bf16_to_fp32(b), ftz))


def fp32_add(a, b, *, ftz=False):
    """The PE / PSUM adder: one IEEE 754 FP32 add with round-to-nearest-even.

    Parameters
    ----------
    a, b : numpy.ndarray (or scalars), float32, shapes that broadcast together
    ftz : bool
        ``False`` (IEEE mode): gradual underflow. ``True``: subnormal ``a``/``b`` are read as
        signed zero and a subnormal sum is replaced by zero of the same sign.

    Returns
    -------
    numpy.ndarray, float32, the broadcast shape
        ``a + b`` rounded once; overflow gives +-Inf; ``x + (-x)`` is +0, ``(-0) + (-0)`` is -0;
        Inf - Inf and any NaN operand give the canonical NaN 0x7FC00000. The add is commutative
        bit for bit.

    Raises
    ------
    TypeError
        If ``a`` or ``b`` is not float32, or ``ftz`` is not a bool.
    ValueError
        If the shapes do not broadcast.
    RuntimeError
        If the CPU's FP mode would make numpy float32 arithmetic inexact.
    """
    a = _require("a", a, FP32)
    b = _require("b", b, FP32)
    check_bool("ftz", ftz)
    check_fp_environment()
    return _canonical(_add(a, b, ftz))


def fp32_chain(stationary, moving, psum, accumulate, ftz, order=None):
    """Float core of :func:`systolica.golden.nc_matmul`; arguments already checked there.

    ``stationary`` float32 [K, M] and ``moving`` float32 [K, N], K >= 1, the operands already
    decoded exactly (:func:`systolica.golden.formats.decode`, FTZ applied to them); ``psum``
    float32 [M, N] (read only when ``accumulate``); ``order`` the k of each chain step
    (default ``0 .. K-1``; double-row matmuls pass their own). Returns float32 [M, N]::

        acc = p[order[0]];  acc = fp32_add(acc, p[k]) for k in order[1:];
        result = fp32_add(psum, acc) if accumulate else acc

    (``p[k]`` the product, rounded once to FP32), vectorised over [M, N], one step per k, so
    the rounding order is exactly the RTL's.
    """
    check_fp_environment()
    order = range(stationary.shape[0]) if order is None else order
    s, m = stationary, moving
    acc = None
    for k in order:
        product = _mul(s[k][:, None], m[k][None, :], ftz)
        acc = product if acc is None else _add(acc, product, ftz)
    if accumulate:
        acc = _add(psum, acc, ftz)
    # NaN in gives NaN out of every step, so canonicalising once at the end is the same as
    # canonicalising after each step.
    return _canonical(acc)


def fp32_chain_batch(stationary, moving, ftz, order=None):
    """:func:`fp32_chain` without PSUM over a batch: ``stationary`` float32 [B, K, M],
    ``moving`` float32 [B, K, N]; returns float32 [B, M, N], each ``[b]`` bit for bit what
    ``fp32_chain(stationary[b], moving[b], None, False, ftz, order)`` returns."""
    check_fp_environment()
    order = range(stationary.shape[1]) if order is None else order
    acc = None
    for k in order:
        product = _mul(stationary[:, k, :, None], moving[:, k, None, :], ftz)
        acc = product if acc is None else _add(acc, product, ftz)
    return _canonical(acc)
