"""Stream payload layouts of the tile, and the data type enumeration.

These layouts are the single source of truth for the bit packing of every stream: the RTL
is built from them and the cocotb testbench packs and unpacks beats through them
(``layout.const({...}).as_bits()`` and ``layout.from_bits(raw)``).

A matmul is one command on the ``command`` stream plus ``K`` beats on ``stationary`` and ``N``
beats on ``moving``; the command carries everything else (data type, FTZ, accumulate, PSUM
bank and offset, K, M, N), so data beats carry only data.

Operand lanes are 16 raw bits: a BF16 or FP16 value's bit pattern, or an INT8 or FP8 value in
bits [7:0] (bits [15:8] are ignored), or in FP8 double-row mode two FP8 values: partition
row r's element k = r in bits [7:0] and k = r + rows in bits [15:8]. A tile generated with
TF32 / FP32 has 32-bit operand lanes: a TF32 or FP32 word, or any of the above in its low 16
bits. PSUM lanes are 32 raw bits: an INT32 (two's complement) or an FP32 bit pattern, by the
data type of the matmul that wrote them, or a transposed element in bits [15:0] (8-bit
types in bits [7:0]; a 32-bit type's whole word), the other bits zero.
"""

from amaranth.hdl import Cat, Value, unsigned
from amaranth.lib import data, enum

#: Width of one operand lane in bits (BF16, or INT8 in the low byte) on a tile generated
#: without the 32-bit types; with them (``TileConfig.wide``) lanes are :data:`WIDE_WIDTH`.
OPERAND_WIDTH = 16
#: Width of one operand lane of a tile generated with TF32 / FP32.
WIDE_WIDTH = 32
#: Width of one PSUM word in bits (INT32 or FP32).
PSUM_WIDTH = 32
#: PSUM banks per column (NeuronCore: 8 banks of 2 KiB per partition; NKI programming
#: model, "PSUM" in the memory hierarchy section).
PSUM_BANKS = 8
#: PSUM entries per bank: the largest N of one matmul (NeuronCore: 512 FP32 per bank).
PSUM_ENTRIES = 512
#: Bits of the command's ``bank`` field (so at most 256 banks can be addressed).
BANK_WIDTH = 8
#: Bits of the command's ``k``, ``m``, ``n`` and ``offset`` fields.
SIZE_WIDTH = 16
#: Bits of the command's stochastic-rounding ``seed`` field.
SEED_WIDTH = 32
#: Partition rows per E8M0 scale group of an MX operand (8 partitions x 4 packed elements).
MX_GROUP_ROWS = 8
#: Bits of an E8M0 block scale (the MX stream lanes, the PE's scale registers).
MX_SCALE_BITS = 8


class DType(enum.Enum, shape=4):
    """Data type of an operand: INT8 (with INT8 only, INT32 PSUM), a float type of 8 or 16
    bits (any pair, FP32 PSUM), or TF32 / FP32 (32-bit lanes, with each other only, FP32
    PSUM). Codes equal ``systolica.golden.formats``' ``code`` of each format."""

    INT8 = 0
    BF16 = 1
    FP16 = 2
    E4M3 = 3
    E5M2 = 4
    E3M4 = 5
    E4M3FN = 6
    TF32 = 7
    FP32 = 8


#: Operand types 8 bits wide, carried in bits [7:0] of a lane (the others are 16 bits;
#: golden: ``OperandFormat.width``).
NARROW_DTYPES = (DType.INT8, DType.E4M3, DType.E5M2, DType.E3M4, DType.E4M3FN)


#: The 8- and 16-bit operand types' codes (:class:`DType`'s first seven) in 3 bits: the type
#: codes of a tile with 16-bit lanes and of the 8/16-bit float multiplier, so those have the
#: registers and the netlist they had before TF32 / FP32 existed. It is named ``DType`` (the
#: netlist names an enum by its name): it is the 3-bit DType of before, and the name keeps the
#: 8/16-bit multipliers' Verilog byte for byte what `make exhaustive` verified
#: (``verif.exhaustive.netlist_hash``).
NarrowDType = enum.Enum("DType", [(t.name, t.value) for t in DType if t.value < 7])


def lane_dtype(width):
    """Shape of the operand type codes that travel with a ``width``-bit moving lane: the
    4-bit :class:`DType` with 32-bit lanes, else :class:`NarrowDType` (the command check
    keeps TF32 / FP32 off such a tile)."""
    return DType if width == WIDE_WIDTH else NarrowDType


