"""Stream payload layouts of the tile, and the data type enumeration.

These layouts are the single source of truth for the bit packing of every stream: the RTL
is built from them and the cocotb testbench packs and unpacks beats through them
(``layout.const({...}).as_bits()`` and ``layout.from_bits(raw)``).

Operand lanes are 16 raw bits: a BF16 value's bit pattern, or an INT8 value in bits [7:0]
(bits [15:8] are ignored). PSUM lanes are 32 raw bits: an INT32 (two's complement) or an FP32
bit pattern, by the data type of the matmul that wrote them.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

#: Width of one operand lane in bits (BF16, or INT8 in the low byte).
OPERAND_WIDTH = 16
#: Width of one PSUM word in bits (INT32 or FP32).
PSUM_WIDTH = 32
#: PSUM entries per column: one per moving column n of a matmul (NeuronCore: 512 per bank).
PSUM_DEPTH = 512


class DType(enum.Enum, shape=1):
    """Data type of a matmul: INT8 x INT8 -> INT32, or BF16 x BF16 -> FP32."""

    INT8 = 0
    BF16 = 1


def _check_positive(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


def stationary_layout(cols):
    """Layout of one LoadStationary beat: one partition row of the stationary matrix.

    Beat ``k`` of a load carries ``stationary[k, :]`` (``cols`` 16-bit operand lanes, lanes
    ``>= M`` padded with zeros) in the data type of the matmul that will use it. ``last``
    marks row ``K - 1``; the rows after it are marked inactive and pass partial sums through
    unchanged.

    Raises
    ------
    ValueError
        If ``cols`` is not a positive integer.
    """
    _check_positive("cols", cols)
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(OPERAND_WIDTH), cols),
        "last": 1,
    })


def moving_layout(rows):
    """Layout of one MultiplyMoving beat: one unskewed K-vector of the moving matrix.

    Beat ``n`` of a matmul carries ``moving[:, n]`` (``rows`` 16-bit operand lanes, lanes
    ``>= K`` padded with zeros). ``last`` marks the final column ``N - 1``. ``dtype``,
    ``ftz`` (flush subnormals to zero, BF16 only) and ``accumulate`` (add into PSUM instead
    of overwriting it) are read from the first beat of each matmul and apply to all of it.

    Raises
    ------
    ValueError
        If ``rows`` is not a positive integer.
    """
    _check_positive("rows", rows)
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(OPERAND_WIDTH), rows),
        "last": 1,
        "dtype": DType,
        "ftz": 1,
        "accumulate": 1,
    })


def result_layout(cols):
    """Layout of one result beat: the PSUM column ``psum[:, n]`` after the matmul.

    ``cols`` 32-bit lanes (INT32 or FP32 bit patterns); ``last`` is set on the result of the
    moving beat that carried ``last``.

    Raises
    ------
    ValueError
        If ``cols`` is not a positive integer.
    """
    _check_positive("cols", cols)
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(PSUM_WIDTH), cols),
        "last": 1,
    })
