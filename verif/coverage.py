"""Functional coverage of the tile's stimulus and behaviour (``cocotb-coverage``).

:func:`sample_program` samples one checked fuzz program (:mod:`systolica.verif.fuzz`:
commands, golden results, stamps) into ``cocotb_coverage``'s coverage database, and
:func:`sample_dump` one cocotb regression test (the per-cycle TB's dump, written with
``$SYSTOLICA_COVERAGE`` set; ``--dumps DIR --tag NAME`` samples a folder of them):

- ``operand.type``: each operand type (TF32 and FP32 included) as stationary and as
  moving, a mixed 8/16-bit float pair, a TF32/FP32 mixed pair, FP8 double-row;
- ``operand.int8`` / ``operand.bf16``: each operand class of INT8 and BF16 matmuls;
  ``operand.tf32`` / ``operand.fp32``: each operand class (:data:`WIDE_CLASSES`, as the
  type reads the word) of matmuls with TF32 / FP32 operands;
- ``product``: each BF16 x BF16 product's class (exact normal, exact subnormal, rounded to a
  subnormal, underflow to zero, overflow); ``product.wide``: the same classes and a rounded
  normal of the products of matmuls with TF32 / FP32 operands (``docs/numerics.md``, FP32
  choice 1: rounded once; TF32 x TF32 is exact, an FP32 operand makes most products round);
- ``add``: each column-chain add's rounding outcome (exact, below half, tie to even down,
  tie to even up, above half), classified exactly;
- ``psum``: overwrite vs accumulate x the class of the stored PSUM word it meets;
- ``transpose``: a transpose of each operand type (its operands do not count above);
- ``error``: every command error code; ``unbuilt``: the TF32/FP32 commands rejected with
  ``TYPE_NOT_BUILT`` (on a tile without ``fp32``; paired with an 8/16-bit type);
- ``queue``: command-queue occupancy 0..3 when a command is taken (3: the command waited
  for a slot);
- ``stall``: the idle and backpressure levels; ``read``: READ bank x region (from entry 0,
  inside, up to the bank's end); ``crossing``: a READ and a matmul whose region runs into
  the next bank (a tile with ``mx``); ``tile``: square, wider or taller tiles; ``placement``:
  a legal matmul on the whole array, in a row tile, a column tile, or both;
  ``concurrent``: 1 to 4 matmuls in flight at once (tiles that share no PE row or column);
- ``mx``: MX matmuls run (:data:`MX_BINS`: element-type pairs, MXFP4 on each side, both
  destinations, stochastic rounding, accumulation, a row tile, the E8M0 codes 0, 254 and
  NaN).

:data:`REMOVED` lists the bins left out, each with the reason. ``python -m
systolica.verif.coverage`` (``make coverage``) runs a seeded fuzz sample with coverage
on (four programs of 400 commands, the fuzzer's default type sets: the fourth on a 4 x 4
tile generated with ``fp32``; then :data:`MX_COMMANDS` on a 16 x 4 ``int8+mx`` tile),
merges it with the databases earlier runs wrote
(``<build>/coverage/*.xml``, one per run: ``make test`` writes one), prints the summary
table, writes ``merged.xml`` and ``merged.yaml`` and exits 1 if a bin is not hit (closure).
"""

import argparse
import logging
import sys
from pathlib import Path

import numpy as np
from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_db, coverage_section

from systolica.golden.command import DTYPES, ERRORS, PSUM_BANKS, PSUM_ENTRIES
from systolica.golden.formats import WIDE_FORMATS, decode, format_of
from systolica.sim.options import OneLineParser, add_json_argument, integer, report_as_json
from systolica.verif.exhaustive import ROUNDING, classify_rounding

from . import fuzz

BF16_CLASSES = ("zero", "subnormal", "normal", "max finite", "inf", "nan")
INT8_CLASSES = ("zero", "-128", "127", "negative", "positive")
PRODUCT_CLASSES = ("exact normal", "exact subnormal", "rounded subnormal",
                   "underflow to zero", "overflow")