#: Operand types 32 bits wide (only on a tile generated with them: 32-bit lanes).
WIDE_DTYPES = (DType.TF32, DType.FP32)
#: Element types of an MX matmul, the ones the MX PE's lane multipliers decode (OCP FP8;
#: MXFP4 is an E4M3FN side with its ``fp4`` bit, converted in front of the array).
MX_DTYPES = (DType.E4M3FN, DType.E5M2)


def mx_type(dtype):
    """A 1-bit value: 1 when ``dtype`` (a :class:`DType` code) is an MX element type
    (:data:`MX_DTYPES`)."""
    return Cat(Value.cast(dtype) == t for t in MX_DTYPES).any()


def is_wide(dtype):
    """A 1-bit value: 1 when ``dtype`` (a :class:`DType` code) is TF32 or FP32."""
    return Cat(Value.cast(dtype) == t for t in WIDE_DTYPES).any()


#: Passes of one moving column of a matmul with an FP32 operand (one per 12-bit partial
#: product of ``fp32_mul.Fp32Multiplier``), and of a TF32 / FP32 transpose (golden:
#: ``timing.FP32_PASSES``, ``timing.WIDE_TRANSPOSE_PASSES``).
FP32_PASSES, WIDE_TRANSPOSE_PASSES = 4, 2


def four_passes(stype, mtype):
    """A 1-bit value: 1 when a matmul of the operand types ``stype`` and ``mtype``
    (:class:`DType` codes) has an FP32 operand, so spends :data:`FP32_PASSES` passes on
    each moving column (TF32 x TF32 takes one)."""
    return (Value.cast(stype) == DType.FP32) | (Value.cast(mtype) == DType.FP32)


def is_narrow(dtype):
    """A 1-bit value: 1 when ``dtype`` (a :class:`DType`-shaped value) is one of
    :data:`NARROW_DTYPES`, whose operand sits in bits [7:0] of its 16-bit lane."""
    return Cat(Value.cast(dtype) == t for t in NARROW_DTYPES).any()


class Op(enum.Enum, shape=1):
    """Command opcode: a matmul, or a read-out of a PSUM region."""

    MATMUL = 0
    READ = 1


class ErrorCode(enum.Enum, shape=5):
    """Why the tile rejected a command (``status.error``), checked in this order.

    ``BANK_RANGE``: bank >= the tile's bank count. ``K_RANGE``: K = 0 or K > rows (matmul).
    ``M_RANGE``: M = 0 or M > cols (matmul). ``N_RANGE``: N = 0 or offset + N > entries per
    bank (the region leaves its bank; on an ``mx`` tile, the region passes the end of
    PSUM). ``DOUBLE_ROW_TYPE``: ``double_row`` set on a matmul whose operand types are not
    both E4M3 or E5M2. ``TYPE_NOT_BUILT``: an operand type (or
    double-row) the tile was not generated for, a type code that is no :class:`DType`,
    INT8 paired with a float type, or TF32 / FP32 paired with an 8- or 16-bit type.
    ``TRANSPOSE_DOUBLE_ROW``, ``TRANSPOSE_ACCUMULATE``, ``TRANSPOSE_FTZ``: ``transpose`` set
    on a matmul together with ``double_row``, ``accumulate`` or ``ftz``. ``TILE_*``: the
    tiling rule (``golden.tiles.tile_error``). ``MX_TYPE``: an MX operand type other than
    E4M3FN / E5M2, or ``fp4`` on a side that is not E4M3FN or on a matmul that is not MX.
    ``MX_K``: an MX K not a multiple of 8. ``MX_MODE``: MX with ``double_row``,
    ``transpose`` or ``ftz``. ``MX_TILE``: MX in a column tile. ``DST_MODE``: ``bf16_out``
    on a matmul that is not MX, or ``stochastic`` without ``bf16_out``.
    """

    NONE = 0
    BANK_RANGE = 1
    K_RANGE = 2
    M_RANGE = 3
    N_RANGE = 4
    DOUBLE_ROW_TYPE = 5
    TYPE_NOT_BUILT = 6
    TRANSPOSE_DOUBLE_ROW = 7
    TRANSPOSE_ACCUMULATE = 8
    TRANSPOSE_FTZ = 9
    TILE_SIZE = 10
    TILE_POSITION = 11
    TILE_K_RANGE = 12
    TILE_M_RANGE = 13
    TILE_DOUBLE_ROW = 14
    MX_TYPE = 15
    MX_K = 16
    MX_MODE = 17
    MX_TILE = 18
    DST_MODE = 19


