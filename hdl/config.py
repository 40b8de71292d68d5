"""One tile configuration: its size, the operand types its datapath is generated for, its
PSUM and its command queue, validated once (:class:`TileConfig`).

Pure Python (the standard library only), so that every layer may import it: the HDL builds
the tile from it, the builder names its build folder from it, the testbench and the golden
model check commands against its type set (the golden model takes that as plain arguments:
:attr:`TileConfig.dtypes` and :attr:`TileConfig.double_row`), and every entry point (the run
API, ``systolica sim``, bench, fuzz, waves, regress) takes one.

Type sets
---------
A type set is one or more of these names, joined with ``+`` or ``,`` (the CLI's ``--types``,
make's ``TYPES=``):

================== ===========================================================================
``int8``           INT8 x INT8 -> INT32
``bf16``           BF16 (with any other float type of the set as the other operand)
``fp16``           FP16
``fp8``            the FP8 family the golden model knows: e4m3, e5m2, e3m4, e4m3fn
``fp8-double-row`` FP8 double-row matmuls (e4m3 / e5m2, K up to ``2 * rows``); implies ``fp8``
``fp32``           TF32 and FP32 (with each other only): 32-bit operand lanes and a four-pass
                   FP32 multiplier in every PE (``docs/numerics.md``, FP32 and TF32)
``mx``             NeuronCore-v4's MX matmuls (MXFP8 and MXFP4 x4 words with E8M0 block
                   scales, ``Command.mx``): 32-bit operand lanes with an 8-bit scale each,
                   four FP8 multipliers and their adder tree in every PE
                   (``docs/numerics.md``, MX formats); implies ``fp8``
``all``            every one of the above except ``fp32`` and ``mx`` (the default): the 8- and
                   16-bit types on 16-bit lanes
================== ===========================================================================

``fp32`` and ``mx`` are never implied: each widens every operand lane and register (``mx``
also adds the scale lanes and about 1.2 PEs' worth of cells to each PE), so a tile generated
without them keeps its size and speed.

The operand type names inside a set (:attr:`TileConfig.dtypes`) are the golden model's
short names (``systolica.golden.formats.FORMATS``: ``int8``, ``bf16``, ``fp16``, ``e4m3``,
``e5m2``, ``e3m4``, ``e4m3fn``, ``tf32``, ``fp32``), the same as the CLI's ``--dtypes``.
"""

import hashlib
from dataclasses import dataclass

__all__ = ["DOUBLE_ROW", "MX", "TYPE_SETS", "TYPE_SET_SEPARATOR", "WIDE", "TileConfig",
           "parse_types", "type_sets"]

#: The type-set names and the operand types (golden short names) each adds, in the order a
#: set's name lists them.
TYPE_SETS = {
    "int8": ("int8",),
    "bf16": ("bf16",),
    "fp16": ("fp16",),
    "fp8": ("e4m3", "e5m2", "e3m4", "e4m3fn"),
    "fp8-double-row": (),
    "fp32": ("tf32", "fp32"),
    "mx": (),
}
#: The type-set name of the 32-bit types (not in ``all``: it widens every operand lane).
WIDE = "fp32"
#: The type-set name of the MX datapath (not in ``all``: it widens every operand lane).
MX = "mx"
#: The type-set name of the FP8 double-row mode.
DOUBLE_ROW = "fp8-double-row"
#: Every operand type the tile's command word carries, in code order (the golden model's
#: ``DTYPES``; ``tests/unit/test_hdl_golden_constants.py`` checks they are equal).
ALL_DTYPES = ("int8", "bf16", "fp16", "e4m3", "e5m2", "e3m4", "e4m3fn", "tf32", "fp32")
#: Operand types of a double-row matmul (golden: ``formats.DOUBLE_ROW_TYPES``).
DOUBLE_ROW_DTYPES = ("e4m3", "e5m2")
#: PSUM banks and entries per bank of the NeuronCore (the defaults; ``hdl.layouts``).
_PSUM_BANKS, _PSUM_ENTRIES = 8, 512
#: Bits of the command's bank field and of its size fields (``hdl.layouts``).
_BANK_WIDTH, _SIZE_WIDTH = 8, 16
#: Default command-queue depth (``hdl.command_queue.COMMAND_QUEUE_DEPTH``).
_QUEUE_DEPTH = 3
_ALLOWED = ", ".join([*TYPE_SETS, "all"])
#: Separator of several type sets in one ``--types`` (``+`` and ``,`` join the names of one
#: set): the fuzzer and ``systolica bench`` take every set in turn.
TYPE_SET_SEPARATOR = "/"


