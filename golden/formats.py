"""Operand types of the tensor engine, the one rule that decodes each into FP32, and the
rules that say which operand pairs, modes and K a matmul may have (``docs/numerics.md``).

Every float operand type here is a subset of FP32 (fewer exponent and significand bits), so
each input decodes *exactly* into FP32; the product of two decoded inputs has at most
11 + 11 = 22 significant bits and so is exact in FP32 unless it leaves the normal range.
One table per type maps every bit pattern to its FP32 value (built once with ``ml_dtypes``,
whose widening casts are exact).

The rules about types live here and nowhere else: :func:`operand_formats` (which pairs are
allowed), :func:`check_perf_mode` and :func:`check_k` (how large K may be on a tile of
``rows`` partition rows). ``nc_matmul``, the command check, the testbench and the run API
all call them.
"""

from dataclasses import dataclass
from functools import cache

import ml_dtypes
import numpy as np

__all__ = ["DOUBLE_ROW", "DOUBLE_ROW_TYPES", "FORMATS", "FloatFormat", "OperandFormat",
           "check_k", "check_perf_mode", "decode", "double_row_order", "format_of",
           "max_k", "operand_formats"]

#: ``perf_mode`` value of FP8 double-row matmuls (NKI's name).
DOUBLE_ROW = "double_row"
#: Types allowed in a double-row matmul (both operands; mixing them is allowed).
DOUBLE_ROW_TYPES = ("e4m3", "e5m2")


@dataclass(frozen=True)
class OperandFormat:
    """One operand type of the tensor engine.

    Attributes
    ----------
    name : str
        Short name used by commands, reports and the RTL's ``DType`` (``"bf16"``, ``"e4m3"``).
    dtype : numpy.dtype
        The numpy / ``ml_dtypes`` dtype of operand arrays.
    code : int
        Value of the 3-bit ``dtype`` command fields (``systolica.hdl.layouts.DType``).
    width : int
        Bits of one operand.
    exp_bits, man_bits, bias : int
        Floating-point fields (0 for INT8).
    has_inf : bool
        Exponent field all ones with fraction 0 is +-Inf (IEEE-style types). ``False`` for
        ``e4m3fn``, whose only NaN is S.1111.111 and whose other all-ones patterns are finite.
    """

    name: str
    dtype: np.dtype
    code: int
    width: int
    exp_bits: int = 0
    man_bits: int = 0
    bias: int = 0
    has_inf: bool = True

    @property
    def is_float(self):
        """Whether this is a floating-point type (bool)."""
        return self.exp_bits > 0

    @property
    def psum_dtype(self):
        """numpy dtype of PSUM words of a matmul of this type: int32 or float32."""
        return np.dtype(np.float32 if self.is_float else np.int32)


#: Alias kept for readers who think of the float types only.
FloatFormat = OperandFormat

