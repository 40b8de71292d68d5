"""The tile's commands and the checks that accept or reject them (reference for the RTL).

A program is a sequence of :class:`Command`: ``matmul`` (LoadStationary of ``K`` rows, then
MultiplyMoving of ``N`` columns into PSUM entries ``offset .. offset + N - 1`` of ``bank``)
or ``read`` (stream those PSUM entries out). :func:`command_error` is the rule the RTL's
command check implements (``systolica.hdl.tile``), in the same order, with the same names
as its ``ErrorCode``.

PSUM geometry defaults follow the NeuronCore: 8 banks of 512 FP32 entries per partition
(2 KiB per bank; AWS Neuron documentation, NKI programming model, "Memory hierarchy",
PSUM).
"""

import copy
from dataclasses import dataclass

import numpy as np

from .formats import (
    DOUBLE_ROW_TYPES,
    FORMATS,
    WIDE_FORMATS,
    check_k,
    check_perf_mode,
    format_of,
    max_k,
    operand_formats,
    pair_problem,
)
from .tiles import TILE_ERRORS, tile_error


def check_positive(name, value):
    """The positive-size rule of every public entry point: ``value`` must be an integer
    (Python or numpy, not bool) of at least 1. Returns it as an int.

    Raises
    ------
    ValueError
        ``"<name> must be a positive integer, not <value>"`` otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


def check_bool(name, value):
    """The flag rule of every public entry point (``ftz``, ``accumulate``): ``value`` must
    be a bool (Python or numpy). Returns it as a bool.

    Raises
    ------
    TypeError
        ``"<name> must be a bool, not <type>"`` otherwise.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return bool(value)


#: PSUM banks per partition on the NeuronCore, and the tile's default.
PSUM_BANKS = 8
#: PSUM entries (FP32 words) per bank on the NeuronCore, and the tile's default.
PSUM_ENTRIES = 512
#: Bits of the command word's ``bank`` field, and of each of its ``offset``, ``k``, ``m`` and
#: ``n`` fields (the RTL's command layout, ``systolica.hdl.layouts.command_layout``: golden
#: does not import it, ``tests/unit/test_hdl_golden_constants.py`` checks they are equal).
BANK_WIDTH, SIZE_WIDTH = 8, 16
#: The command word's numeric fields and their widths in bits: a field holds 0..2**width - 1.
FIELD_WIDTHS = {"bank": BANK_WIDTH, "offset": SIZE_WIDTH, "k": SIZE_WIDTH, "m": SIZE_WIDTH,
                "n": SIZE_WIDTH}
#: Command opcodes.
OPS = ("matmul", "read")
#: Operand data types of a matmul command (short names of :data:`~.formats.FORMATS` and
#: :data:`~.formats.WIDE_FORMATS`, in code order).
DTYPES = tuple(FORMATS) + tuple(WIDE_FORMATS)
#: Rejection reasons, in the order they are checked (``status.error`` names in the RTL).
ERRORS = ("BANK_RANGE", "K_RANGE", "M_RANGE", "N_RANGE", "DOUBLE_ROW_TYPE", "TYPE_NOT_BUILT",
          "TRANSPOSE_DOUBLE_ROW", "TRANSPOSE_ACCUMULATE", "TRANSPOSE_FTZ") + TILE_ERRORS + (
          "MX_TYPE", "MX_K", "MX_MODE", "MX_TILE", "DST_MODE")
#: Element types of an MX matmul (``Command.mx``; NKI's ``float8_e4m3fn_x4`` and
#: ``float8_e5m2_x4``): OCP FP8 only, legacy e4m3 does not mix (``docs/numerics.md``, MX
#: formats). MXFP4 (``float4_e2m1fn_x4``) is a side with ``fp4`` set and type ``e4m3fn``, the
#: type its elements are converted to in front of the array.
MX_DTYPES = ("e4m3fn", "e5m2")
#: Partition rows per E8M0 scale group (8 partitions x 4 packed elements = 32 elements): an MX
#: matmul's K is a multiple of it (``golden.mx.GROUP_PARTITIONS``).
MX_GROUP_ROWS = 8
#: PSUM element types a matmul writes (``Command.dst_dtype``) and their rounding modes.
DST_DTYPES = ("fp32", "bf16")
ROUNDINGS = ("rne", "stochastic")
#: Bits of the command word's stochastic-rounding seed (``Command.seed``).
SEED_WIDTH = 32