def parse_types(types):
    """The canonical tuple of type-set names of ``types`` (in :data:`TYPE_SETS` order,
    ``fp8`` added when ``fp8-double-row`` is there).

    ``types``: a str (names joined with ``+`` or ``,``; ``all``) or an iterable of names.

    Raises
    ------
    ValueError
        If it is empty or names something not in :data:`TYPE_SETS` or ``all``.
    """
    if isinstance(types, str):
        names = [part.strip() for part in types.replace(",", "+").split("+")]
    else:
        try:
            names = [str(part).strip() for part in types]
        except TypeError:
            raise ValueError(f"types must be type-set names ({_ALLOWED}), not "
                             f"{types!r}") from None
    names = [name.lower() for name in names if name]
    if not names:
        raise ValueError(f"types must name at least one type set ({_ALLOWED}), not "
                         f"{types!r}")
    chosen = set()
    for name in names:
        if name == "all":
            chosen.update(set(TYPE_SETS) - {WIDE, MX})
        elif name in TYPE_SETS:
            chosen.add(name)
        else:
            raise ValueError(f"unknown type set {name!r}; allowed: {_ALLOWED} (joined with "
                             f"'+' or ',')")
    if DOUBLE_ROW in chosen or MX in chosen:
        chosen.add("fp8")
    return tuple(name for name in TYPE_SETS if name in chosen)


def type_sets(types):
    """The type sets of ``types`` as a tuple of str: ``types`` is one type set (a str, names
    joined with ``+`` or ``,``, see :func:`~systolica.hdl.config.parse_types`), several
    separated by :data:`TYPE_SET_SEPARATOR` (``"int8/bf16+fp16/all"``), or a sequence of
    them.

    Raises
    ------
    ValueError
        If ``types`` holds no type set (an empty part between separators included).
    """
    if isinstance(types, str) and not types.strip():
        parse_types(types)          # no type set at all: the one message every command gives
    parts = types.split(TYPE_SET_SEPARATOR) if isinstance(types, str) else list(types)
    if not parts or any(not str(part).strip() for part in parts):
        raise ValueError(f"types must be type sets separated by {TYPE_SET_SEPARATOR!r}, "
                         f"none of them empty, not {types!r}")
    return tuple(str(part).strip() for part in parts)


def _check_int(name, value, low, high=None):
    if isinstance(value, bool) or not hasattr(value, "__index__") or value < low or (
            high is not None and value > high):
        allowed = f"an integer in {low}..{high}" if high is not None else (
            "a positive integer" if low == 1 else f"an integer of at least {low}")
        raise ValueError(f"{name} must be {allowed}, not {value!r}")
    return int(value)


#: Largest ``rows`` and ``cols`` (int): a command's K and M fields are ``SIZE_WIDTH`` (16)
#: bits, and a double-row matmul's K is up to twice ``rows``.
MAX_ROWS, MAX_COLS = ((1 << _SIZE_WIDTH) - 1) // 2, (1 << _SIZE_WIDTH) - 1


def _check_size(name, value, high, why):
    value = _check_int(name, value, 1)     # "a positive integer" for the common mistakes
    if value > high:
        raise ValueError(f"{name} must be at most {high} (a command's {_SIZE_WIDTH}-bit "
                         f"{why}), not {value}")
    return value