def stationary_layout(cols, width=OPERAND_WIDTH, mx=False):
    """Layout of one LoadStationary beat: one partition row of the stationary matrix.

    Beat ``k`` of a load carries ``stationary[k, :]`` (``cols`` operand lanes of ``width``
    bits: 16, or 32 on a tile with TF32 / FP32 or MX) in the
    data type of the matmul that will use it. A load is ``K`` beats (``K`` from the command);
    lanes ``>= M`` are ignored (loaded as zeros), and partition rows ``>= K`` are marked
    inactive and pass partial sums through unchanged. With ``mx`` (a tile generated with
    the MX datapath) each lane also has an 8-bit ``scale``: an MX matmul's lane holds an x4
    word (four FP8 elements, lane j in bits 8j+7..8j; an MXFP4 side's four e2m1 elements in
    bits 15..0, 4j+3..4j) and ``scale`` the E8M0 scale of its group (partition row ``k``
    takes group ``k // 8``'s); other matmuls ignore ``scale``.

    """
    fields = {"data": data.ArrayLayout(unsigned(width), cols)}
    if mx:
        fields["scale"] = data.ArrayLayout(unsigned(MX_SCALE_BITS), cols)
    return data.StructLayout(fields)


def moving_layout(rows, width=OPERAND_WIDTH, mx=False):
    """Layout of one MultiplyMoving beat: one unskewed K-vector of the moving matrix, or of
    several matmuls running in tiles that share no PE row.

    Beat ``n`` of a matmul carries ``moving[:, n]`` in its tile's lanes (``rows`` operand
    lanes of ``width`` bits; a matmul's lanes ``>= K`` padded with zeros) and sets
    ``groups`` bit ``g`` for each row cell ``g`` of its tile (:func:`cell_grid`: the lanes
    ``g * grain .. (g + 1) * grain - 1``). A matmul is ``N`` beats (``N`` from the
    command); the tile spends several cycles on one beat of a matmul with an FP32 operand
    (``docs/numerics.md``, FP32 passes). One beat carries one column of every matmul in
    flight that takes one in that cycle, and the first column of at most one more, the
    oldest not started (``docs/tile.md``, concurrent tiles). With ``mx``, each lane also
    has an 8-bit ``scale``, the E8M0 scale of its x4 word's group in an MX matmul
    (:func:`stationary_layout`).

    """
    fields = {"data": data.ArrayLayout(unsigned(width), rows), "groups": cell_grid(rows)[0]}
    if mx:
        fields["scale"] = data.ArrayLayout(unsigned(MX_SCALE_BITS), rows)
    return data.StructLayout(fields)


def result_layout(cols):
    """Layout of one result beat: ``cols`` 32-bit lanes of PSUM entries.

    A matmul sends one beat per moving beat: PSUM entry ``offset + n`` of its bank after the
    matmul wrote it, in its tile's column cells (:func:`cell_grid`), each flagged in ``groups``
    (bit ``h``: lanes ``h * grain .. (h + 1) * grain - 1`` hold a result); matmuls in flight
    in other column cells share the beat. A READ sends the stored entries ``offset ..
    offset + N - 1``, every cell. Lanes are INT32 or FP32 bit patterns (by the data type of
    the matmul that wrote them); ``last`` bit ``h`` is set on the final beat of the command
    in cell ``h``.

    """
    count = cell_grid(cols)[0]
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(PSUM_WIDTH), cols),
        "groups": count,
        "last": count,
    })