#: Every operand type, in ``code`` order.
FORMATS = {f.name: f for f in (
    OperandFormat("int8", np.dtype(np.int8), 0, 8),
    OperandFormat("bf16", np.dtype(ml_dtypes.bfloat16), 1, 16, 8, 7, 127),
    OperandFormat("fp16", np.dtype(np.float16), 2, 16, 5, 10, 15),
    OperandFormat("e4m3", np.dtype(ml_dtypes.float8_e4m3), 3, 8, 4, 3, 7),
    OperandFormat("e5m2", np.dtype(ml_dtypes.float8_e5m2), 4, 8, 5, 2, 15),
    OperandFormat("e3m4", np.dtype(ml_dtypes.float8_e3m4), 5, 8, 3, 4, 3),
    OperandFormat("e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn), 6, 8, 4, 3, 7, has_inf=False),
)}
_BY_DTYPE = {f.dtype: f for f in FORMATS.values()}
_ALLOWED = ", ".join(f"{f.dtype.name} ({f.name})" for f in FORMATS.values())


def format_of(name_or_dtype, what="operand"):
    """The :class:`OperandFormat` of a short name (``"e4m3"``) or a dtype.

    Raises
    ------
    TypeError
        If it names no supported operand type.
    """
    if isinstance(name_or_dtype, str) and name_or_dtype in FORMATS:
        return FORMATS[name_or_dtype]
    try:
        dtype = np.dtype(name_or_dtype)
    except TypeError:
        dtype = None
    if dtype not in _BY_DTYPE:
        shown = dtype.name if dtype is not None else repr(name_or_dtype)
        raise TypeError(f"{what} has unsupported type {shown}; the tensor engine takes "
                        f"{_ALLOWED}")
    return _BY_DTYPE[dtype]


def operand_formats(stationary_dtype, moving_dtype, *, perf_mode=None):
    """Check an operand pair and return its two :class:`OperandFormat` s.

    Any float type pairs with any other; INT8 pairs only with INT8; ``perf_mode =
    "double_row"`` needs both operands ``float8_e4m3`` or ``float8_e5m2``.

    Raises
    ------
    TypeError
        If a dtype is not an operand type, INT8 is paired with a float type, or the pair is
        not allowed in double-row mode.
    ValueError
        If ``perf_mode`` is neither ``None`` nor ``"double_row"``.
    """
    check_perf_mode(perf_mode)
    pair = (format_of(stationary_dtype, "stationary"), format_of(moving_dtype, "moving"))
    if pair[0].is_float != pair[1].is_float:
        raise TypeError(f"int8 pairs only with int8; got stationary {pair[0].dtype.name} and "
                        f"moving {pair[1].dtype.name}")
    if perf_mode == DOUBLE_ROW and not all(f.name in DOUBLE_ROW_TYPES for f in pair):
        raise TypeError(f"perf_mode='double_row' needs both operands float8_e4m3 or "
                        f"float8_e5m2; got stationary {pair[0].dtype.name} and moving "
                        f"{pair[1].dtype.name}")
    return pair


def check_perf_mode(perf_mode):
    """Raise ``ValueError`` unless ``perf_mode`` is ``None`` or ``"double_row"``."""
    if perf_mode not in (None, DOUBLE_ROW):
        raise ValueError(f"perf_mode must be None or 'double_row', not {perf_mode!r}")


def max_k(rows, perf_mode=None):
    """Largest K of one matmul on a tile of ``rows`` partition rows: ``rows``, or
    ``2 * rows`` in double-row mode."""
    return 2 * rows if perf_mode == DOUBLE_ROW else rows


def check_k(k, rows, perf_mode=None):
    """Raise ``ValueError`` unless ``1 <= k <= max_k(rows, perf_mode)``."""
    limit = max_k(rows, perf_mode)
    if not 1 <= k <= limit:
        mode = " in double_row mode (2 x rows)" if perf_mode == DOUBLE_ROW else ""
        raise ValueError(f"K must be in 1..{limit} on a tile of {rows} partition rows{mode}, "
                         f"not {k}")


def double_row_order(k, rows):
    """Order of the column chain of a double-row matmul: k = 0, rows, 1, rows + 1, ...,
    skipping elements at or beyond ``k`` (list of int)."""
    order = []
    for r in range(min(k, rows)):
        order += [r] + ([r + rows] if r + rows < k else [])
    return order


@cache
def _table(name):
    """FP32 value of every bit pattern of a float type (float32 array of 2**width)."""
    fmt = FORMATS[name]
    patterns = np.arange(1 << fmt.width, dtype=np.uint32).astype(f"u{fmt.width // 8}")
    with np.errstate(all="ignore"):
        values = patterns.view(fmt.dtype).astype(np.float32)
    values.setflags(write=False)
    return values


def decode(x, *, ftz=False):
    """The one decode rule: float operands -> their exact FP32 values.

    Parameters
    ----------
    x : numpy.ndarray of a float operand type
    ftz : bool
        Read values subnormal *in their own type* (exponent field 0, fraction not 0) as zero
        of the same sign.

    Returns
    -------
    numpy.ndarray, float32, same shape (NaNs are some NaN; results are canonicalised later)
    """
    fmt = format_of(x.dtype)
    bits = x.view(f"u{fmt.width // 8}")
    values = _table(fmt.name)[bits]
    if ftz:
        exp_mask = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
        sign = np.uint32(1 << 31)
        flushed = (bits & exp_mask) == 0
        values = np.where(flushed, values.view(np.uint32) & sign,
                          values.view(np.uint32)).view(np.float32)
    return values