#: Classes of TF32 / FP32 products: an FP32 x FP32 product has up to 48 significant bits, so
#: it can also round inside the normal range.
WIDE_PRODUCT_CLASSES = ("exact normal", "rounded normal", "exact subnormal",
                        "rounded subnormal", "underflow to zero", "overflow")
STORED_CLASSES = ("fp32 zero", "fp32 subnormal", "fp32 normal", "fp32 inf", "fp32 nan",
                  "int32")
READ_REGIONS = ("from entry 0", "inside", "to the end")
TILE_SHAPES = ("square", "wider", "taller")

#: Classes of TF32 and FP32 operands: +0 and -0 apart, the largest finite magnitude apart
#: from the other normals, NaN (TF32: a payload in its upper 10 fraction bits; an FP32 NaN
#: whose payload lies only in the 13 bits TF32 ignores reads as Inf).
WIDE_CLASSES = ("+0", "-0", "subnormal", "normal", "max finite", "inf", "nan")
#: What an MX matmul the tile ran had: its element types, destination and E8M0 scales (the
#: extremes 0 and 254 and the NaN code 0xFF on either side).
MX_BINS = ("mxfp8 pair", "mixed mxfp8 pair", "mxfp4 stationary", "mxfp4 moving",
           "fp32 destination", "bf16 destination", "stochastic rounding", "accumulate",
           "row tile", "scale 0",
           "scale 254", "nan scale")
#: Why a TF32/FP32 command was TYPE_NOT_BUILT.
UNBUILT = ("tf32 on a tile without fp32", "fp32 on a tile without fp32",
           "32-bit with an 8/16-bit partner")

#: Operand-type bins: each type (golden's DTYPES) as stationary and as moving, a mixed pair of
#: 8/16-bit floats, a mixed TF32/FP32 pair, and FP8 double-row.
_TYPE_BINS = ([f"stationary {name}" for name in DTYPES] + [f"moving {name}" for name in DTYPES]
              + ["mixed float pair", "tf32/fp32 mixed pair", "double-row"])

#: Bins that are not in the model, and why (a reviewer's list).
REMOVED = {
    "product: rounded normal": "a BF16 x BF16 product has at most 16 significant bits, "
                               "exact in FP32's 24: only products leaving the normal range "
                               "round",
    "psum: overwrite x stored class": "an overwriting matmul never reads PSUM (the issue's "
                                      "cross is sampled for accumulate only; overwrite is one "
                                      "bin of its own)",
    "queue: occupancy 4+": "the queue holds 3 (golden.timing.COMMAND_QUEUE_DEPTH)",
}

#: The MX leg of ``make coverage``: commands and tile (16 rows: MX row tiles of 8).
MX_COMMANDS, MX_SIZE = 1200, (16, 4)

_P = "systolica."


def _point(name, bins):
    """A sampling function ``f(value)`` with one coverpoint ``systolica.<name>``."""
    return coverage_section(CoverPoint(_P + name, xf=lambda value: value,
                                       bins=list(bins)))(lambda value: None)


_type = _point("operand.type", _TYPE_BINS)
_int8_operand = _point("operand.int8", INT8_CLASSES)
_bf16_operand = _point("operand.bf16", BF16_CLASSES)
_wide_operand = {name: _point(f"operand.{name}", WIDE_CLASSES) for name in WIDE_FORMATS}
_unbuilt = _point("unbuilt", UNBUILT)
_product = _point("product", PRODUCT_CLASSES)
_wide_product = _point("product.wide", WIDE_PRODUCT_CLASSES)
_add = _point("add", ROUNDING)
_error = _point("error", ERRORS)
_transpose = _point("transpose", DTYPES)
_mx = _point("mx", MX_BINS)
_queue = _point("queue", range(4))
_tile = _point("tile", TILE_SHAPES)
#: Where a legal matmul runs (the command's tile_position / tile_size).
PLACEMENTS = ("whole array", "row tile", "column tile", "row and column tile")
_placement = _point("placement", PLACEMENTS)
#: Matmuls in flight in one cycle (issuing a column), 1 to 4 (tiles sharing no lane).
_concurrent = _point("concurrent", range(1, 5))