@dataclass(frozen=True)
class Command:
    """One tile command.

    Attributes
    ----------
    op : str
        ``"matmul"`` or ``"read"``.
    k, m : int
        Stationary partition rows (1..rows) and free size (1..cols); unused by ``read``.
    n : int
        Moving columns of a matmul, or PSUM entries a read sends (1..entries - offset).
    bank, offset : int
        PSUM region: first entry ``offset`` of bank ``bank``.
    dtype : str
        The stationary operand's type, a short name of :data:`DTYPES`
        (``"int8"``, ``"bf16"``, ``"fp16"``, ``"e4m3"``, ``"e5m2"``, ``"e3m4"``,
        ``"e4m3fn"``, ``"tf32"``, ``"fp32"``; matmul only).
    moving_dtype : str or None
        The moving operand's type; ``None`` (default) means the same as ``dtype``.
    perf_mode : None or "double_row"
        FP8 double-row: partition row r holds k = r and k = r + rows (K up to 2 x rows).
        Both operands must be e4m3 or e5m2; a command with another pair can be made (the
        tile rejects it: :func:`command_error` gives ``"DOUBLE_ROW_TYPE"``), while
        :func:`~.formats.operand_formats`, which the run API calls, refuses it.
    ftz : bool
        Flush subnormals to zero (float matmuls only).
    accumulate : bool
        Add into PSUM instead of overwriting (matmul only).
    is_transpose : bool
        Transpose mode (matmul only; NKI's ``is_transpose``): the moving columns each select
        one partition row (a 1 there, zeros elsewhere) and PSUM entry ``offset + n`` gets
        that row of the stationary, bits unchanged, in the low 16 bits of each word
        (:attr:`~.formats.OperandFormat.transpose_dtype`, upper bits zero). It takes no
        ``perf_mode``, ``accumulate`` or ``ftz`` (:func:`~.formats.check_transpose`); a
        command with one can be made, and the tile rejects it (:func:`command_error`).
    tile_position, tile_size : (int, int) or None
        The matmul's tile (NKI's ``tile_position`` / ``tile_size``: start row and column,
        rows and columns), both None (default) for the whole array; each number is a
        ``SIZE_WIDTH``-bit field of the command word. A tile the array does not allow can be
        made, and the tile rejects it (``TILE_*``, :func:`~.tiles.tile_error`); giving only
        one of the pair is a ``ValueError``. Unused by ``read``.
    mx : bool
        An MX matmul (NKI's ``nc_matmul_mx``, NeuronCore-v4): each operand lane is an x4
        word of four elements of ``dtype`` / ``moving_dtype`` (:data:`MX_DTYPES`) with an
        E8M0 scale per group of :data:`MX_GROUP_ROWS` partitions, K counts partition rows
        (a contraction of 4 K) and must be a multiple of :data:`MX_GROUP_ROWS`. It takes no
        ``perf_mode``, ``is_transpose``, ``ftz`` or column tile; the tile rejects a command
        that breaks these (``MX_*``).
    fp4 : (bool, bool)
        MXFP4 on the stationary / moving side (``mx`` only; that side's type ``e4m3fn``, to
        which its e2m1 elements convert exactly).
    dst_dtype : str
        PSUM element type, ``"fp32"`` (default) or ``"bf16"`` (``mx`` only: rounded from FP32
        immediately before the PSUM write).
    rounding : str
        ``"rne"`` (default) or ``"stochastic"`` (``dst_dtype="bf16"`` only).
    seed : int
        The stochastic rounding's seed (``SEED_WIDTH`` bits; ``golden.xorwow_bits``).
    """

    op: str = "matmul"
    k: int = 1
    m: int = 1
    n: int = 1
    bank: int = 0
    offset: int = 0
    dtype: str = "int8"
    ftz: bool = False
    accumulate: bool = False
    moving_dtype: str | None = None
    perf_mode: str | None = None
    is_transpose: bool = False
    tile_position: tuple | None = None
    tile_size: tuple | None = None
    mx: bool = False
    fp4: tuple = (False, False)
    dst_dtype: str = "fp32"
    rounding: str = "rne"
    seed: int = 0

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)}, not {self.op!r}")
        for name, width in FIELD_WIDTHS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not (
                    0 <= value < 1 << width):
                raise ValueError(f"{name} must be an integer in 0..{(1 << width) - 1} "
                                 f"({width}-bit field), not {value!r}")
        for name in ("dtype", "moving_dtype"):
            value = getattr(self, name)
            if value not in DTYPES and (name == "dtype" or value is not None):
                raise ValueError(f"{name} must be one of {', '.join(DTYPES)}, not {value!r}")
        check_perf_mode(self.perf_mode)
        if self.op == "matmul":     # the double-row pair is command_error's to judge
            operand_formats(format_of(self.dtype).dtype, format_of(self.mtype).dtype)
        for name in ("ftz", "accumulate", "is_transpose", "mx"):
            check_bool(name, getattr(self, name))
        if not (isinstance(self.fp4, tuple) and len(self.fp4) == 2
                and all(isinstance(v, (bool, np.bool_)) for v in self.fp4)):
            raise ValueError(f"fp4 must be a pair of bools (stationary, moving), not "
                             f"{self.fp4!r}")
        for name, allowed in (("dst_dtype", DST_DTYPES), ("rounding", ROUNDINGS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, not "
                                 f"{getattr(self, name)!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not (
                0 <= self.seed < 1 << SEED_WIDTH):
            raise ValueError(f"seed must be an integer in 0..{(1 << SEED_WIDTH) - 1} "
                             f"({SEED_WIDTH}-bit field), not {self.seed!r}")
        if (self.tile_position is None) != (self.tile_size is None):
            raise ValueError("tile_position and tile_size must be given together (leave both "
                             "out for the whole array)")
        for name in ("tile_position", "tile_size"):
            value = getattr(self, name)
            if value is not None and not (
                    isinstance(value, tuple) and len(value) == 2 and all(
                        isinstance(v, int) and not isinstance(v, bool)
                        and 0 <= v < 1 << SIZE_WIDTH for v in value)):
                raise ValueError(f"{name} must be None or a pair (row, column) of integers in "
                                 f"0..{(1 << SIZE_WIDTH) - 1} ({SIZE_WIDTH}-bit fields), "
                                 f"not {value!r}")


    @property
    def mtype(self):
        """The moving operand's type (``moving_dtype``, or ``dtype`` when that is None)."""
        return self.dtype if self.moving_dtype is None else self.moving_dtype

    @property
    def double_row(self):
        """Whether this is an FP8 double-row matmul (bool)."""
        return self.perf_mode is not None

    def load_beats(self, rows):
        """LoadStationary beats of this matmul on a tile of ``rows`` partition rows: ``k``, or
        ``min(k, rows)`` in double-row mode (each beat carries rows r and r + rows), with
        the row tile's rows instead of ``rows`` when the matmul has a tile."""
        if self.tile_size is not None:
            rows = self.tile_size[0]
        return min(self.k, rows) if self.double_row else self.k

    @property
    def first_row(self):
        """The first PE row of the matmul's tile (0 for the whole array, and for a READ)."""
        return self.tile_position[0] if self.op == "matmul" and self.tile_position else 0


def region_limit(bank, *, banks=PSUM_BANKS, entries=PSUM_ENTRIES, across=False):
    """How far a PSUM region that starts in ``bank`` may reach, in entries from the bank's
    first: the bank's own ``entries``, or with ``across`` (a tile generated with the ``mx``
    type set, NeuronCore-v4) to the end of PSUM, ``(banks - bank) x entries``: NeuronCore-v4
    streams up to 4,096 FP32 moving columns, the 8 banks, into one matmul (AWS NKI API
    reference, ``nki.isa.nc_matmul``, "Tile size"; ``docs/numerics.md``, MX choice 8). The
    one rule of :func:`check_region` and the ``N_RANGE`` check of :func:`command_error`."""
    return (banks - bank) * entries if across else entries


def check_region(what, bank, offset, n, *, banks=PSUM_BANKS, entries=PSUM_ENTRIES,
                 across=False):
    """The PSUM region rule with a user-facing message (the tile's codes for it are
    ``BANK_RANGE`` and ``N_RANGE``, :func:`command_error`): ``bank`` in ``0..banks-1``,
    ``offset`` >= 0 and ``offset + n`` at most :func:`region_limit` (the bank's
    ``entries``; with ``across``, the end of PSUM). ``what`` names the access in the message
    ("the matmul writes", "the READ reads").

    Raises
    ------
    ValueError
        Naming the value and the allowed range.
    """
    for name, value in (("bank", bank), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    if bank >= banks:
        raise ValueError(f"bank must be between 0 and {banks - 1} (the tile has {banks} PSUM "
                         f"banks), not {bank}")
    limit = region_limit(bank, banks=banks, entries=entries, across=across)
    if offset + n <= limit:
        return
    if across:
        raise ValueError(f"{what} PSUM entries {offset}..{offset + n - 1} from the start of "
                         f"bank {bank}, past the end of PSUM ({banks} banks of {entries}: "
                         f"offset + n must be at most {limit})")
    raise ValueError(f"{what} PSUM entries {offset}..{offset + n - 1}, past the end of the "
                     f"{entries}-entry bank (offset + n must be at most {entries}; a tile "
                     f"generated with 'mx' lets a region continue into the next banks)")


def check_fits(k, m, n, *, rows, cols, entries=PSUM_ENTRIES, perf_mode=None):
    """The one-matmul size rule with a user-facing message (the tile's codes are
    ``K_RANGE``, ``M_RANGE``, ``N_RANGE``): K by :func:`~systolica.golden.check_k`,
    ``1 <= M <= cols`` and ``1 <= N <= entries`` (a tile whose regions cross banks passes
    its whole PSUM, ``banks x entries``).

    Raises
    ------
    ValueError
        Naming the size and its allowed range.
    """
    check_k(k, rows, perf_mode)
    if not 1 <= m <= cols:
        raise ValueError(f"M = {m} must be between 1 and cols = {cols}")
    if not 1 <= n <= entries:
        raise ValueError(f"N (moving columns) must be between 1 and {entries} (the PSUM "
                         f"entries one matmul may write), not {n} (split larger N into "
                         f"several matmuls)")


def command_error(command, *, rows, cols, banks=PSUM_BANKS, entries=PSUM_ENTRIES,
                  dtypes=DTYPES, double_row=True, mx=False):
    """Why a ``rows x cols`` tile with ``banks x entries`` PSUM, generated for the operand
    types ``dtypes`` (short names; default every one), with the FP8 double-row datapath or
    not (``double_row``) and with the MX datapath or not (``mx``), rejects ``command``, or
    None. (The tile's type set is its ``TileConfig``'s ``dtypes``, ``double_row`` and
    ``mx``; golden takes them as plain values.)

    Checked in order: ``"BANK_RANGE"`` (bank >= banks), ``"K_RANGE"`` (matmul with K = 0 or
    K > rows; K > 2 x rows in double-row mode), ``"M_RANGE"`` (matmul with M = 0 or
    M > cols), ``"N_RANGE"`` (N = 0 or offset + N > entries: the region leaves its bank;
    on a tile with ``mx``, past the end of PSUM: :func:`region_limit`),
    ``"DOUBLE_ROW_TYPE"`` (double-row matmul whose operands are not both
    :data:`~.formats.DOUBLE_ROW_TYPES`), ``"TYPE_NOT_BUILT"`` (matmul with an operand type
    not in ``dtypes``, double-row on a tile without ``double_row``, or an operand pair no
    tile takes: INT8 with a float type, TF32/FP32 with an 8/16-bit type, a command word
    only :func:`unpaired_command` makes; an MX matmul on a tile without ``mx``), then the
    transpose
    rule (:func:`~.formats.check_transpose`, same order): ``"TRANSPOSE_DOUBLE_ROW"``,
    ``"TRANSPOSE_ACCUMULATE"``, ``"TRANSPOSE_FTZ"`` (a transposing matmul with double-row,
    ``accumulate`` or ``ftz``), then the tiling rule (:func:`~.tiles.tile_error`, same
    order): ``"TILE_SIZE"``, ``"TILE_POSITION"``, ``"TILE_K_RANGE"``, ``"TILE_M_RANGE"``,
    ``"TILE_DOUBLE_ROW"``, then the MX rules (an MX matmul on a tile without ``mx`` is
    ``"TYPE_NOT_BUILT"`` above): ``"MX_TYPE"`` (an MX operand type not in
    :data:`MX_DTYPES`, an ``fp4`` side whose type is not ``e4m3fn``, or ``fp4`` on a matmul
    that is not MX), ``"MX_K"`` (an MX K not a multiple of :data:`MX_GROUP_ROWS`),
    ``"MX_MODE"`` (MX with double-row, transpose or ``ftz``), ``"MX_TILE"`` (MX in a column
    tile: row tiles only), ``"DST_MODE"`` (a BF16 destination on a matmul that is not MX,
    or stochastic rounding without one). Tiles that overlap a matmul in flight are not an
    error (the later matmul waits: ``docs/numerics.md``, tiles choice 10).

    Returns
    -------
    str or None
    """
    matmul = command.op == "matmul"
    if command.bank >= banks:
        return "BANK_RANGE"
    if matmul and not 1 <= command.k <= max_k(rows, command.perf_mode):
        return "K_RANGE"
    if matmul and not 1 <= command.m <= cols:
        return "M_RANGE"
    if command.n < 1 or command.offset + command.n > region_limit(
            command.bank, banks=banks, entries=entries, across=mx):
        return "N_RANGE"
    if matmul and command.double_row and not {command.dtype, command.mtype} <= set(
            DOUBLE_ROW_TYPES):
        return "DOUBLE_ROW_TYPE"
    if matmul and (not {command.dtype, command.mtype} <= set(dtypes) or (
            command.double_row and not double_row) or not _pairs(command)
            or (command.mx and not mx)):
        return "TYPE_NOT_BUILT"
    if matmul and command.is_transpose:
        for code, mode in (("TRANSPOSE_DOUBLE_ROW", command.double_row),
                           ("TRANSPOSE_ACCUMULATE", command.accumulate),
                           ("TRANSPOSE_FTZ", command.ftz)):
            if mode:
                return code
    if not matmul:
        return None
    return (tile_error(command.tile_position, command.tile_size, command.k, command.m,
                       rows=rows, cols=cols, perf_mode=command.perf_mode)
            or mx_error(command, cols))


def mx_error(command, cols):
    """The MX and destination rules of :func:`command_error` for a matmul ``command`` on a
    tile of ``cols`` columns (the codes after the tiling rule), or None."""
    types = (command.dtype, command.mtype)
    if (command.mx and not set(types) <= set(MX_DTYPES)) or any(
            fp4 and (not command.mx or t != "e4m3fn")
            for fp4, t in zip(command.fp4, types, strict=True)):
        return "MX_TYPE"
    if command.mx and command.k % MX_GROUP_ROWS:
        return "MX_K"
    if command.mx and (command.double_row or command.is_transpose or command.ftz):
        return "MX_MODE"
    if command.mx and command.tile_size is not None and command.tile_size[1] != cols:
        return "MX_TILE"
    if (command.dst_dtype == "bf16" and not command.mx) or (
            command.rounding == "stochastic" and command.dst_dtype != "bf16"):
        return "DST_MODE"
    return None


def _pairs(command):
    """Whether a matmul's operand types pair (:func:`~.formats.pair_problem`)."""
    return pair_problem(format_of(command.dtype), format_of(command.mtype)) is None


def unpaired_command(command, moving_dtype):
    """A copy of matmul ``command`` whose moving operand type is ``moving_dtype`` (a short
    name of :data:`DTYPES`), even for a pair no tile takes (INT8 with a float type, TF32 or
    FP32 with an 8/16-bit type), which :class:`Command` itself refuses to build: the command
    word a host can still send, and that every tile rejects with ``"TYPE_NOT_BUILT"``
    (:func:`command_error`). The fuzzer sends such words as illegal commands.

    Raises
    ------
    ValueError
        If ``command`` is not a matmul or ``moving_dtype`` names no operand type.
    """
    if command.op != "matmul":
        raise ValueError(f"only a matmul has a moving operand type, not a {command.op!r}")
    if moving_dtype not in DTYPES:
        raise ValueError(f"moving_dtype must be one of {', '.join(DTYPES)}, not "
                         f"{moving_dtype!r}")
    out = copy.copy(command)
    object.__setattr__(out, "moving_dtype", moving_dtype)   # past the pair check, on purpose
    return out
