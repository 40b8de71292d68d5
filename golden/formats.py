"""Operand types of the tensor engine, the one rule that decodes each into FP32, and the
rules that say which operand pairs, modes and K a matmul may have (``docs/numerics.md``).

Every float operand type here is a subset of FP32 (fewer exponent and significand bits), so
each input decodes *exactly* into FP32; the product of two decoded inputs of the 8- and
16-bit types has at most 11 + 11 = 22 significant bits and so is exact in FP32 unless it
leaves the normal range. One table per 8/16-bit type maps every bit pattern to its FP32
value (built once with ``ml_dtypes``, whose widening casts are exact).

:data:`FORMATS` holds the 8- and 16-bit types, :data:`WIDE_FORMATS` the two 32-bit types,
``tfloat32`` (:data:`TFLOAT32`) and ``float32`` (codes 7 and 8 of the command word's 4-bit
``dtype`` fields; a tile takes them when generated with them): an FP32 product has up to 48
significant bits and is rounded once to FP32 (``docs/numerics.md``, "The tensor-engine
instruction").

The rules about types live here and nowhere else: :func:`operand_formats` (which pairs are
allowed), :func:`check_perf_mode` and :func:`check_k` (how large K may be on a tile of
``rows`` partition rows), :func:`check_transpose` (what transpose mode combines with) and
:attr:`OperandFormat.transpose_dtype` (the PSUM element a transpose writes). ``nc_matmul``,
the command check, the testbench and the run API all call them.
"""

from dataclasses import dataclass
from functools import cache

import ml_dtypes
import numpy as np

__all__ = ["DOUBLE_ROW", "DOUBLE_ROW_TYPES", "FORMATS", "FloatFormat", "OperandFormat",
           "TFLOAT32", "WIDE_FORMATS", "as_tfloat32", "check_k", "check_perf_mode",
           "check_transpose", "decode", "double_row_order", "format_of", "identity", "max_k",
           "operand_formats"]

#: ``perf_mode`` value of FP8 double-row matmuls (NKI's name).
DOUBLE_ROW = "double_row"
#: Types allowed in a double-row matmul (both operands; mixing them is allowed).
DOUBLE_ROW_TYPES = ("e4m3", "e5m2")

#: numpy dtype of ``tfloat32`` operands (NKI's ``nl.tfloat32``: 1 sign, 8 exponent and 10
#: fraction bits, stored in 32 bits; NKI API reference, "Supported Data Types"). numpy and
#: ml_dtypes have no TF32, so it is a one-field structured dtype over the FP32 word: make one
#: with :func:`as_tfloat32`, or ``float32_array.view(TFLOAT32)`` to reinterpret words as they
#: are; ``x["tfloat32"]`` reads the words back as float32. As an operand only the sign,
#: exponent and upper 10 fraction bits count: the lower 13 are ignored (:func:`decode`).
TFLOAT32 = np.dtype([("tfloat32", "<f4")])


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
    code: int | None
    width: int
    exp_bits: int = 0
    man_bits: int = 0
    bias: int = 0
    has_inf: bool = True
    label: str | None = None

    @property
    def type_name(self):
        """The type's numpy / ml_dtypes / NKI name (``"bfloat16"``, ``"tfloat32"``)."""
        return self.label or self.dtype.name

    @property
    def is_float(self):
        """Whether this is a floating-point type (bool)."""
        return self.exp_bits > 0

    @property
    def is_wide(self):
        """Whether this is ``tfloat32`` or ``float32``, which pair only with each other."""
        return self.width == 32

    @property
    def psum_dtype(self):
        """numpy dtype of PSUM words of a matmul of this type: int32 or float32."""
        return np.dtype(np.float32 if self.is_float else np.int32)

    @property
    def transpose_dtype(self):
        """numpy dtype of the PSUM elements a transpose of this type writes: the type itself
        for 16- and 32-bit types (BF16/FP16 as 16-bit elements, Trainium2 architecture guide,
        "Built-in Transpose Support"), and ``uint16`` holding the 8 bits in its low byte, the
        upper 8 bits zero, for 8-bit types (the same guide's note on FP8; INT8 follows it)."""
        return np.dtype(np.uint16) if self.width == 8 else self.dtype

    @property
    def exp_shift(self):
        """Bit position of the exponent field in the stored word (it follows the sign bit)."""
        return self.width - 1 - self.exp_bits


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
#: The 32-bit operand types, in ``code`` order after :data:`FORMATS` (a tile takes them when
#: generated with the ``fp32`` type set: 32-bit operand lanes).
WIDE_FORMATS = {f.name: f for f in (
    OperandFormat("tf32", TFLOAT32, 7, 32, 8, 10, 127, label="tfloat32"),
    OperandFormat("fp32", np.dtype(np.float32), 8, 32, 8, 23, 127),
)}
_ALL = {**FORMATS, **WIDE_FORMATS}
_BY_DTYPE = {f.dtype: f for f in _ALL.values()}
_BY_NAME = {**_ALL, **{f.type_name: f for f in _ALL.values()}}
_ALLOWED = ", ".join(f"{f.type_name} ({f.name})" for f in _ALL.values())