def placement(command, rows, cols):
    """The :data:`PLACEMENTS` bin of a matmul ``command`` on a ``rows x cols`` tile (str)."""
    size = command.tile_size or (rows, cols)
    return PLACEMENTS[(size[0] < rows) + 2 * (size[1] < cols)]


@coverage_section(
    CoverPoint(_P + "psum.mode", xf=lambda mode, stored: mode,
               bins=["overwrite", "accumulate"]),
    CoverPoint(_P + "psum.stored", xf=lambda mode, stored: stored, bins=list(STORED_CLASSES)),
)
def _psum(mode, stored):
    pass


@coverage_section(
    CoverPoint(_P + "stall.idle", xf=lambda idle, bp: idle, bins=[0.0, *fuzz.IDLE]),
    CoverPoint(_P + "stall.backpressure", xf=lambda idle, bp: bp,
               bins=list(fuzz.BACKPRESSURE)),
)
def _stall(idle, bp):
    pass


@coverage_section(
    CoverPoint(_P + "read.bank", xf=lambda bank, region: bank, bins=list(range(8))),
    CoverPoint(_P + "read.region", xf=lambda bank, region: region, bins=list(READ_REGIONS)),
    CoverCross(_P + "read.bank_x_region", items=[_P + "read.bank", _P + "read.region"]),
)
def _read(bank, region):
    pass


#: Commands whose PSUM region runs from its bank into the next (a tile with ``mx``,
#: NeuronCore-v4: :func:`~systolica.golden.region_limit`).
CROSSING_OPS = ("read", "matmul")


@coverage_section(
    CoverPoint(_P + "crossing", xf=lambda op: op, bins=list(CROSSING_OPS)),
)
def _crossing(op):
    pass


def bf16_classes(bits):
    """Class names (:data:`BF16_CLASSES`) present among BF16 bit patterns."""
    bits = np.asarray(bits, np.uint16) & 0x7FFF
    exp, frac = bits >> 7, bits & 0x7F
    masks = {"zero": bits == 0, "subnormal": (exp == 0) & (frac != 0),
             "normal": (exp > 0) & (exp < 255) & (bits != 0x7F7F), "max finite": bits == 0x7F7F,
             "inf": bits == 0x7F80, "nan": (exp == 255) & (frac != 0)}
    return [name for name, mask in masks.items() if mask.any()]


def wide_classes(bits, name):
    """Class names (:data:`WIDE_CLASSES`) present among 32-bit operand words ``bits`` of
    type ``name`` (``"tf32"``: the lower 13 bits ignored, as the tile reads them)."""
    bits = np.asarray(bits, np.uint32) & np.uint32(0xFFFFE000 if name == "tf32" else 0xFFFFFFFF)
    magnitude = bits & np.uint32(0x7FFFFFFF)
    exp, frac = magnitude >> 23, magnitude & np.uint32(0x7FFFFF)
    top = 0x7F7FE000 if name == "tf32" else 0x7F7FFFFF
    masks = {"+0": bits == 0, "-0": bits == 0x80000000, "subnormal": (exp == 0) & (frac != 0),
             "normal": (exp > 0) & (exp < 255) & (magnitude != top),
             "max finite": magnitude == top, "inf": magnitude == 0x7F800000,
             "nan": (exp == 255) & (frac != 0)}
    return [klass for klass, mask in masks.items() if mask.any()]