def command_layout():
    """Layout of one command beat (the same for every tile size).

    Fields: ``op`` (:class:`Op`), ``dtype`` and ``moving_dtype`` (bits [2:0] of the
    :class:`DType` code of the stationary and of the moving operand; bit 3 of each is
    ``dtype_hi`` / ``moving_dtype_hi`` at the end of the word, so that TF32 = 7 and
    FP32 = 8 left every published position where it was: :func:`operand_types`),
    ``double_row`` (FP8 double-row: K up to
    2 x rows, ``min(K, rows)`` stationary beats), ``ftz`` (flush subnormal inputs, products
    and sums to zero; float only), ``accumulate`` (add into PSUM instead of
    overwriting it), ``transpose`` (transpose mode: each moving column selects one partition
    row, whose stationary bits go to PSUM unchanged; takes no ``double_row``, ``ftz`` or
    ``accumulate``), ``bank`` (PSUM bank, ``BANK_WIDTH`` bits), ``offset`` (first PSUM entry
    in the bank), ``k``, ``m``, ``n`` (``SIZE_WIDTH`` bits each: partition rows of the
    stationary, its free size, moving beats), then the tile (NKI's ``tile_position`` /
    ``tile_size``): ``tiled`` (0: the whole array, the other tile fields ignored),
    ``tile_row``, ``tile_col``, ``tile_rows``, ``tile_cols`` (``SIZE_WIDTH`` bits each), then
    ``dtype_hi`` and ``moving_dtype_hi``, then NeuronCore-v4's fields: ``mx`` (an MX matmul:
    x4 words with E8M0 scales, K in partition rows, a multiple of 8), ``fp4`` (bit 0: the
    stationary side is MXFP4, bit 1: the moving side), ``bf16_out`` (PSUM written as BF16),
    ``stochastic`` (stochastic rounding of that write) and ``seed`` (``SEED_WIDTH`` bits,
    its XORWOW seed). A READ uses ``bank``, ``offset`` and ``n`` only.
    """
    return data.StructLayout({
        "op": Op,
        "dtype": unsigned(3),
        "moving_dtype": unsigned(3),
        "double_row": 1,
        "ftz": 1,
        "accumulate": 1,
        "bank": unsigned(BANK_WIDTH),
        "offset": unsigned(SIZE_WIDTH),
        "k": unsigned(SIZE_WIDTH),
        "m": unsigned(SIZE_WIDTH),
        "n": unsigned(SIZE_WIDTH),
        "transpose": 1,     # after n: the fields before it keep their published positions
        "tiled": 1,         # and the tile after transpose, for the same reason
        "tile_row": unsigned(SIZE_WIDTH),
        "tile_col": unsigned(SIZE_WIDTH),
        "tile_rows": unsigned(SIZE_WIDTH),
        "tile_cols": unsigned(SIZE_WIDTH),
        "dtype_hi": 1,      # the type codes' bit 3 (TF32 / FP32 came after the tile fields)
        "moving_dtype_hi": 1,
        "mx": 1,            # NeuronCore-v4's MX matmul and BF16 PSUM writes, last of all
        "fp4": 2,
        "bf16_out": 1,
        "stochastic": 1,
        "seed": unsigned(SEED_WIDTH),
    })


def operand_types(command):
    """The 4-bit :class:`DType` codes ``(stationary, moving)`` of a :func:`command_layout`
    view (Values: each field's bits [2:0] with its ``_hi`` bit)."""
    return (Cat(command.dtype, command.dtype_hi),
            Cat(command.moving_dtype, command.moving_dtype_hi))


def status_layout():
    """Layout of the tile's ``status`` output.

    ``rejected``: number of commands rejected since reset (16 bits, wraps). ``error``: the
    :class:`ErrorCode` of the most recent rejection (``NONE`` until the first).
    """
    return data.StructLayout({"rejected": unsigned(16), "error": ErrorCode})


def tile_sizes(extent):
    """Tile sizes along a dimension of ``extent`` PEs (tuple of int, largest first): the
    extent, its half and its quarter, each where it divides the extent (golden:
    ``tiles.tile_sizes``)."""
    return tuple(extent // s for s in (1, 2, 4) if extent % s == 0)


def cell_grid(extent):
    """``(count, grain)``: a dimension of ``extent`` PEs is ``count`` cells of ``grain`` PEs,
    the finest tile (:func:`tile_sizes`): every tile is whole cells. The moving stream's
    ``groups`` name row cells, the result stream's column cells, and the loader keeps the
    weight buffers' state per (row cell, column cell)."""
    grain = min(tile_sizes(extent))
    return extent // grain, grain


def cell_mask(start, size, extent):
    """The cells (:func:`cell_grid`) of a dimension of ``extent`` PEs that PEs ``start ..
    start + size - 1`` cover, one bit per cell (an Amaranth value; every tile is whole
    cells)."""
    count, grain = cell_grid(extent)
    return Cat((start <= g * grain) & (start + size > g * grain) for g in range(count))


def token_layout(psum_depth, mx=False):
    """What each beat in flight is in one column cell, for the PSUM stage (StructLayout;
    internal to the tile: the issue logic makes one per column cell per beat, the result
    path carries them ``rows + cols`` cycles).

    ``valid``, ``last`` (final beat of its command), ``fp32`` (a float matmul: FP32 PSUM
    words), ``ftz``, ``accumulate``, ``read`` (a READ beat) and ``addr``, the flat PSUM
    address ``bank * entries + entry`` (``range(psum_depth)``); with ``mx`` (a tile with
    the MX datapath) ``bf16`` (the word written is rounded to BF16), ``stochastic`` (by
    the column's XORWOW bits), ``first`` (the command's first column: the generators start
    from ``seed``) and ``seed`` (``SEED_WIDTH`` bits).
    """
    return data.StructLayout({"valid": 1, "last": 1, "fp32": 1, "ftz": 1, "accumulate": 1,
                              "read": 1, "addr": range(psum_depth),
                              **(MX_TOKEN if mx else {})})


#: The fields an MX tile's tokens add (:func:`token_layout`).
MX_TOKEN = {"bf16": 1, "stochastic": 1, "first": 1, "seed": SEED_WIDTH}