def format_of(name_or_dtype, what="operand"):
    """The :class:`OperandFormat` of a short name (``"e4m3"``) or a dtype.

    Raises
    ------
    TypeError
        If it names no supported operand type.
    """
    if isinstance(name_or_dtype, str) and name_or_dtype in _BY_NAME:
        return _BY_NAME[name_or_dtype]
    try:
        dtype = np.dtype(name_or_dtype)
    except (TypeError, ValueError):
        dtype = None
    if dtype not in _BY_DTYPE:
        shown = dtype.name if dtype is not None else repr(name_or_dtype)
        raise TypeError(f"{what} has unsupported type {shown}; the tensor engine takes "
                        f"{_ALLOWED}")
    return _BY_DTYPE[dtype]


def operand_formats(stationary_dtype, moving_dtype, *, perf_mode=None):
    """Check an operand pair and return its two :class:`OperandFormat` s.

    Any 8/16-bit float type pairs with any other; ``tfloat32``/``float32`` pair only with
    ``tfloat32``/``float32`` (NKI API reference, ``nki.isa.nc_matmul``, "Data types"); INT8
    pairs only with INT8; ``perf_mode = "double_row"`` needs both operands ``float8_e4m3``
    or ``float8_e5m2``.

    Raises
    ------
    TypeError
        If a dtype is not an operand type, INT8 is paired with a float type, a 32-bit type
        with an 8/16-bit one, or the pair is not allowed in double-row mode.
    ValueError
        If ``perf_mode`` is neither ``None`` nor ``"double_row"``.
    """
    check_perf_mode(perf_mode)
    pair = (format_of(stationary_dtype, "stationary"), format_of(moving_dtype, "moving"))
    problem = pair_problem(*pair)
    if problem is not None:
        raise TypeError(problem)
    if perf_mode == DOUBLE_ROW and not all(f.name in DOUBLE_ROW_TYPES for f in pair):
        raise TypeError(f"perf_mode='double_row' needs both operands float8_e4m3 or "
                        f"float8_e5m2; got stationary {pair[0].type_name} and moving "
                        f"{pair[1].type_name}")
    return pair


def pair_problem(stationary, moving):
    """Why two :class:`OperandFormat` s do not pair (str), or None when they do: INT8 pairs
    only with INT8, ``tfloat32`` / ``float32`` only with each other (the rule of
    :func:`operand_formats`)."""
    if stationary.is_float != moving.is_float:
        return (f"int8 pairs only with int8; got stationary {stationary.type_name} and "
                f"moving {moving.type_name}")
    if stationary.is_wide != moving.is_wide:
        return (f"tfloat32 and float32 pair only with tfloat32 or float32; got "
                f"stationary {stationary.type_name} and moving {moving.type_name}")
    return None


def check_perf_mode(perf_mode):
    """Raise ``ValueError`` unless ``perf_mode`` is ``None`` or ``"double_row"``."""
    if perf_mode not in (None, DOUBLE_ROW):
        raise ValueError(f"perf_mode must be None or 'double_row', not {perf_mode!r}")