def mx_classes(command, stationary_scale, moving_scale):
    """The :data:`MX_BINS` of a legal MX matmul ``command`` with E8M0 scale codes
    ``stationary_scale`` and ``moving_scale`` (arrays of uint8; list of str)."""
    fp4 = command.fp4
    out = ["bf16 destination" if command.dst_dtype == "bf16" else "fp32 destination"]
    if command.rounding == "stochastic":
        out.append("stochastic rounding")
    if not any(fp4):
        out.append("mixed mxfp8 pair" if command.dtype != command.mtype else "mxfp8 pair")
    out += [name for name, side in (("mxfp4 stationary", fp4[0]), ("mxfp4 moving", fp4[1]))
            if side]
    if command.accumulate:
        out.append("accumulate")
    if command.tile_size is not None:
        out.append("row tile")
    codes = set(np.concatenate([np.ravel(stationary_scale), np.ravel(moving_scale)]).tolist())
    out += [name for name, code in (("scale 0", 0), ("scale 254", 254), ("nan scale", 255))
            if code in codes]
    return out


def unbuilt_class(command):
    """The :data:`UNBUILT` bin of a TYPE_NOT_BUILT ``command`` with a TF32/FP32 operand, or
    None (no 32-bit operand)."""
    wide = [name for name in (command.dtype, command.mtype) if name in WIDE_FORMATS]
    if not wide:
        return None
    if len(wide) == 1:
        return UNBUILT[2]
    return UNBUILT[0] if "fp32" not in wide else UNBUILT[1]


def int8_classes(values):
    values = np.asarray(values, np.int8)
    masks = {"zero": values == 0, "-128": values == -128, "127": values == 127,
             "negative": (values < 0) & (values > -128), "positive": (values > 0) & (values < 127)}
    return [name for name, mask in masks.items() if mask.any()]


def product_classes(a_bits, b_bits, ftz):
    """Class names (:data:`PRODUCT_CLASSES`) among the finite, non-zero BF16 products."""
    a = (np.asarray(a_bits, np.uint32) << 16).view(np.float32)
    b = (np.asarray(b_bits, np.uint32) << 16).view(np.float32)
    return _classes_of_products(a, b, ftz)


def wide_product_classes(a_bits, b_bits, a_name, b_name, ftz):
    """Class names (:data:`WIDE_PRODUCT_CLASSES`) among the finite, non-zero products of
    32-bit operand words ``a_bits`` and ``b_bits`` of types ``a_name`` / ``b_name``
    (``"tf32"``: the lower 13 bits ignored, as the tile reads them)."""
    def value(bits, name):      # golden's one decode rule (TF32: its 19 upper bits)
        return decode(np.asarray(bits, np.uint32).view(format_of(name).dtype))
    return _classes_of_products(value(a_bits, a_name), value(b_bits, b_name), ftz)


def _classes_of_products(a, b, ftz):
    """Classes of the products of the float32 arrays ``a`` and ``b``, each exact in float64
    (at most 48 significant bits) and rounded once to FP32 (RNE), with FTZ inputs flushed."""
    with np.errstate(all="ignore"):
        a, b = a.astype(np.float64), b.astype(np.float64)
        if ftz:
            a = np.where(np.abs(a) < 2.0 ** -126, 0.0, a)
            b = np.where(np.abs(b) < 2.0 ** -126, 0.0, b)
        exact = a * b
        rounded = exact.astype(np.float32).astype(np.float64)
    live = np.isfinite(exact) & (exact != 0)
    tiny = np.abs(exact) < 2.0 ** -126
    normal = live & ~tiny & np.isfinite(rounded)
    masks = {"exact normal": normal & (rounded == exact),
             "rounded normal": normal & (rounded != exact),
             "exact subnormal": live & tiny & (rounded == exact) & (rounded != 0),
             "rounded subnormal": live & tiny & (rounded != exact) & (rounded != 0),
             "underflow to zero": live & (rounded == 0),
             "overflow": live & ~np.isfinite(rounded)}
    return [name for name, mask in masks.items() if mask.any()]


