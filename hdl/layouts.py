"""Stream payload layouts of the tile.

These layouts are the single source of truth for the bit packing of every stream: the RTL
is built from them and the cocotb testbench packs and unpacks beats through them
(``layout.const({...}).as_bits()`` and ``layout.from_bits(raw)``).

INT8 operands are ``signed(8)``; PSUM words are ``signed(32)`` (INT32, two's complement).
"""

from amaranth.hdl import signed
from amaranth.lib import data

#: Width of one operand lane in bits (INT8).
OPERAND_WIDTH = 8
#: Width of one PSUM word in bits (INT32 accumulation).
PSUM_WIDTH = 32


def _check_positive(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


def stationary_layout(cols):
    """Layout of one LoadStationary beat: one partition row of the stationary matrix.

    Beat ``k`` of a load carries ``stationary[k, :]`` (``cols`` INT8 lanes, lanes ``>= M``
    padded with zeros). ``last`` marks row ``K - 1``; the rows after it are marked inactive
    and pass partial sums through unchanged.

    Raises
    ------
    ValueError
        If ``cols`` is not a positive integer.
    """
    _check_positive("cols", cols)
    return data.StructLayout({
        "data": data.ArrayLayout(signed(OPERAND_WIDTH), cols),
        "last": 1,
    })


def moving_layout(rows):
    """Layout of one MultiplyMoving beat: one unskewed K-vector of the moving matrix.

    Beat ``n`` of a matmul carries ``moving[:, n]`` (``rows`` INT8 lanes, lanes ``>= K``
    padded with zeros). ``last`` marks the final column ``N - 1`` of the matmul; after it the
    tile switches to the next loaded stationary.

    Raises
    ------
    ValueError
        If ``rows`` is not a positive integer.
    """
    _check_positive("rows", rows)
    return data.StructLayout({
        "data": data.ArrayLayout(signed(OPERAND_WIDTH), rows),
        "last": 1,
    })


def result_layout(cols):
    """Layout of one result beat: one de-skewed PSUM row ``psum[:, n]`` of ``cols`` INT32 lanes.

    ``last`` is set on the result of the moving beat that carried ``last``.

    Raises
    ------
    ValueError
        If ``cols`` is not a positive integer.
    """
    _check_positive("cols", cols)
    return data.StructLayout({
        "data": data.ArrayLayout(signed(PSUM_WIDTH), cols),
        "last": 1,
    })