@dataclass(frozen=True)
class TileConfig:
    """An immutable, validated description of one tile.

    Parameters
    ----------
    rows : int
        Partition (contraction, K) dimension, 1..:data:`MAX_ROWS` (128 on the real engine).
    cols : int
        Stationary free size (M), 1..:data:`MAX_COLS` (128 on the real engine).
    types : str or iterable of str
        The type set the datapath is generated for (module docstring; default ``"all"``).
        Stored as the canonical tuple of set names (:func:`parse_types`).
    psum_banks : int
        PSUM banks, 1..256 (default 8, as on the real engine).
    psum_entries : int
        PSUM entries per bank, the largest N of one matmul, 1..65535 (default 512).
    queue_depth : int
        Commands the tile holds accepted and not started, >= 1 (default 3).

    Raises
    ------
    ValueError
        One line naming the bad value and what is allowed. This is the only place a tile's
        size is validated: every entry point builds a TileConfig before anything else.
    """

    rows: int
    cols: int
    types: tuple = ("all",)
    psum_banks: int = _PSUM_BANKS
    psum_entries: int = _PSUM_ENTRIES
    queue_depth: int = _QUEUE_DEPTH

    def __post_init__(self):
        checked = {
            "rows": _check_size("rows", self.rows, MAX_ROWS, "K field holds K up to "
                                "2 x rows in FP8 double-row"),
            "cols": _check_size("cols", self.cols, MAX_COLS, "M field holds M up to cols"),
            "types": parse_types(self.types),
            "psum_banks": _check_int("psum_banks", self.psum_banks, 1, 1 << _BANK_WIDTH),
            "psum_entries": _check_int("psum_entries", self.psum_entries, 1,
                                       (1 << _SIZE_WIDTH) - 1),
            "queue_depth": _check_int("queue_depth", self.queue_depth, 1),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @classmethod
    def for_dtypes(cls, rows, cols, dtypes, *, double_row=False, mx=False, **options):
        """The smallest configuration that runs matmuls of the operand types ``dtypes``
        (golden short names, e.g. ``("bf16", "int8")``), with FP8 double-row and the MX
        datapath if asked.

        Raises
        ------
        ValueError
            For a name that is not an operand type of the command word, or a bad size.
        """
        names = set()
        for dtype in dtypes:
            found = [name for name, members in TYPE_SETS.items() if dtype in members]
            if not found:
                raise ValueError(f"the RTL tile has no datapath for operand type {dtype!r}; "
                                 f"allowed on the tile: {', '.join(ALL_DTYPES)}")
            names.update(found)
        if double_row:
            names.add(DOUBLE_ROW)
        return cls(rows, cols, (tuple(names) or ("int8",)) + ((MX,) if mx else ()), **options)

    @property
    def dtypes(self):
        """Operand types the tile takes (tuple of golden short names, in code order)."""
        members = {dtype for name in self.types for dtype in TYPE_SETS[name]}
        return tuple(dtype for dtype in ALL_DTYPES if dtype in members)

    @property
    def double_row(self):
        """Whether the FP8 double-row datapath is generated (bool)."""
        return DOUBLE_ROW in self.types

    @property
    def wide(self):
        """Whether the TF32 / FP32 datapath is generated, with 32-bit operand lanes (bool)."""
        return WIDE in self.types

    @property
    def mx(self):
        """Whether the MX datapath is generated: x4 words with E8M0 scales on 32-bit lanes
        (bool)."""
        return MX in self.types

    @property
    def operand_width(self):
        """Bits of one operand lane (int): 32 with the ``fp32`` or ``mx`` type set, else
        16."""
        return 32 if self.wide or self.mx else 16

    @property
    def types_name(self):
        """The type set as users type it (str): ``"all"``, or names joined with ``+``
        (``fp8`` left out when ``fp8-double-row`` implies it): ``"int8+bf16"``."""
        narrow = tuple(name for name in self.types if name not in (WIDE, MX))
        if narrow == parse_types("all"):
            return "+".join(("all", *(name for name in (WIDE, MX) if name in self.types)))
        shown = [name for name in self.types
                 if not (name == "fp8" and (self.double_row or self.mx))]
        return "+".join(shown)

    @property
    def label(self):
        """Human-readable name (str): ``"<rows>x<cols>-<types>"``, with the PSUM and queue
        geometry added when they are not the defaults (``"8x8-int8+bf16"``)."""
        text = f"{self.rows}x{self.cols}-{self.types_name}"
        if (self.psum_banks, self.psum_entries) != (_PSUM_BANKS, _PSUM_ENTRIES):
            text += f"-psum{self.psum_banks}x{self.psum_entries}"
        if self.queue_depth != _QUEUE_DEPTH:
            text += f"-q{self.queue_depth}"
        return text

    def folder_name(self, verilog, options, tag=""):
        """Name of the build folder of this configuration (str): :attr:`label`, then a hash
        of the generated ``verilog`` (str or bytes) and of the build ``options`` (a dict of
        str to str, int or bool: simulator, waves, harness, ...), so an HDL edit that leaves
        the Verilog as it was (a docstring) rebuilds nothing and two configurations or
        option sets never share a folder. ``tag`` (str, optional), a readable summary of the
        options (``"verilator-waves"``), goes between the label and the hash. Nothing parses
        the name back."""
        digest = hashlib.sha256(verilog.encode() if isinstance(verilog, str) else verilog)
        digest.update(repr(sorted(options.items())).encode())
        return "-".join(part for part in (self.label, tag, digest.hexdigest()[:12]) if part)

    def describe(self):
        """One line for logs and reports (str): ``"8 x 8 tile, types int8+bf16"``."""
        return f"{self.rows} x {self.cols} tile, types {self.types_name}"