def stored_class(bits, dtype):
    if dtype == "int8":
        return "int32"
    bits = int(bits) & 0x7FFFFFFF
    exp, frac = bits >> 23, bits & 0x7FFFFF
    if bits == 0:
        return "fp32 zero"
    if exp == 0:
        return "fp32 subnormal"
    if exp == 255:
        return "fp32 nan" if frac else "fp32 inf"
    return "fp32 normal"


def _sample_adds(stationary, moving):
    """Sample the rounding class of every chain add of a BF16 matmul (IEEE)."""
    from systolica.golden.bf16 import bf16_product, fp32_add, from_bf16_bits

    s, v = from_bf16_bits(stationary), from_bf16_bits(moving)
    acc = bf16_product(s[0][:, None], v[0][None, :])
    for k in range(1, s.shape[0]):
        p = bf16_product(s[k][:, None], v[k][None, :])
        klass = classify_rounding(acc.view(np.uint32).ravel(), p.view(np.uint32).ravel())
        for c in np.unique(klass[klass >= 0]):
            _add(ROUNDING[int(c)])
        acc = fp32_add(acc, p)


def sample_program(report, records, operands, predicted):
    """Sample one checked program: ``records`` (the model's), ``operands`` (per legal
    matmul's record index: its stationary and moving arrays), ``predicted`` (its stamps:
    objects with ``accept`` and ``issues``; None leaves the queue occupancy unsampled)."""
    rows, cols = report.rows, report.cols
    _tile("square" if rows == cols else "wider" if cols > rows else "taller")
    _stall(report.idle, report.backpressure)
    shadow = np.zeros(PSUM_BANKS * PSUM_ENTRIES, np.uint32)    # flat: bank x entries + entry
    shadow_dtype = np.full(PSUM_BANKS * PSUM_ENTRIES, "int8", object)
    for r in records:
        if r.error is not None:
            _error(r.error)
            if r.error == "TYPE_NOT_BUILT" and (reason := unbuilt_class(r.command)):
                _unbuilt(reason)
            continue
        start = r.bank * PSUM_ENTRIES + r.offset
        region = slice(start, start + r.n)
        if r.offset + r.n > PSUM_ENTRIES:
            _crossing(r.op)
        if r.op == "read":
            region_name = ("from entry 0" if r.offset == 0 else
                           "to the end" if r.offset + r.n == PSUM_ENTRIES else "inside")
            _read(r.bank, region_name)
            continue
        if r.accumulate:
            for klass in {stored_class(bits, dtype) for bits, dtype in
                          zip(shadow[region].tolist(), shadow_dtype[region], strict=True)}:
                _psum("accumulate", klass)
        else:
            _psum("overwrite", "fp32 zero")
        shadow[region] = np.asarray(r.expected, np.uint32)[0]
        shadow_dtype[region] = r.dtype
        stationary, moving = operands[r.index]
        command = r.command
        _placement(placement(command, rows, cols))
        if command.mx:              # operands are its scales: (stationary, moving)
            for name in mx_classes(command, *operands[r.index]):
                _mx(name)
            continue
        if command.is_transpose:    # bits moved, nothing multiplied or added
            _transpose(command.dtype)
            continue
        _type(f"stationary {command.dtype}")
        _type(f"moving {command.mtype}")
        if command.double_row:
            _type("double-row")
        elif command.dtype != command.mtype:
            _type("tf32/fp32 mixed pair" if command.dtype in WIDE_FORMATS else
                  "mixed float pair")
        for name, array in ((command.dtype, stationary), (command.mtype, moving)):
            if name in WIDE_FORMATS:
                for klass in wide_classes(array.view(np.uint32), name):
                    _wide_operand[name](klass)
        if command.dtype in WIDE_FORMATS:
            s_words, m_words = stationary.view(np.uint32), moving.view(np.uint32)
            k, m, n = s_words.shape[0], s_words.shape[1], m_words.shape[1]
            for klass in wide_product_classes(
                    np.broadcast_to(s_words[:, :, None], (k, m, n)).ravel(),
                    np.broadcast_to(m_words[:, None, :], (k, m, n)).ravel(),
                    command.dtype, command.mtype, r.ftz):
                _wide_product(klass)
        if r.dtype != "int8" and not (command.dtype == command.mtype == "bf16"):
            continue            # the operand, product and add classes are BF16's
        if r.dtype == "int8":
            for klass in int8_classes(np.concatenate([stationary.ravel(), moving.ravel()])):
                _int8_operand(klass)
            continue
        s_bits, m_bits = stationary.view(np.uint16), moving.view(np.uint16)
        for klass in bf16_classes(np.concatenate([s_bits.ravel(), m_bits.ravel()])):
            _bf16_operand(klass)
        k, m, n = s_bits.shape[0], s_bits.shape[1], m_bits.shape[1]
        a = np.broadcast_to(s_bits[:, :, None], (k, m, n)).ravel()
        b = np.broadcast_to(m_bits[:, None, :], (k, m, n)).ravel()
        for klass in product_classes(a, b, r.ftz):
            _product(klass)
        if not r.ftz and r.k > 1:
            _sample_adds(s_bits, m_bits)
    for n in queue_occupancy(records, predicted) if predicted is not None else ():
        _queue(n)
    for n in in_flight(records, predicted) if predicted is not None else ():
        _concurrent(n)