def check_transpose(is_transpose, *, perf_mode=None, accumulate=False, ftz=False):
    """The transpose-mode rule: ``is_transpose`` is a bool, and a transpose (a pass-through
    of bit patterns) takes no ``perf_mode`` (Trainium2 architecture guide: double FP8 mode
    "cannot be combined with" transpose mode), no ``accumulate`` (its PSUM elements are not
    FP32 sums) and no ``ftz`` (nothing is computed, so nothing is flushed).

    Raises
    ------
    TypeError
        If ``is_transpose`` is not a bool.
    ValueError
        Naming the option that does not combine with ``is_transpose=True``.
    """
    if not isinstance(is_transpose, (bool, np.bool_)):
        raise TypeError(f"is_transpose must be a bool, not {type(is_transpose).__name__}")
    if not is_transpose:
        return
    for name, value, why in (
            ("perf_mode", perf_mode, "double-row mode does not combine with transpose mode"),
            ("accumulate", accumulate, "a transpose writes PSUM, it cannot add into it"),
            ("ftz", ftz, "a transpose passes bit patterns unchanged")):
        if value:
            raise ValueError(f"is_transpose=True takes no {name}={value!r}: {why}")


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


#: Bits of the stored word a 32-bit operand uses: TF32 ignores the lower 13 fraction bits.
_WIDE_KEEP = {"tf32": np.uint32(0xFFFFE000), "fp32": np.uint32(0xFFFFFFFF)}


def decode(x, *, ftz=False):
    """The one decode rule: float operands -> their exact FP32 values.

    Parameters
    ----------
    x : numpy.ndarray of a float operand type
        ``tfloat32`` words are read as TF32: sign, exponent and the upper 10 fraction bits;
        the lower 13 bits are ignored (so an FP32 NaN whose payload lies only there reads
        as Inf). ``float32`` words are read as they are.
    ftz : bool
        Read values subnormal *in their own type* (exponent field 0, fraction not 0) as zero
        of the same sign.

    Returns
    -------
    numpy.ndarray, float32, same shape (NaNs are some NaN; results are canonicalised later)
    """
    fmt = format_of(x.dtype)
    bits = x.view(f"u{fmt.width // 8}")
    if fmt.is_wide:
        values = (bits & _WIDE_KEEP[fmt.name]).view(np.float32)
    else:
        values = _table(fmt.name)[bits]
    if ftz:
        exp_mask = ((1 << fmt.exp_bits) - 1) << fmt.exp_shift
        sign = np.uint32(1 << 31)
        flushed = (bits & exp_mask) == 0
        values = np.where(flushed, values.view(np.uint32) & sign,
                          values.view(np.uint32)).view(np.float32)
    return values


def as_tfloat32(x):
    """FP32 values -> ``tfloat32`` operands, rounded to nearest, ties to even (the rounding
    mode NeuronCores use, ``docs/numerics.md``): the conversion a kernel makes on another
    engine before a TF32 matmul. The lower 13 bits of each result word are zero.

    Parameters
    ----------
    x : numpy.ndarray, float32

    Returns
    -------
    numpy.ndarray, :data:`TFLOAT32`, same shape
        Overflow past the largest TF32 value gives +-Inf; NaN stays NaN (sign and upper
        payload kept, quiet bit set).

    Raises
    ------
    TypeError
        If ``x`` is not a float32 array.
    """
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise TypeError(f"x must be a float32 array, not {x.dtype}; convert it first")
    bits = np.ascontiguousarray(x).view(np.uint32)
    lsb = (bits >> np.uint32(13)) & np.uint32(1)
    rounded = (bits + np.uint32(0xFFF) + lsb) & np.uint32(0xFFFFE000)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (bits & np.uint32(0xFFFFE000)) | np.uint32(0x00400000)
    return np.where(nan, quiet, rounded).astype(np.uint32).view(TFLOAT32)


def identity(k, dtype):
    """The k x k identity matrix in an operand type (1 on the diagonal, +0 elsewhere): the
    moving operand of a transpose (:func:`systolica.golden.nc_transpose`).

    Raises
    ------
    TypeError
        If ``dtype`` names no operand type.
    """
    fmt = format_of(dtype)
    eye = np.eye(k, dtype=np.float32)
    if fmt.name == "tf32":
        return eye.view(TFLOAT32)
    return eye.astype(fmt.dtype)