def in_flight(records, predicted):
    """The numbers of legal matmuls in flight together (between their first and last
    column's cycles) that the program reached, each once (sorted list of int)."""
    spans = sorted((p.issues[0], p.issues[-1]) for r, p in zip(records, predicted, strict=True)
                   if r.error is None and r.op == "matmul" and p.issues)
    out = set()
    for start, _ in spans:
        out.add(sum(1 for a, b in spans if a <= start <= b))
    return sorted(out)


def sample_dump(path):
    """Sample one regression test's dump (written by the per-cycle TB's ``check()`` with
    ``$SYSTOLICA_COVERAGE`` set: tile size, stall levels, checked records, operands).

    The command-queue occupancy needs each legal command's first issue cycle; the per-cycle
    TB stamps moving beats, not a READ's beats, so a test with a legal READ leaves the
    queue unsampled (the fuzzer's stamps come from the cycle model and cover it)."""
    import pickle
    from types import SimpleNamespace

    with open(path, "rb") as handle:
        dump = pickle.load(handle)
    records = dump["records"]
    report = SimpleNamespace(rows=dump["rows"], cols=dump["cols"], idle=dump["idle"],
                             backpressure=dump["backpressure"])
    stamped = all(r.error is not None or (r.op == "matmul" and r.accept is not None
                                          and len(r.issues)) for r in records)
    sample_program(report, records, dump["operands"], records if stamped else None)


def queue_occupancy(records, predicted):
    """Queue occupancy (0..3) in the cycle before each command was taken: legal commands
    taken earlier that had not left the queue (a command taken in cycle ``a`` is queued in
    cycles ``a + 1`` up to its first beat's cycle)."""
    pending = []                        # (accept, first issue) of legal commands
    out = set()
    for r, p in zip(records, predicted, strict=True):
        before = p.accept - 1
        pending = [(a, first) for a, first in pending if first >= before]
        out.add(sum(1 for a, first in pending if a < before <= first))
        if r.error is None:
            pending.append((p.accept, p.issues[0]))
    return sorted(out)


def _items():
    """The coverpoints and crosses of this module in the database, by name."""
    return {name: item for name, item in coverage_db.items()
            if name.startswith(_P) and isinstance(item, (CoverPoint, CoverCross))}


def bins_report():
    """``(hit, total, missing)``: bins hit and in all over every coverpoint and cross, and
    the names of the missing ones."""
    hit = total = 0
    missing = []
    for name, item in _items().items():
        for bin_, count in item.detailed_coverage.items():
            total += 1
            hit += count > 0
            if count == 0:
                missing.append(f"{name}: {bin_}")
    return hit, total, missing


def export(folder, tag):
    """Write the coverage database as ``<tag>.xml`` and ``<tag>.yaml`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    coverage_db.export_to_xml(filename=str(folder / f"{tag}.xml"))
    coverage_db.export_to_yaml(filename=str(folder / f"{tag}.yaml"))
    return folder / f"{tag}.xml"


def default_folder():
    """``coverage/`` in the default build folder (Path;
    :func:`~systolica.sim.builder.runner.build_folder`, which raises ValueError when it is
    unusable)."""
    from systolica.sim.builder.runner import build_folder

    return build_folder() / "coverage"


def _existing_folder(text):
    """argparse type: a folder that exists (str)."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing folder (the folder "
                                         f"of the regression's *.pkl dumps)")
    return text


def main(argv=None):
    parser = OneLineParser(prog="systolica coverage",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=integer(0), default=1,
                        help="seed of the fuzzed sample (default %(default)s)")
    parser.add_argument("--commands", type=integer(1), default=1600,
                        help="commands of the fuzzed sample (default %(default)s)")
    parser.add_argument("--dumps", default=None, type=_existing_folder,
                        help="sample the regression's dumps in this folder (*.pkl, written "
                             "by the per-cycle TB with $SYSTOLICA_COVERAGE) instead of "
                             "fuzzing, and write the database as <--tag>.xml")
    parser.add_argument("--tag", default="regression",
                        help="database name with --dumps (default %(default)s)")
    add_json_argument(parser, "the bins hit per coverpoint and the missing ones")
    args = parser.parse_args(argv)
    return report_as_json(args, lambda: _run(args))


def _run(args):
    folder = default_folder()
    if args.dumps:
        dumps = sorted(Path(args.dumps).glob("*.pkl"))
        for path in dumps:
            sample_dump(path)
        export(folder, args.tag)
        hit, total, _ = bins_report()
        print(f"regression dumps {len(dumps)}: bins hit {hit} of {total}; "
              f"{folder / args.tag}.xml")
        return (0 if dumps else 1), {"dumps": len(dumps), "hit": hit, "bins": total,
                                     "database": f"{folder / args.tag}.xml"}
    fuzz.fuzz(args.seed, args.commands, chunk=400, sizes=fuzz.SIZES, sample=sample_program)
    fuzz.fuzz(args.seed, MX_COMMANDS, chunk=400, sizes=(MX_SIZE,), types="int8+mx",
              sample=sample_program)
    own = export(folder, f"run-make-coverage-seed{args.seed}")
    files = sorted(str(p) for p in folder.glob("*.xml") if not p.name.startswith("merged"))
    merged = folder / "merged.xml"
    if len(files) > 1:
        from cocotb_coverage.coverage import merge_coverage

        merge_coverage(logging.getLogger("coverage").info, str(merged), *files)
    else:
        merged.write_text(own.read_text())
    coverage_db.export_to_yaml(filename=str(folder / "merged.yaml"))
    hit, total, missing = bins_report()
    print(f"{'coverpoint':<40}{'hit':>6}{'bins':>6}")
    points = {}
    for name, item in _items().items():
        counts = list(item.detailed_coverage.values())
        points[name] = {"hit": sum(c > 0 for c in counts), "bins": len(counts)}
        print(f"{name:<40}{points[name]['hit']:>6}{points[name]['bins']:>6}")
    print(f"bins hit {hit} of {total}; merged from {len(files)} databases: {merged}")
    for name, reason in REMOVED.items():
        print(f"removed: {name}: {reason}")
    for name in missing:
        print(f"MISSING {name}")
    return (1 if missing else 0), {"hit": hit, "bins": total, "missing": list(missing),
                                   "removed": dict(REMOVED), "coverpoints": points,
                                   "database": str(merged)}


if __name__ == "__main__":
    sys.exit(main())
