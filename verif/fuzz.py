"""Command-stream fuzzer: seeded random programs through the bulk harness, nothing lost.

Each program (``--chunk`` commands) mixes legal matmuls (INT8, BF16 IEEE and FTZ, overwrite
and accumulate, random bank/offset/K/M/N; the other 8/16-bit float types, transposes and
row/column tiles; TF32/FP32 matmuls and transposes, :func:`wide_item`) and READs with
illegal commands of every :data:`~systolica.golden.command.ERRORS` kind (several errors at
once too, to pin the check order; a TF32/FP32 operand with an 8/16-bit partner), and runs
on the bulk harness (:mod:`systolica.tb.bulk`) of one of the tiles in turn, with every
backpressure level and every idle level (random idle cycles on the input streams, or none)
in every four programs. The tiles (:func:`program_config`): program ``p`` of the default
``--types`` (:data:`TYPES`, ``all/all+fp32``) and sizes runs on size ``p mod 3`` of
:data:`SIZES`, generated for ``all`` (8/16-bit types on 16-bit lanes, where TF32/FP32
commands are the illegal ``TYPE_NOT_BUILT`` ones) when ``p mod 6 < 3``, else for
``all+fp32`` (the same types and TF32/FP32 on 32-bit lanes). Per program it requires:

- every command accounted for: each legal command's result beats (``N`` of them, ``last``
  on the final one) and nothing else; the rejected count and last error in ``status``
  equal the model's; a command-accept stamp for every command;
- every result word equal to the golden model's, bit for bit (the scoreboard);
- every stamp (command accepted, moving beat accepted, result taken) equal to the stepped
  cycle model (:func:`~systolica.golden.command_schedule`) under the harness's own idle
  and backpressure patterns (:class:`HarnessPatterns` reproduces its generators).

A failing program prints the command that replays it alone. Program ``p`` of seed ``s``
draws from ``numpy.random.default_rng([s, p])``, so any program replays without the others.

``systolica fuzz --seed S --commands N`` (``make fuzz SEED=S
COMMANDS=N``); exit status 0 when every program passed, 1 otherwise.
"""

import dataclasses
import datetime
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from systolica.golden import (
    FORMATS,
    Command,
    command_schedule,
    finest_tile,
    operand_formats,
    region_limit,
)
from systolica.golden import tile_sizes as golden_tile_sizes
from systolica.golden.command import (
    MX_DTYPES,
    MX_GROUP_ROWS,
    PSUM_BANKS,
    PSUM_ENTRIES,
    SEED_WIDTH,
    SIZE_WIDTH,
    unpaired_command,
)
from systolica.golden.formats import DOUBLE_ROW_TYPES, WIDE_FORMATS
from systolica.hdl.config import TYPE_SET_SEPARATOR, TileConfig, type_sets
from systolica.sim.api.runs import MatmulMx
from systolica.sim.options import (
    OneLineParser,
    add_json_argument,
    folder,
    integer,
    report_as_json,
    tile_sizes,
)
from systolica.tb import stimulus
from systolica.tb.harness import HarnessRun, level

#: Tile sizes the fuzzer cycles through (rows x cols), one per program in turn: square,
#: more columns than rows, more rows than columns.
SIZES = ((4, 4), (3, 4), (5, 3))
#: Commands per program (one simulator run).
CHUNK = 2000
#: Backpressure probabilities drawn per program.
BACKPRESSURE = (0.0, 0.1, 0.3, 0.6)
#: Idle probabilities of the input streams for the programs that idle.
IDLE = (0.1, 0.3, 0.5)
#: Share of the legal matmuls that the second generator turns into transposes (see
#: :func:`random_program`); a quarter of those carry a mode transpose mode refuses.
TRANSPOSES = 0.1
#: Share of the legal matmuls that the second generator puts in a row/column tile that
#: holds them (see :func:`random_tile`).
TILES = 0.15
#: Share of the legal matmuls with which the second generator starts a run of matmuls in
#: the array's finest tiles (:func:`~systolica.golden.finest_tile`), each sharing no PE row
#: or column with those just before it, so that several are in flight at once; the run's
#: length is drawn from :data:`CONCURRENT_RUN`.
CONCURRENT, CONCURRENT_RUN = 0.04, (4, 13)
#: Share of the legal matmuls that the third generator replaces with a TF32/FP32 command
#: (see :func:`wide_item`) on a tile generated with the ``fp32`` type set, and on a tile
#: without it (where each is the illegal command ``TYPE_NOT_BUILT`` rejects).
WIDE_SHARE, UNBUILT_WIDE_SHARE = 0.4, 0.03
#: Share of the legal matmuls that the fourth generator replaces with an MX matmul
#: (:func:`mx_item`) on a tile generated with the ``mx`` type set (at least 8 rows: whole
#: scale groups), and on any other (where each is the illegal command it is).
MX_SHARE, UNBUILT_MX_SHARE = 0.4, 0.03
#: Share of the READs and legal matmuls whose region the fourth generator moves to cross
#: from its bank into the next on a tile whose regions may (the ``mx`` type set,
#: NeuronCore-v4: :func:`~systolica.golden.region_limit`).
CROSSING = 0.1
#: The type sets of the default run (``--types``): every size with ``all`` (8/16-bit types
#: on 16-bit lanes), then every size with ``all+fp32`` (the same types and TF32/FP32 on
#: 32-bit lanes).
TYPES = f"all{TYPE_SET_SEPARATOR}all+fp32"
#: Most illegal commands in a rejection burst (see :func:`random_program`; at least a
#: quarter of it): up to 2^11, so the 16-bit rejected count carries into bit 11.
BURST = 2048

_MASK = 0xFFFFFFFF


def _xorshift(x):
    x ^= (x << 13) & _MASK
    x ^= x >> 17
    x ^= (x << 5) & _MASK
    return x


class _Generator:
    """One of the harness's xorshift32 generators: ``draw(cycle)`` is whether its low byte
    is at least ``level`` in that cycle (cycle 0 = the first cycle a beat can transfer)."""

    def __init__(self, start, level):
        self._x, self._level, self._pattern = start & _MASK, level & 0xFF, []

    def __call__(self, cycle):
        while len(self._pattern) <= cycle:
            self._pattern.append((self._x & 0xFF) >= self._level)
            self._x = _xorshift(self._x)
        return self._pattern[cycle]


class HarnessPatterns:
    """The idle and backpressure patterns ``tb/harness.v`` draws from ``+seed``, ``+idle``
    and ``+bp``, for the stepped cycle model: :attr:`ready` is ``result.ready`` per cycle
    and :meth:`offer` whether an input stream's driver offers a beat in a cycle."""

    def __init__(self, seed, idle, bp):
        seed = seed & _MASK or 1
        self.ready = _Generator(0xC2B2AE35 ^ (seed * 104729), bp)
        self._offers = {"command": _Generator(0x27D4EB2F ^ (seed * 31), idle),
                        "stationary": _Generator(0x9E3779B9 ^ seed, idle),
                        "moving": _Generator(0x85EBCA6B ^ (seed * 7919), idle)}

    def offer(self, stream, cycle):
        return self._offers[stream](cycle)


def _n(rng, limit):
    """A random N in 1..limit, mostly small (short commands keep the program fast); one in
    200 is ``limit`` itself (with offset 0, the whole bank: N's top bit set). Both draws
    are made either way, so the generator's stream does not depend on the outcome."""
    draw = rng.random()
    top = 8 if draw < 0.7 else 40 if draw < 0.97 else limit
    n = int(rng.integers(1, min(top, limit) + 1))
    return limit if draw >= 0.995 else n


#: Float operand types besides BF16 that the second generator draws (see :func:`_operands`).
OTHER_FLOATS = tuple(name for name, f in FORMATS.items() if f.is_float and name != "bf16")


def _operands(rng, k, m, n, dtype, noise=None):
    """Operands of one matmul and its ``perf_mode``; with ``noise`` (a second generator,
    so that the main draw is the same with or without it) a BF16 matmul may change:

    - a third get operands aimed at the arithmetic's edges: :func:`boundary_operands`,
      :func:`cancelling_operands` or :func:`subnormal_operands`;
    - of the others, half take other float types (:func:`other_float_operands`: FP16 and
      the FP8 family, mixed pairs, FP8 double-row).
    """
    if dtype == "int8":
        return stimulus.random_int8(rng, (k, m)), stimulus.random_int8(rng, (k, n)), None
    kind = rng.integers(0, 3)
    make = stimulus.bf16_normal if kind == 0 else stimulus.bf16_wide
    s, v = make(rng, (k, m)), make(rng, (k, n))
    if kind == 2:
        s, v = stimulus.with_specials(rng, s, 0.2), stimulus.with_specials(rng, v, 0.2)
    if noise is None:
        return s, v, None
    draw = noise.random()
    if draw < 1 / 3:
        edge = (boundary_operands, cancelling_operands, subnormal_operands)[
            int(noise.integers(3))]
        s, v = edge(noise, k, m, n)
    elif draw < 2 / 3:
        return other_float_operands(noise, k, m, n)
    return s, v, None


def _float_bits(rng, name, shape):
    """Random operands of float type ``name``, one of three draws per matrix: uniform bit
    patterns (every class in proportion to its patterns), values near 1 (a fifth of the
    time: sums that do not all overflow), or :func:`float_classes` (half the time: the rare
    classes as often as the common one); then, a third of the time, zeros
    (:func:`sparse`)."""
    from systolica.golden.formats import FORMATS

    fmt = FORMATS[name]
    draw = rng.random()
    if draw < 0.2:
        values = rng.standard_normal(shape).astype(np.float32)
        return values.astype(fmt.dtype)
    if draw < 0.5:
        bits = rng.integers(0, 1 << fmt.width, size=shape)
    else:
        bits = float_classes(rng, fmt, shape)
    if rng.random() < 1 / 3:
        bits = sparse(rng, bits, fmt.width)
    return bits.astype(f"u{fmt.width // 8}").view(fmt.dtype)


def float_classes(rng, fmt, shape, special=None):
    """Bit patterns of float format ``fmt`` (a :class:`~systolica.golden.formats.OperandFormat`)
    drawn class by class, so that a class of few patterns (an FP8 type's NaNs, its largest
    binade, its subnormals) is as likely as the normals: +-0; subnormals (half of them one
    fraction bit, so each bit of the fraction's zero test is seen alone); the smallest and
    the largest finite binades; the all-ones exponent (Inf and every NaN payload, one bit
    alone half the time; e4m3fn's finite 1111.xxx and its NaN); other normals. The all-ones
    exponent's share is drawn per matrix (none, few, many), since one NaN hides a column,
    unless ``special`` gives it."""
    ebits, mbits, width = fmt.exp_bits, fmt.man_bits, fmt.width
    top = (1 << ebits) - 1
    if special is None:
        special = float(rng.choice((0.0, 0.04, 0.15)))
    weights = np.array([0.12, 0.25, 0.18, special, 0.45 - special])
    kind = rng.choice(5, size=shape, p=weights / weights.sum())
    fraction = rng.integers(0, 1 << mbits, size=shape)
    single = 1 << rng.integers(0, mbits, size=shape)
    fraction = np.where(rng.random(shape) < 0.5, single, fraction)
    exponent = rng.integers(1, top, size=shape)                          # normals
    exponent = np.where(kind == 0, 0, exponent)                          # zeros
    fraction = np.where(kind == 0, 0, fraction)
    exponent = np.where(kind == 1, 0, exponent)                          # subnormals
    fraction = np.where(kind == 1, np.maximum(fraction, 1), fraction)
    edge = np.where(rng.random(shape) < 0.5, 1, top - 1)                 # edge binades
    exponent = np.where(kind == 2, edge, exponent)
    exponent = np.where(kind == 3, top, exponent)                        # Inf, NaN
    fraction = np.where((kind == 3) & (rng.random(shape) < 0.25), 0, fraction)
    sign = rng.integers(0, 2, size=shape)
    return (sign << (width - 1)) | (exponent << mbits) | fraction


def sparse(rng, bits, width):
    """Copy of the bit patterns ``bits`` (``width``-bit floats) with a share of them, drawn
    per matrix (a half or nine in ten), replaced by +-0: pruned weights, ReLU activations;
    whole products, column sums and double-row pairs that are zero."""
    bits = np.array(bits, copy=True)
    pick = rng.random(bits.shape) < float(rng.choice((0.5, 0.9)))
    bits[pick] &= 1 << (width - 1)
    return bits


def other_float_operands(rng, k, m, n):
    """``(stationary, moving, perf_mode)`` of a float matmul other than BF16 x BF16: each
    operand's type drawn from BF16 and :data:`OTHER_FLOATS` (a mixed pair half the time),
    or, 40 % of the time, an FP8 double-row matmul (both e4m3 or e5m2; K up to 2 x rows:
    the second half of the partition rows in each lane's high byte, when the draw's K is
    the tile's full height, see :func:`random_program`; else K <= rows, also legal). A
    third of the double-row matmuls cancel: some partition rows' second element is the
    first's product negated (stationary sign flipped, moving repeated), so each PE's second
    add subtracts nearly what its first one added (the second adder's cancellation, its
    leading-zero count, exact zeros and Inf - Inf)."""
    types = ("bf16", *OTHER_FLOATS)
    if rng.random() < 0.4:
        pair = [str(rng.choice(DOUBLE_ROW_TYPES)) for _ in range(2)]
        extra = int(rng.integers(1, k + 1))      # K = k + extra <= 2 x rows when k = rows
        s = _float_bits(rng, pair[0], (k + extra, m))
        v = _float_bits(rng, pair[1], (k + extra, n))
        if rng.random() < 1 / 3:
            s_bits, v_bits = s.view(np.uint8).copy(), v.view(np.uint8).copy()
            rows = np.flatnonzero(rng.random(extra) < 0.6)
            s_bits[k + rows] = s_bits[rows] ^ 0x80
            v_bits[k + rows] = v_bits[rows]
            s, v = s_bits.view(s.dtype), v_bits.view(v.dtype)
        return s, v, "double_row"
    stype = str(rng.choice(OTHER_FLOATS))
    mtype = str(rng.choice(types)) if rng.random() < 0.5 else stype
    return _float_bits(rng, stype, (k, m)), _float_bits(rng, mtype, (k, n)), None


def _bf16_bits(rng, exponent, shape):
    sign = rng.integers(0, 2, size=shape)
    return (sign << 15) | (np.asarray(exponent) << 7) | rng.integers(0, 128, size=shape)


def boundary_operands(rng, k, m, n):
    """BF16 operands whose products straddle FP32's normal/subnormal boundary (biased
    exponents summing to 122..134, the boundary at 128), sit at the bottom of the subnormal
    range (summing to 100..112: products of about 2^-154 .. 2^-142, rounded to the smallest
    subnormals or to zero) or at the overflow end (summing to 370..386, Inf from 382), with
    some subnormal and zero operands: every product class and the multiplier's and adder's
    rounding at both ends of the range. Half the time the fractions are short (their low
    five bits zero), so that products end exactly on a rounding tie."""
    where = rng.random()
    lo, hi = (185, 194) if where < 0.25 else (50, 57) if where < 0.45 else (61, 68)
    s_exp = rng.integers(lo, hi, size=(k, m))
    v_exp = rng.integers(lo, hi, size=(k, n))
    s = _bf16_bits(rng, s_exp, (k, m))
    v = _bf16_bits(rng, v_exp, (k, n))
    if rng.random() < 0.5:
        s, v = s & ~0x1F, v & ~0x1F
    for bits in (s, v):
        pick = rng.random(bits.shape) < 0.1
        bits[pick] &= 0x807F                     # subnormal (or zero) of the same sign
    return stimulus.from_bits(s), stimulus.from_bits(v)


def subnormal_operands(rng, k, m, n):
    """BF16 subnormals (mostly with few fraction bits: the multiplier normalises them by up
    to 15 places; a third of them one bit alone, so each bit of the zero-fraction test is
    seen by itself) times large normals (biased exponents 120..254), so that their products
    land in FP32's normal range; zeros and infinities mixed in (0 x Inf is NaN). Which side
    holds the subnormals is drawn per matmul."""
    small_shape, large_shape = ((k, m), (k, n)) if rng.random() < 0.5 else ((k, n), (k, m))
    fraction = rng.integers(1, 128, size=small_shape) >> rng.integers(0, 7, size=small_shape)
    fraction = np.where(rng.random(small_shape) < 1 / 3,
                        1 << rng.integers(0, 7, size=small_shape), fraction)
    small = (rng.integers(0, 2, size=small_shape) << 15) | np.maximum(fraction, 1)
    large = _bf16_bits(rng, rng.integers(120, 255, size=large_shape), large_shape)
    specials = np.array([0x0000, 0x8000, 0x7F80, 0xFF80], np.int64)
    for bits in (small, large):
        pick = rng.random(bits.shape) < 0.05
        bits[pick] = rng.choice(specials, int(pick.sum()))
    small, large = stimulus.from_bits(small), stimulus.from_bits(large)
    return (small, large) if small_shape == (k, m) else (large, small)


def cancelling_operands(rng, k, m, n):
    """BF16 operands whose column chain cancels: every odd partition row repeats the moving
    row above it with the stationary row above negated and its last significand bits
    perturbed, so the adds subtract nearly equal products (the adder's massive
    cancellation, leading-zero count and exact-zero sign rules). Two thirds of the time the
    operands are scaled by powers of two so that the products' biased exponent is about a
    drawn value, over the whole range or at its bottom (1..90, where the normaliser stops
    at exponent 1 and the difference is subnormal), instead of about 127."""
    s = stimulus.bf16_normal(rng, (k, m)).view(np.uint16).copy()
    v = stimulus.bf16_normal(rng, (k, n)).view(np.uint16).copy()
    for row in range(1, k, 2):
        v[row] = v[row - 1]
        s[row] = (s[row - 1] ^ 0x8000) ^ rng.integers(0, 4, size=m)
    where = rng.random()
    if where < 2 / 3:
        target = int(rng.integers(1, 255)) if where < 1 / 3 else int(rng.integers(1, 91))
        s_shift = (target - 127) // 2 + int(rng.integers(-8, 9))
        for bits, shift in ((s, s_shift), (v, target - 127 - s_shift)):
            exponent = (bits >> 7) & 0xFF
            moved = np.clip(exponent.astype(np.int64) + shift, 1, 254)
            bits[:] = np.where(exponent != 0, (bits & 0x807F) | (moved << 7), bits)
    return stimulus.from_bits(s), stimulus.from_bits(v)


def _out_of_range(rng, legal, low, width):
    """A value of a ``width``-bit field at or above ``low``: the bound itself, a legal value
    with one high bit set (an alias that a comparison dropping that bit would accept), or
    uniform."""
    top = 1 << width
    bits = [j for j in range(max(1, low.bit_length() - 1), width) if (legal | 1 << j) >= low]
    choices = [low, int(rng.integers(low, top))]
    if bits:
        choices.append(legal | 1 << int(rng.choice(bits)))
    value = int(rng.choice(choices))
    return value if value < top else low


def _illegal(rng, rows, cols, across=False):
    """A command the tile must reject; which check fails is drawn (sometimes several;
    ``"TILE"`` stands for the tile rule's codes, :func:`_bad_tile`). ``across``: the tile's
    regions may cross banks (an ``N_RANGE`` region then passes the end of PSUM)."""
    op = "matmul" if rng.random() < 0.7 else "read"
    # MX twice: its rules are eight codes behind one kind
    kinds = ["BANK_RANGE", "N_RANGE"] + (["K_RANGE", "M_RANGE", "DOUBLE_ROW_TYPE", "TILE",
                                          "MX", "MX"] if op == "matmul" else [])
    wrong = {kinds[int(rng.integers(len(kinds)))]}
    while rng.random() < 0.25:
        wrong.add(kinds[int(rng.integers(len(kinds)))])
    bank = int(rng.integers(PSUM_BANKS))
    if "BANK_RANGE" in wrong:
        bank = _out_of_range(rng, bank, PSUM_BANKS, 8)
    k = int(rng.integers(1, rows + 1))
    if "K_RANGE" in wrong:
        k = int(rng.choice([0, _out_of_range(rng, k, rows + 1, 16)]))
    m = int(rng.integers(1, cols + 1))
    if "M_RANGE" in wrong:
        m = int(rng.choice([0, _out_of_range(rng, m, cols + 1, 16)]))
    offset = int(rng.integers(PSUM_ENTRIES))
    n = _n(rng, PSUM_ENTRIES - offset)
    if "N_RANGE" in wrong:
        limit = region_limit(min(bank, PSUM_BANKS - 1), across=across)
        case = rng.integers(3)
        if case == 0:
            n = 0
        elif case == 1:
            n = _out_of_range(rng, n, limit - offset + 1, 16)
        else:
            offset = _out_of_range(rng, offset, limit, 16)
    # DOUBLE_ROW_TYPE: double-row with a BF16 or INT8 pair (only e4m3 / e5m2 may).
    command = Command(op, k=k, m=m, n=n, bank=bank, offset=offset,
                      dtype="bf16" if rng.random() < 0.5 else "int8",
                      ftz=bool(rng.random() < 0.3), accumulate=bool(rng.random() < 0.5),
                      perf_mode="double_row" if "DOUBLE_ROW_TYPE" in wrong else None)
    if "TILE" in wrong:      # TILE_*: the tile rule (checked late, so alone or hidden)
        command = _bad_tile(rng, command, rows, cols)
    if "MX" in wrong:        # the MX fields (the last checks)
        command = _bad_mx(rng, command, rows, cols)
    return command


def _bad_mx(rng, command, rows, cols):
    """``command`` (a matmul) given NeuronCore-v4 fields every tile refuses: an MX matmul
    with K not whole scale groups (``MX_K``), with ``ftz`` (``MX_MODE``), in a column tile
    (``MX_TILE``) or of legacy e4m3 (``MX_TYPE``), each ``TYPE_NOT_BUILT`` on a tile without
    MX; ``fp4`` without MX (``MX_TYPE``); or a BF16 destination without MX or stochastic
    rounding without one (``DST_MODE``)."""
    seed = int(rng.integers(1 << SEED_WIDTH))
    kind = (0, 0, 1, 2, 3)[int(rng.integers(5))]
    if kind == 0:
        groups = 8 * (command.k // 8)
        mx = dataclasses.replace(
            command, mx=True, dtype=str(rng.choice(MX_DTYPES)),
            moving_dtype=str(rng.choice(MX_DTYPES)), perf_mode=None, is_transpose=False,
            ftz=False, k=groups or command.k, dst_dtype="bf16" if rng.random() < 0.5 else "fp32",
            seed=seed)
        wrong = str(rng.choice(["k", "ftz", "column tile", "e4m3"]))
        if wrong == "k" or not groups:
            return dataclasses.replace(mx, k=command.k + 1 if command.k % 8 == 0 else command.k)
        if wrong == "column tile" and cols % 2 == 0:
            return dataclasses.replace(mx, m=min(command.m, cols // 2), tile_position=(0, 0),
                                       tile_size=(rows, cols // 2))
        if wrong == "e4m3":
            return dataclasses.replace(mx, dtype="e4m3")
        return dataclasses.replace(mx, ftz=True)
    if kind == 1:
        side = int(rng.integers(3))
        return dataclasses.replace(command, fp4=(side != 1, side != 0))
    if kind == 2:
        return dataclasses.replace(command, dst_dtype="bf16", seed=seed, rounding=str(
            rng.choice(["rne", "stochastic"])))
    return dataclasses.replace(command, rounding="stochastic", seed=seed)


def _unused_matmul_fields(noise):
    """Random values for the matmul-only fields of a READ's command word (a READ must
    ignore them): the moving type, double-row and transpose bits, and half the time the
    tile fields (``tiled`` set, each start and size any 16-bit value)."""
    fields = {"moving_dtype": str(noise.choice(list(FORMATS))),
              "perf_mode": "double_row" if noise.random() < 0.5 else None,
              "is_transpose": bool(noise.random() < 0.5)}
    if noise.random() < 0.3:
        fields.update(mx=True, fp4=(bool(noise.random() < 0.5), bool(noise.random() < 0.5)),
                      dst_dtype="bf16", rounding=str(noise.choice(["rne", "stochastic"])),
                      seed=int(noise.integers(1 << SEED_WIDTH)))
    if noise.random() < 0.5:
        fields["tile_position"], fields["tile_size"] = (
            tuple(int(v) for v in noise.integers(1 << SIZE_WIDTH, size=2)) for _ in range(2))
    return fields


def _bad_tile(rng, command, rows, cols):
    """``command`` (a matmul) put in a tile the tile's rule refuses (``TILE_*``): a size
    that is not the extent, its half or its quarter; a start off the grid of its size; or,
    where the array halves, K or M larger than a half tile, or double-row in a column tile."""
    kinds = ["size", "position"] + (["k"] if rows % 2 == 0 else []) + (
        ["m", "double_row"] if cols % 2 == 0 else [])
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "size":
        bad = int(rng.choice([0, rows + 1, 2 * rows]))
        return dataclasses.replace(command, tile_position=(0, 0), tile_size=(bad, cols))
    if kind == "position":
        start = (rows, 0) if rng.random() < 0.5 else (0, cols + int(rng.integers(3)))
        return dataclasses.replace(command, tile_position=start, tile_size=(rows, cols))
    if kind == "k":
        return dataclasses.replace(command, k=rows // 2 + 1, tile_position=(rows // 2, 0),
                                   tile_size=(rows // 2, cols))
    if kind == "m":
        return dataclasses.replace(command, m=cols // 2 + 1, tile_position=(0, cols // 2),
                                   tile_size=(rows, cols // 2))
    return dataclasses.replace(command, dtype="e4m3", moving_dtype=None, ftz=False,
                               perf_mode="double_row", k=min(command.k, rows),
                               m=min(command.m, cols // 2), tile_position=(0, 0),
                               tile_size=(rows, cols // 2))


def transpose_operands(rng, k, m, n):
    """``(stationary, moving)`` of a transpose: the stationary's type drawn from every
    operand type, its bits :func:`float_classes` (INT8: uniform) with a third of them
    :data:`~systolica.tb.stimulus.SPECIAL_PATTERNS`; the moving a selector (one 1 per
    column, in a random row) of a float type drawn for a float stationary, INT8 for INT8."""
    fmt = FORMATS[str(rng.choice(list(FORMATS)))]
    if fmt.is_float:
        bits = float_classes(rng, fmt, (k, m))
        mtype = FORMATS[str(rng.choice([name for name, f in FORMATS.items() if f.is_float]))]
    else:
        bits, mtype = rng.integers(0, 256, (k, m)), fmt
    bits, ones = _transposed_and_selector(rng, bits, fmt.width, n)
    return (bits.astype(f"u{fmt.width // 8}").view(fmt.dtype), ones.astype(mtype.dtype))


def _transposed_and_selector(rng, bits, width, n):
    """The words [K, M] a transpose moves, a third of them replaced by
    :data:`~systolica.tb.stimulus.SPECIAL_PATTERNS` ``[width]``, and its float32 selector
    [K, n] (one 1 per column, in a random row)."""
    k, m = bits.shape
    specials = np.array(stimulus.SPECIAL_PATTERNS[width])
    bits = np.where(rng.random((k, m)) < 1 / 3, rng.choice(specials, (k, m)), bits)
    ones = np.zeros((k, n), np.float32)
    ones[rng.integers(0, k, size=n), np.arange(n)] = 1.0
    return bits, ones


def _refused_transpose(rng, k, m, n, bank, offset):
    """A transpose the tile rejects for its mode alone (``TRANSPOSE_*``): ``double_row``
    (with an e4m3 / e5m2 pair), ``accumulate`` or ``ftz``; the first that applies (the
    code) is drawn uniformly, the later ones are added at random."""
    first = int(rng.integers(3))
    modes = {"perf_mode": "double_row" if first == 0 else None,
             "accumulate": first == 1 or (first < 1 and bool(rng.random() < 0.5)),
             "ftz": first == 2 or bool(rng.random() < 0.5)}
    dtype = str(rng.choice(DOUBLE_ROW_TYPES if modes["perf_mode"] else list(FORMATS)))
    return Command("matmul", k=k, m=m, n=n, bank=bank, offset=offset, dtype=dtype,
                   is_transpose=True, **modes)


#: The 32-bit operand types (TF32 and FP32; they pair only with each other).
WIDE_TYPES = tuple(WIDE_FORMATS)
#: FP32 bit patterns of the largest finite magnitude (TF32 reads 0x7F7FE000 from them).
_MAX_FINITE = (0x7F7FFFFF, 0xFF7FFFFF)


def wide_bits(rng, name, shape):
    """Random operands of ``name`` (``"tf32"`` or ``"fp32"``; float32 words or
    :data:`~systolica.golden.TFLOAT32` ones), one of three draws per matrix: values near 1
    (a fifth of the time), :func:`~systolica.tb.stimulus.fp32_words` (a quarter: exponents
    near 1, near 0 and where products cross FP32's subnormal boundary, the tie that rounds
    up to 2^-126) or :func:`float_classes` of FP32's fields (+-0, subnormals, the edge
    binades, Inf and NaN payloads as often as normals); then about a tenth of the words
    replaced by the largest finite magnitude or :data:`~systolica.tb.stimulus.SPECIAL_PATTERNS`
    ``[32]``, and a third of the time a share of zeros (:func:`sparse`). TF32 words keep
    random bits in the 13 fraction bits TF32 does not read half the time (a NaN whose payload
    lies only there reads as Inf), else zeros there."""
    fmt = WIDE_FORMATS["fp32"]
    draw = rng.random()
    if draw < 0.2:
        bits = rng.standard_normal(shape).astype(np.float32).view(np.uint32).astype(np.int64)
    elif draw < 0.45:
        bits = stimulus.fp32_words(rng, shape, specials=0.1).view(np.uint32).astype(np.int64)
    else:
        bits = float_classes(rng, fmt, shape)
    pool = np.array([*_MAX_FINITE, *stimulus.SPECIAL_PATTERNS[32]], np.int64)
    bits = np.where(rng.random(shape) < 0.1, rng.choice(pool, shape), bits)
    if rng.random() < 1 / 3:
        bits = sparse(rng, bits, 32)
    if name == "tf32" and rng.random() < 0.5:
        bits = bits & 0xFFFFE000
    bits = bits.astype(np.uint32)
    return bits.view(WIDE_FORMATS[name].dtype)


def wide_item(rng, rows, cols, k, m, n, bank, offset):
    """A TF32/FP32 command of K = ``k``, M = ``m``, N = ``n`` into PSUM ``bank``/``offset``,
    an item as :func:`random_program` returns:

    - a tenth: an operand pair no tile takes (:func:`~systolica.golden.command.unpaired_command`:
      TF32 or FP32 with an 8/16-bit type, either side; the tile rejects it with
      ``TYPE_NOT_BUILT``), a Command with random modes and, half the time, a tile;
    - 15 %: a transpose of TF32 or FP32 words (:func:`wide_bits`, a third of them
      :data:`~systolica.tb.stimulus.SPECIAL_PATTERNS` ``[32]``) with a selector of either
      32-bit type, a quarter of them refused for their mode (accumulate or FTZ,
      ``TRANSPOSE_*``);
    - the rest: a matmul of a pair drawn from TF32 x TF32, FP32 x FP32, TF32 x FP32 and
      FP32 x TF32 (:func:`wide_bits`), accumulating 40 % and FTZ 30 % of the time, a fifth
      of them in a random row/column tile (:func:`random_tile`).
    """
    draw = rng.random()
    if draw < 0.1:
        narrow = str(rng.choice(list(FORMATS)))
        wide = str(rng.choice(WIDE_TYPES))
        stype, mtype = (wide, narrow) if rng.random() < 0.5 else (narrow, wide)
        command = Command("matmul", k=k, m=m, n=n, bank=bank, offset=offset, dtype=stype,
                          ftz=bool(rng.random() < 0.3), accumulate=bool(rng.random() < 0.4),
                          is_transpose=bool(rng.random() < 0.2))
        if rng.random() < 0.5:
            position, size = random_tile(rng, rows, cols, k, m)
            command = dataclasses.replace(command, tile_position=position, tile_size=size)
        return unpaired_command(command, mtype)
    if draw < 0.25:
        stype = str(rng.choice(WIDE_TYPES))
        if rng.random() < 0.25:
            accumulate = bool(rng.random() < 0.5)
            return Command("matmul", k=k, m=m, n=n, bank=bank, offset=offset, dtype=stype,
                           moving_dtype=str(rng.choice(WIDE_TYPES)), is_transpose=True,
                           accumulate=accumulate, ftz=not accumulate or bool(rng.random() < 0.5))
        bits, ones = _transposed_and_selector(rng, wide_bits(rng, stype, (k, m)).view(np.uint32),
                                              32, n)
        mtype = WIDE_FORMATS[str(rng.choice(WIDE_TYPES))].dtype
        s = bits.astype(np.uint32).view(WIDE_FORMATS[stype].dtype)
        return s, ones.view(mtype), False, False, bank, offset, None, True
    stype, mtype = (str(t) for t in rng.choice(WIDE_TYPES, 2))
    s, v = wide_bits(rng, stype, (k, m)), wide_bits(rng, mtype, (k, n))
    accumulate, ftz = bool(rng.random() < 0.4), bool(rng.random() < 0.3)
    if rng.random() < 0.2:
        return (s, v, accumulate, ftz, bank, offset, None, False,
                *random_tile(rng, rows, cols, k, m))
    return s, v, accumulate, ftz, bank, offset, None


#: MX element types the fuzzer draws (MXFP4 as float4_e2m1fn).
MX_ELEMENTS = tuple(np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                          ml_dtypes.float4_e2m1fn))
#: E8M0 codes drawn on purpose beside the ones around 2^0: the extremes and NaN.
MX_EDGE_SCALES = (0, 1, 126, 127, 128, 253, 254, 255)


def mx_elements(rng, dtype, shape):
    """MX elements [P, F, 4] of ``dtype``: uniform codes (NaN and Inf codes included, one in
    eight draws) or finite ones."""
    top = 16 if dtype == MX_ELEMENTS[2] else 256
    codes = rng.integers(0, top, shape).astype(np.uint8)
    if rng.random() >= 0.125:
        codes[~np.isfinite(codes.view(dtype).astype(np.float32))] &= 0xBF
    return codes.view(dtype)


def mx_scales(rng, shape):
    """E8M0 scale codes: mostly near 2^0 (so sums stay normal), some extreme or NaN."""
    scales = rng.integers(112, 143, shape).astype(np.uint8)
    edge = rng.random(shape) < 0.05
    scales[edge] = rng.choice(MX_EDGE_SCALES, int(edge.sum()))
    return scales


def mx_item(rng, rows, cols, n, bank, offset):
    """An MX matmul of the main draw's N and region: K whole scale groups up to ``rows``
    (at least 8), M up to ``cols``, element types drawn from :data:`MX_ELEMENTS` for each
    side, a row tile a fifth of the time, a BF16 destination a third of the time (half of
    those rounded stochastically, a random seed), accumulation two fifths."""
    groups = int(rng.integers(1, max(1, rows // 8) + 1))
    p, m = 8 * groups, int(rng.integers(1, cols + 1))
    stype, mtype = (MX_ELEMENTS[int(rng.integers(3))] for _ in range(2))
    tile = {}
    if rng.random() < 0.2 and rows % 2 == 0 and rows // 2 >= 8:
        half = rows // 2
        p = 8 * int(rng.integers(1, half // 8 + 1))
        tile = {"tile_position": (half * int(rng.integers(2)), 0), "tile_size": (half, cols)}
    bf16 = rng.random() < 0.33
    rounding = "stochastic" if bf16 and rng.random() < 0.5 else "rne"
    return MatmulMx(mx_elements(rng, stype, (p, m, 4)), mx_elements(rng, mtype, (p, n, 4)),
                    mx_scales(rng, (p // 8, m)), mx_scales(rng, (p // 8, n)),
                    accumulate=bool(rng.random() < 0.4), bank=bank, offset=offset,
                    dst_dtype=ml_dtypes.bfloat16 if bf16 else np.float32, rounding=rounding,
                    seed=int(rng.integers(1 << SEED_WIDTH)), **tile)


def random_tile(rng, rows, cols, k, m, perf_mode=None):
    """``(tile_position, tile_size)`` of a random tile of a ``rows x cols`` array that holds
    a matmul of K = ``k`` (``2 x`` the tile's rows in double-row mode) and M = ``m``, any
    allowed size at any position (a double-row matmul only in full-width tiles)."""
    k_rows = -(-k // 2) if perf_mode is not None else k
    fits = [(rs, cs) for rs in golden_tile_sizes(rows) for cs in golden_tile_sizes(cols)
            if rs >= k_rows and cs >= m and (perf_mode is None or cs == cols)]
    rs, cs = fits[int(rng.integers(len(fits)))]
    return ((int(rng.integers(rows // rs)) * rs, int(rng.integers(cols // cs)) * cs),
            (rs, cs))


def random_program(rng, rows, cols, count, dense=0.0, noise=None, burst=None, floats=0.0,
                   wide=None, wide_share=0.0, mx=None, mx_share=0.0, across=False):
    """``count`` random commands for a ``rows x cols`` tile: a list whose items are either
    ``(stationary, moving, accumulate, ftz, bank, offset[, perf_mode[, is_transpose]])`` (a
    legal matmul) or a :class:`~systolica.golden.Command` (a legal READ or an illegal
    command).

    ``dense``: share of the legal matmuls that use the whole array (K = rows, M = cols),
    every PE busy (the mutation kill-set raises it); 0 draws as before.

    ``floats``: with ``noise``, share of the legal matmuls whose operands are replaced by
    :func:`other_float_operands` (FP16, the FP8 family, mixed pairs, FP8 double-row; FTZ
    drawn too) whatever the main draw's type: the mutation kill-set raises it, so that each
    PE's rare float patterns come often; 0 draws as before.

    ``noise``: a second generator (None: off) for what the main draw does not decide, so a
    program's commands stay the same with it: a READ's unused fields (K, M, data type, FTZ,
    accumulate; the tile must ignore them) get random values, a third of the BF16 matmuls
    get edge operands (:func:`_operands`), and with probability 1/2 the program starts
    with a burst of up to :data:`BURST` illegal commands, so that ``status.rejected``
    carries into its upper bits. ``burst``: that many illegal commands first instead (a directed
    program: RTL coverage wraps the count with 2^16). With ``noise``, :data:`TRANSPOSES` of
    the legal matmuls become transposes of the main draw's K, M, N and region
    (:func:`transpose_operands`), a quarter of them refused for their mode
    (:func:`_refused_transpose`), and :data:`TILES` of the other legal matmuls run in a
    random row/column tile that holds them (:func:`random_tile`; the items then carry
    ``is_transpose``, ``tile_position`` and ``tile_size``); with :data:`CONCURRENT` of them
    a run of matmuls starts whose K and M are cut to the finest tile and which take the
    finest tiles in turn (:func:`~systolica.golden.finest_tile`), so that up to four run at
    once.

    ``wide``: a third generator (None: off) that replaces ``wide_share`` of the legal
    matmuls, after the other two have drawn them (so their streams, and the other commands,
    stay the same), with a TF32/FP32 command of the same K, M, N and region
    (:func:`wide_item`); with ``noise`` too, it puts TF32/FP32 codes in the type fields of a
    fifth of the READs (which must ignore them).

    ``mx``: a fourth generator (None: off) that replaces ``mx_share`` of the legal matmuls,
    after the others have drawn them, with an MX matmul of the same N and region
    (:class:`~systolica.sim.MatmulMx`, :func:`mx_item`); a tile of fewer than 8 rows draws
    none. With ``across`` (a tile whose regions may cross banks: the ``mx`` type set) it
    also moves :data:`CROSSING` of the READ and legal matmul regions to start before the
    end of their bank and end in the next, and the illegal ``N_RANGE`` regions pass the end
    of PSUM.
    """
    out = []
    if burst is None and noise is not None and noise.random() < 0.5:
        # A random length: the count's check is at the end of the program, so a wrong
        # carry that flips back and forth must stop on the wrong side in some program.
        burst = int(noise.integers(BURST // 4, BURST + 1))
    out.extend(_illegal(noise or rng, rows, cols, across) for _ in range(burst or 0))
    run_left = slot = 0          # a run of matmuls in the finest tiles, and its next tile
    for _ in range(count):
        draw = rng.random()
        if draw < 0.3:
            out.append(_illegal(rng, rows, cols, across))
            continue
        bank = int(rng.integers(PSUM_BANKS))
        offset = int(rng.integers(PSUM_ENTRIES)) if rng.random() < 0.5 else 0
        n = _n(rng, PSUM_ENTRIES - offset)
        if rng.random() < 0.3:              # a region that ends at the bank's end
            offset = PSUM_ENTRIES - n
        if (across and mx is not None and n > 1 and bank < PSUM_BANKS - 1
                and mx.random() < CROSSING):     # one that runs into the next bank
            offset = PSUM_ENTRIES - int(mx.integers(1, n))
        if draw < 0.45:
            unused = {}
            if noise is not None:
                unused = {"k": int(noise.integers(1 << SIZE_WIDTH)),
                          "m": int(noise.integers(1 << SIZE_WIDTH)),
                          "dtype": "bf16" if noise.random() < 0.5 else "int8",
                          "ftz": bool(noise.random() < 0.5),
                          "accumulate": bool(noise.random() < 0.5),
                          **_unused_matmul_fields(noise)}
            if wide is not None and wide.random() < 0.2:
                # TF32/FP32 codes in the type fields a READ ignores (with the transpose bit
                # that a 32-bit transpose's two passes hang on, half the time)
                unused.update(dtype=str(wide.choice(WIDE_TYPES)),
                              moving_dtype=str(wide.choice(WIDE_TYPES)))
            out.append(Command("read", n=n, bank=bank, offset=offset, **unused))
            continue
        k, m = int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1))
        if dense and rng.random() < dense:
            k, m = rows, cols
        dtype = "bf16" if rng.random() < 0.5 else "int8"
        s, v, perf_mode = _operands(rng, k, m, n, dtype, noise)
        accumulate = bool(rng.random() < 0.4)
        ftz = bool(dtype == "bf16" and rng.random() < 0.3)
        if floats and noise is not None and noise.random() < floats:
            s, v, perf_mode = other_float_operands(noise, k, m, n)
            ftz = bool(noise.random() < 0.3)
        if perf_mode is not None and k < rows:
            s, v = s[:k], v[:k]         # below full height: a double-row matmul with K <= rows
        if noise is not None and not run_left and noise.random() < CONCURRENT:
            run_left, slot = int(noise.integers(*CONCURRENT_RUN)), 0
        if run_left and perf_mode is None:
            position, size = finest_tile(rows, cols, slot)
            run_left, slot = run_left - 1, slot + 1
            s, v = s[:size[0], :size[1]], v[:size[0]]
            item = (s, v, accumulate, ftz, bank, offset, None, False, position, size)
        elif noise is not None and noise.random() < TRANSPOSES:
            if noise.random() < 0.25:
                item = _refused_transpose(noise, k, m, n, bank, offset)
            else:
                item = (*transpose_operands(noise, k, m, n), False, False, bank, offset,
                        None, True)
        elif noise is not None and noise.random() < TILES:
            item = (s, v, accumulate, ftz, bank, offset, perf_mode, False,
                    *random_tile(noise, rows, cols, len(s), s.shape[1], perf_mode))
        else:
            item = (s, v, accumulate, ftz, bank, offset, perf_mode)
        if wide is not None and wide.random() < wide_share:
            item = wide_item(wide, rows, cols, k, m, n, bank, offset)
        if mx is not None and rows >= 8 and mx.random() < mx_share:
            item = mx_item(mx, rows, cols, n, bank, offset)
        out.append(item)
    return out


#: FP8 types whose every bit pattern :func:`pattern_sweep` puts in every PE.
SWEPT = ("e4m3", "e5m2", "e3m4", "e4m3fn")


def pattern_sweep(rng, rows, cols, n=3):
    """A directed program (items as :func:`random_program`'s): every bit pattern of each
    FP8 type in every PE's stationary register and every partition row's moving operand,
    in single-row matmuls and (e4m3, e5m2) in both bytes of double-row ones, and every
    BF16 and FP16 subnormal in every moving row. Patterns a fuzzer draws rarely at one PE
    (one NaN payload, the largest binade, a subnormal of one fraction bit) are each seen
    at every PE.

    - Stationary sweep, per type (and per double-row type, K = 2 x rows): 256 matmuls of
      ``n`` beats, matmul ``p`` holding pattern ``(p + 16 r + 8 c) mod 256`` at partition
      row ``r`` (``r + rows``: the high byte) and column ``c``. Patterns 16 apart lie in
      different aligned blocks of 16 and (up to 8 of them) none are 128 apart, so a column
      holds at most one pattern of the all-ones exponent (Inf, NaN) and a NaN never hides
      another special of its column. The moving operands are drawn by
      :func:`float_classes` without that class, of a type drawn per matmul. The double-row
      sweeps run twice, the second time with about half the partition rows cancelling:
      their second element is the first's negated product (stationary sign flipped, moving
      repeated), so each swept pattern also meets its own negation in the second adder;
      and per partition row below the first, a moving sweep of the rows above it while its
      own pair of large products cancels: the second adder's leading-zero count at every
      depth.
    - Moving sweep, per type (and per double-row type): one matmul of 256 beats, beat
      ``b`` holding ``(b + 16 r) mod 256`` in row ``r``; the stationary drawn as above.
    - The adders' cancellation at every exponent, FTZ off and on (then with K = r + 1, so
      no lower row's adder reads the sum): BF16 matmuls whose rows ``r - 1`` and ``r``
      (each row below the first) cancel but for the stationary's last bits, beat ``b`` at
      about 2^(b - 127); for PSUM's adders, a product then its near
      negation accumulated into the same region, at every exponent, and at every depth 3..20
      (FP16: (1 + 2^-i)(1 + 2^-j) stored, 1 + 2^-i + 2^-j subtracted).
    - BF16 and FP16 exponent edges (:func:`_exponent_edges`: exponent 0, all ones, all
      ones but one bit, one bit alone) in every PE's stationary register and every
      partition row's moving operand, one partition row at a time (the others' stationary
      zero), with FTZ off and on.
    - BF16 and FP16 subnormals (every sign and fraction): matmuls of 256 beats whose beat
      ``b`` holds subnormal ``(b + 16 r)`` in row ``r``, times normals, FTZ off.
    - BF16 products in FP32's subnormal range (product exponents -153 .. -110), one
      partition row at a time, random signs and fractions, FTZ off.

    FTZ is drawn per matmul (a quarter of them), except for the subnormal and edge sweeps.
    """
    from systolica.golden.formats import FORMATS

    items, slot = [], [0]

    def add(s, v, perf_mode=None, ftz=None, accumulate=False):
        """Append a matmul into the next region (``accumulate``: into the last one)."""
        slot[0] += not accumulate
        region = (slot[0] - 1) % (PSUM_BANKS * (PSUM_ENTRIES // 256))
        bank, offset = divmod(region * 256, PSUM_ENTRIES)
        ftz = bool(rng.random() < 0.25) if ftz is None else ftz
        items.append((s, v, accumulate, ftz, bank, offset, perf_mode))

    def view(bits, name):
        fmt = FORMATS[name]
        return np.asarray(bits).astype(f"u{fmt.width // 8}").view(fmt.dtype)

    def benign(name, shape):
        """Moving operands without Inf or NaN; a third of the time only subnormals and
        zeros, so that a tiny product is not lost in its column's sum."""
        fmt = FORMATS[name]
        if rng.random() < 1 / 3:
            fraction = np.where(rng.random(shape) < 0.5,
                                1 << rng.integers(0, fmt.man_bits, size=shape),
                                rng.integers(0, 1 << fmt.man_bits, size=shape))
            bits = (rng.integers(0, 2, size=shape) << (fmt.width - 1)) | fraction
        else:
            bits = float_classes(rng, fmt, shape, special=0.0)
        return view(bits, name)

    runs = [(name, None, (name, *FP8_PARTNERS), False) for name in SWEPT]
    runs += [(name, "double_row", ("e4m3", "e5m2"), cancel) for cancel in (False, True)
             for name in ("e4m3", "e5m2")]
    for name, perf_mode, partners, cancel in runs:
        k = 2 * rows if perf_mode else rows
        rows_off = 16 * np.arange(k)[:, None]
        for p in range(256):
            mtype = str(rng.choice(partners))
            s = (p + rows_off + 8 * np.arange(cols)[None, :]) % 256
            v = benign(mtype, (k, n))
            if cancel:
                # Half the partition rows cancel: second element = the first's product
                # negated (Inf - Inf, exact zeros, the second add's deep cancellation).
                pick = np.flatnonzero(rng.random(rows) < 0.5)
                s[rows + pick] = s[pick] ^ 0x80
                v_bits = v.view(np.uint8).copy()
                v_bits[rows + pick] = v_bits[pick]
                v = v_bits.view(v.dtype)
            add(view(s, name), v, perf_mode)
        v = view((np.arange(256)[None, :] + rows_off) % 256, name)
        add(benign(str(rng.choice(partners)), (k, cols)), v, perf_mode)
        if cancel:
            # The second add's cancellation at every depth: partition row ``row``'s pair
            # cancels (large fixed products) while the rows above sweep every pattern, so
            # the partial sum left over lies 0 to ~50 binades below the cancelled product.
            fmt = FORMATS[name]
            for row in range(1, rows):
                s_bits = _float_bits_exp(rng, fmt, (k, cols), (1 << fmt.exp_bits) - 4)
                v_bits = np.array(v.view(np.uint8), dtype=np.int64)
                v_bits[row:] = _float_bits_exp(rng, fmt, (k - row, 256), (1 << fmt.exp_bits) - 4)
                v_bits[row + 1:rows] = float_classes(rng, fmt, (rows - row - 1, 256), 0.0)
                v_bits[rows:rows + row] = 0
                s_bits[rows + row] = s_bits[row] ^ 0x80
                v_bits[rows + row] = v_bits[row, :1]
                v_bits[row] = v_bits[row, :1]
                add(view(s_bits, name), view(v_bits, name), perf_mode)
    # The first adder's cancellation at every exponent, in every row's adder: BF16 beats
    # whose partition rows ``row - 1`` and ``row`` hold products of about 2^(b - 127)
    # (beat b) that cancel but for the last bits of the stationary (a different
    # perturbation per column), the other rows zero; FTZ off, then on with K = row + 1 (a
    # sum left in the subnormal range must be flushed by this row's adder: a row below
    # would read it as zero, flushed or not).
    fmt = FORMATS["bf16"]
    for row in range(1, rows):
        for ftz in (False, True):
            k = row + 1 if ftz else rows
            s_bits = np.zeros((k, cols), np.int64)
            s_bits[row - 1] = _float_bits_exp(rng, fmt, (cols,), 127)
            s_bits[row] = s_bits[row - 1] ^ 0x8000 ^ (1 + np.arange(cols) % 7)
            v_bits = np.zeros((k, 254), np.int64)
            v_bits[row - 1] = ((rng.integers(0, 2, size=254) << 15) | (np.arange(1, 255) << 7)
                               | rng.integers(0, 128, size=254))
            v_bits[row] = v_bits[row - 1]
            add(view(s_bits, "bf16"), view(v_bits, "bf16"), None, ftz=ftz)
    # PSUM's adders: the same cancellation at every exponent between a stored product and
    # an accumulated one (K = 1: the product, then its negation but for the stationary's
    # last bits); then at every depth 3..20: (1 + 2^-i)(1 + 2^-j) stored (FP16, i per
    # column, j per beat), then 1 + 2^-i + 2^-j accumulated negated (K = 2), leaving
    # 2^-(i + j). The exponent sweep with FTZ off, then on.
    for ftz in (False, True):
        s_bits = _float_bits_exp(rng, fmt, (1, cols), 127)
        v_bits = ((rng.integers(0, 2, size=(1, 254)) << 15) | (np.arange(1, 255) << 7)
                  | rng.integers(0, 128, size=(1, 254)))
        add(view(s_bits, "bf16"), view(v_bits, "bf16"), None, ftz=ftz)
        s_bits = s_bits ^ 0x8000 ^ (1 + np.arange(cols) % 7)
        add(view(s_bits, "bf16"), view(v_bits, "bf16"), None, ftz=ftz, accumulate=True)
    half = np.float16
    j = 1 + np.arange(40) % 10
    scale = np.exp2(np.arange(40) // 10 * 3 - 4)
    for q in range(10):
        i = 1 + (q + np.arange(cols)) % 10
        s = (1 + np.exp2(-i))[None, :].astype(half)
        v = ((1 + np.exp2(-j)) * scale)[None, :].astype(half)
        add(s, v, None, ftz=False)
        s = np.stack([-(1 + np.exp2(-i)), -np.ones(cols)]).astype(half)
        v = np.stack([scale, np.exp2(-j) * scale]).astype(half)
        add(s, v, None, ftz=False, accumulate=True)
    for name in ("bf16", "fp16"):
        fmt = FORMATS[name]
        edges = _exponent_edges(fmt)
        one = int(fmt.bias) << fmt.man_bits                  # 1.0
        for row in range(rows):
            # Stationary: partition row ``row`` alone (the others zero, so no other row's
            # NaN or Inf hides a wrong special), pattern (p + 5 c) at column c in matmul p,
            # times 1, then two normals of the moving type; FTZ off, then on.
            for p in range(2 * len(edges)):
                s_bits = np.zeros((rows, cols), np.int64)
                s_bits[row] = edges[(p + 5 * np.arange(cols)) % len(edges)]
                v_bits = _float_bits_exp(rng, fmt, (rows, n), fmt.bias)
                v_bits[:, 0] = one
                add(view(s_bits, name), view(v_bits, name), None, ftz=p >= len(edges))
            # Moving: every pattern in partition row ``row``'s moving operand (one beat
            # each), the other rows' moving 1.0 times a zero stationary.
            s_bits = np.zeros((rows, cols), np.int64)
            s_bits[row] = _float_bits_exp(rng, fmt, (cols,), fmt.bias)
            s_bits[row, 0] = one
            v_bits = np.full((rows, len(edges)), one, np.int64)
            v_bits[row] = edges
            for ftz in (False, True):
                add(view(s_bits, name), view(v_bits, name), None, ftz=ftz)
    for name in ("bf16", "fp16"):
        fmt = FORMATS[name]
        count = 1 << (fmt.man_bits + 1)                     # sign and fraction
        b = (np.arange(count)[None, :] + 16 * np.arange(rows)[:, None]) % count
        v = ((b >> fmt.man_bits) << (fmt.width - 1)) | (b & ((1 << fmt.man_bits) - 1))
        big = fmt.bias + int(rng.integers(0, fmt.bias // 2 + 1))
        s_bits = _float_bits_exp(rng, fmt, (rows, cols), big)
        for start in range(0, count, 256):             # N <= 256 per matmul
            add(view(s_bits, name), view(v[:, start:start + 256], name), None, ftz=False)
    # BF16 products in FP32's subnormal range (the multiplier rounds them to a subnormal):
    # partition row ``row`` alone, stationary 2^(-63 - c mod 4) at column c, beat b's
    # moving 2^(-87 + b mod 40): product exponents -150 - (c mod 4) + (b mod 40) (the
    # lowest round to zero), random signs and fractions, FTZ off; the other rows'
    # stationary zero adds exact zeros.
    fmt = FORMATS["bf16"]
    for row in range(rows):
        for _ in range(2):
            s_bits = np.zeros((rows, cols), np.int64)
            s_bits[row] = ((rng.integers(0, 2, size=cols) << 15)
                           | ((64 - np.arange(cols) % 4) << 7) | rng.integers(0, 128, size=cols))
            v_bits = ((rng.integers(0, 2, size=(rows, 256)) << 15)
                      | ((40 + np.arange(256) % 40) << 7) | rng.integers(0, 128, size=(rows, 256)))
            add(view(s_bits, "bf16"), view(v_bits, "bf16"), None, ftz=False)
    return items


def _wide_edges():
    """FP32 words (int64 array) for :func:`wide_sweep`: +-0, +-Inf, NaN payloads (quiet,
    signalling, one bit, all bits), every subnormal of one fraction bit and the largest, the
    smallest normal, powers of two across the range (2^-126 .. 2^127), the largest finite
    magnitude, 1 + 2^-i for every fraction bit i, and a few of both signs."""
    words = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
             0x7F800001, 0x7FA00000, 0x7FFFFFFF, 0x007FFFFF, 0x807FFFFF, 0x7F7FFFFF,
             0xFF7FFFFF, 0xBF800000, 0xBFFFFFFF, 0x3FFFFFFF, 0x00800000, 0x80800000}
    words |= {1 << b for b in range(23)}                     # one-bit subnormals
    words |= {e << 23 for e in (1, 0x20, 0x3F, 0x5F, 0x67, 0x7F, 0x98, 0xBF, 0xFE)}
    words |= {0x3F800000 | (1 << b) for b in range(23)}      # 1 + 2^-(23 - b)
    return np.array(sorted(words), np.int64)


def _one_row_items(rows, cols, tests):
    """Items testing one PE row at a time: for each ``(row, s_words, v_words, ftz, s_type,
    m_type)`` of ``tests`` a matmul of K = ``row + 1`` whose stationary row ``row`` holds the
    words ``s_words`` [cols] of type ``s_type`` and moving row ``v_words`` [N] of ``m_type``
    (format names); the rows above hold a stationary 1.0 and a moving +0, so each column's
    sum is row ``row``'s product exactly. Regions of 256 PSUM entries in turn."""
    formats = {**FORMATS, **WIDE_FORMATS}
    regions = PSUM_BANKS * (PSUM_ENTRIES // 256)
    items = []
    for slot, (row, s_words, v_words, ftz, s_type, m_type) in enumerate(tests):
        s_fmt, m_fmt = formats[s_type], formats[m_type]
        one = int(np.array(1.0, np.float32).astype(s_fmt.dtype).view(f"u{s_fmt.width // 8}"))
        s_bits = np.full((row + 1, cols), one, np.int64)
        s_bits[row] = s_words
        v_bits = np.zeros((row + 1, len(v_words)), np.int64)
        v_bits[row] = v_words
        bank, offset = divmod((slot % regions) * 256, PSUM_ENTRIES)
        items.append((s_bits.astype(f"u{s_fmt.width // 8}").view(s_fmt.dtype),
                      v_bits.astype(f"u{m_fmt.width // 8}").view(m_fmt.dtype), False, ftz,
                      bank, offset, None))
    return items


def _rotated(words, first, cols):
    """``words[first], words[first + 1], ...`` for ``cols`` columns, cyclically: the
    stationary row of test ``first`` of a sweep that puts each word at every column."""
    return words[(first + np.arange(cols)) % len(words)]


def _edge_pairs(rows, cols, ftz, s_type, m_type="fp32", s_edges=None, m_edges=None):
    """Tests (as :func:`_one_row_items` takes) multiplying every pair of ``s_edges`` x
    ``m_edges`` (default :func:`_wide_edges`) at every PE: in test ``p`` of a row, column
    ``c`` holds stationary edge ``p + c`` (mod their count) and the moving row all of the
    moving edges."""
    s_edges = _wide_edges() if s_edges is None else s_edges
    m_edges = _wide_edges() if m_edges is None else m_edges
    return [(row, _rotated(s_edges, p, cols), m_edges, ftz, s_type, m_type)
            for row in range(rows) for p in range(len(s_edges))]


def wide_sweep(rng, rows, cols):
    """A directed program for a tile generated with the ``fp32`` type set (items as
    :func:`random_program`'s): every pair of :func:`_wide_edges` (specials, one-bit
    subnormals, the range's edges, ``1 + 2^-i`` for every fraction bit, whose products are
    round-to-even ties) multiplied at every PE, FP32 x FP32 with FTZ off and on, each
    product alone in its column (:func:`_one_row_items`). ``rng`` is not drawn from."""
    return _one_row_items(rows, cols, _edge_pairs(rows, cols, False, "fp32")
                          + _edge_pairs(rows, cols, True, "fp32"))


def wide_rounding_sweep(rng, rows, cols):
    """The second FP32 directed program (the harness holds one of about 64 k beats): every
    pair of :func:`_wide_edges` with a TF32 stationary (its 13 low fraction bits ignored)
    and FTZ off; rounding below the normal range, ``(1 + 2^-i) 2^-63 x (1 + 2^-j)
    2^(-63 - s)`` for every i, j in 1..23 and s in 0..25 (significands with bits only at i,
    j and i + j: ties that round to even at every shift by 1 .. 26); and the
    :func:`lone_sticky_pairs`, whose rounding turns on one sticky bit at each of the
    shifter's positions. ``rng`` is not drawn from."""
    ones = np.array([0x3F800000 | (1 << (23 - i)) for i in range(1, 24)], np.int64)
    ties = [(row, _rotated(ones, first, cols) - (63 << 23), ones - ((63 + shift) << 23),
             False, "fp32", "fp32")
            for shift in range(26) for row in range(rows)
            for first in range(0, len(ones), cols)]
    # Lone sticky bits (lone_sticky_pairs), both operand orders, each pair at every column:
    # column c of test t holds pair t + c and beat c its partner.
    pairs = np.array([(a, b) for a, b, _d in lone_sticky_pairs()], np.int64)
    a = np.concatenate([pairs[:, 0], pairs[:, 1]])
    b = np.concatenate([pairs[:, 1], pairs[:, 0]])
    lone = [(row, _rotated(a, first, cols), _rotated(b, first, cols), False, "fp32", "fp32")
            for row in range(rows) for first in range(len(a))]
    return _one_row_items(rows, cols, _edge_pairs(rows, cols, False, "tf32") + ties + lone)


@functools.cache
def lone_sticky_pairs():
    """FP32 operand pairs whose product rounds on one lone sticky bit, one pair per distance
    ``d`` from the round bit (1 .. 46 where one exists): a list of ``(a, b, d)``, ``a`` and
    ``b`` float32 words (int) whose exact product ``a' b'`` (odd significands below 2^24)
    is ``1 + 2^d`` modulo ``2^(d + 2)``: its lowest set bit is the only sticky bit, the bit
    ``d`` above it the round bit, the one above that (the result's last bit) clear, so
    round-to-nearest-even rounds up only because of that sticky bit. The exponents put the
    round bit where the multiplier rounds: the product lands at FP32's normal/subnormal
    edge or in the subnormal range (a right shift of ``24 - L + d``, ``L`` the product's
    top bit), so every position of the shifter's sticky bits holds the lone one for some
    pair. ``b'`` runs over the odd significands of [2^23, 2^24) and ``a' = (1 + 2^d) /
    b'`` modulo ``2^(d + 2)`` (Newton's inverse on uint64); the first ``a' < 2^24`` is kept."""
    b = np.arange((1 << 23) + 1, 1 << 24, 2, dtype=np.uint64)
    inverse = b.copy()
    for _ in range(6):                  # b * inverse == 1 modulo 2^64 after six steps
        inverse = inverse * (np.uint64(2) - b * inverse)
    pairs = []
    for d in range(1, 48):
        a = (np.uint64(1 + (1 << d)) * inverse) & np.uint64((1 << (d + 2)) - 1)
        found = np.flatnonzero(a < np.uint64(1 << 24))
        if not found.size:
            continue
        a_sig, b_sig = int(a[found[0]]), int(b[found[0]])
        top = (a_sig * b_sig).bit_length() - 1
        if not 0 <= 24 - top + d <= 25:
            continue
        scale = -150 - d        # top binade 2^(top + scale): a right shift of 24 - top + d
        a_exp = scale // 2
        words = np.array([np.ldexp(float(a_sig), a_exp), np.ldexp(float(b_sig), scale - a_exp)],
                         np.float32).view(np.uint32)
        pairs.append((int(words[0]), int(words[1]), d))
    return pairs


def _narrow_edges(fmt):
    """Bit patterns (int64 array) of the 8/16-bit float type ``fmt`` for
    :data:`EDGE_SWEEPS`: +-0, the all-ones exponent with fraction 0 and 1 (+-Inf and a NaN;
    e4m3fn's largest binade), all bits but the sign (a NaN), the smallest normal, +-1.0 and
    every subnormal of one fraction bit, of both signs."""
    sign = 1 << (fmt.width - 1)
    top = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    words = {0, top, top | 1, sign - 1, 1 << fmt.man_bits, fmt.bias << fmt.man_bits}
    words |= {1 << i for i in range(fmt.man_bits)}
    words |= {w | sign for w in words}
    return np.array(sorted(words), np.int64)


def _narrow_edge_program(rows, cols, widths):
    """Every pair of :func:`_narrow_edges` of every float type pair the tile takes whose
    stationary type is ``widths`` bits wide, at every PE (:func:`_edge_pairs`), FTZ off."""
    names = [name for name, fmt in FORMATS.items() if fmt.is_float]
    tests = []
    for s_type in names:
        if FORMATS[s_type].width != widths:
            continue
        for m_type in names:
            try:
                operand_formats(FORMATS[s_type].dtype, FORMATS[m_type].dtype)
            except TypeError:
                continue
            tests += _edge_pairs(rows, cols, False, s_type, m_type,
                                 _narrow_edges(FORMATS[s_type]), _narrow_edges(FORMATS[m_type]))
    return _one_row_items(rows, cols, tests)


def edge_sweep_16(rng, rows, cols):
    """A directed program: every pair of 8/16-bit float edge words (:func:`_narrow_edges`:
    specials, one-bit subnormals, the normal range's edges) with a BF16 or FP16 stationary
    and a moving operand of any float type, multiplied at every PE, each product alone in
    its column (:func:`_one_row_items`), FTZ off: Inf or NaN times a subnormal of one bit
    at each fraction position, which a random draw rarely pairs. ``rng`` is not drawn
    from."""
    return _narrow_edge_program(rows, cols, 16)


def edge_sweep_8(rng, rows, cols):
    """:func:`edge_sweep_16` with an FP8 stationary (e4m3, e5m2, e3m4, e4m3fn)."""
    return _narrow_edge_program(rows, cols, 8)


def _mx_edges(dtype):
    """Element codes (uint8 array) of the MX element type ``dtype`` for :func:`mx_edge_sweep`,
    both signs of each: zero, every subnormal of one fraction bit, the smallest normal,
    1.0, the largest finite value and the specials (e5m2: Inf and a NaN; e4m3fn: its NaN;
    e2m1 has none)."""
    info = ml_dtypes.finfo(dtype)
    man, width = int(info.nmant), 4 if dtype == MX_ELEMENTS[2] else 8
    largest = int(np.array(float(info.max), dtype).view(np.uint8))
    words = {0, 1 << man, int(np.array(1.0, dtype).view(np.uint8)), largest}
    words |= {1 << i for i in range(man)}
    if dtype == MX_ELEMENTS[1]:
        words |= {largest + 1, largest + 2}             # e5m2: Inf, then a NaN
    elif dtype == MX_ELEMENTS[0]:
        words |= {largest + 1}                          # e4m3fn: S.1111.111, its NaN
    sign = 1 << (width - 1)
    return np.array(sorted(words | {w | sign for w in words}), np.uint8)


def mx_edge_sweep(rng, rows, cols):
    """A directed program for a tile generated with the ``mx`` type set (rows a multiple of
    8): every pair of :func:`_mx_edges` codes, for every element type on each side
    (e4m3fn, e5m2, e2m1), multiplied in each of the four lanes of every PE alone (every
    other element +0, so each column's FP32 sum is that one product with its scales).
    Matmul ``p`` of a lane and partition row puts stationary code ``p + c`` at column ``c``
    and every moving code in turn on the beats, so every PE meets every pair; the row's
    scale group takes the E8M0 edges of :data:`MX_EDGE_SCALES` (the extremes and NaN),
    rotated over the columns and beats, the other groups 2^0. A random draw rarely leaves a
    subnormal product or an Inf alone in its column (the other lanes' larger products
    absorb it). ``rng`` is not drawn from."""
    p = rows - rows % MX_GROUP_ROWS
    regions = PSUM_BANKS * (PSUM_ENTRIES // 256)
    scales = np.array(MX_EDGE_SCALES, np.uint8)
    items = []
    for stype in MX_ELEMENTS:
        for mtype in MX_ELEMENTS:
            s_edges, m_edges = _mx_edges(stype), _mx_edges(mtype)
            n = len(m_edges)
            for lane in range(4):
                for row in range(p):
                    for first in range(len(s_edges)):
                        s = np.zeros((p, cols, 4), np.uint8)
                        v = np.zeros((p, n, 4), np.uint8)
                        s[row, :, lane] = _rotated(s_edges, first, cols)
                        v[row, :, lane] = m_edges
                        s_scale = np.full((p // MX_GROUP_ROWS, cols), 127, np.uint8)
                        m_scale = np.full((p // MX_GROUP_ROWS, n), 127, np.uint8)
                        s_scale[row // MX_GROUP_ROWS] = _rotated(scales, first + lane, cols)
                        m_scale[row // MX_GROUP_ROWS] = _rotated(scales, row, n)
                        bank, offset = divmod((len(items) % regions) * 256, PSUM_ENTRIES)
                        items.append(MatmulMx(s.view(stype), v.view(mtype), s_scale, m_scale,
                                              bank=bank, offset=offset))
    return items


#: The 8/16-bit edge-pair programs, in the order the mutation kill-set runs them.
EDGE_SWEEPS = (edge_sweep_16, edge_sweep_8)
#: The MX directed programs (a tile generated with ``mx``, rows a multiple of 8).
MX_SWEEPS = (mx_edge_sweep,)
#: The FP32 directed programs, in the order the mutation kill-set runs them.
WIDE_SWEEPS = (wide_sweep, wide_rounding_sweep)


def _exponent_edges(fmt):
    """Bit patterns (int64 array) of ``fmt`` at its exponent field's edges: exponent 0,
    all ones, all ones but one bit, and one bit alone, each with fraction 0, 1, the top
    fraction bit alone and all ones, and both signs. A decoder's compare of the exponent
    with 0 or all ones, with one input bit wrong, gives a wrong class on one of them."""
    top = (1 << fmt.exp_bits) - 1
    exps = sorted({0, top} | {top ^ (1 << i) for i in range(fmt.exp_bits)}
                  | {1 << i for i in range(fmt.exp_bits)})
    fracs = sorted({0, 1, 1 << (fmt.man_bits - 1), (1 << fmt.man_bits) - 1})
    return np.array([(sign << (fmt.width - 1)) | (e << fmt.man_bits) | f
                     for sign in (0, 1) for e in exps for f in fracs], np.int64)


#: Moving types paired with a swept stationary FP8 type in single-row matmuls.
FP8_PARTNERS = ("bf16", "e4m3", "e5m2")


def _float_bits_exp(rng, fmt, shape, exponent):
    """Normals of ``fmt`` with biased exponents about ``exponent`` (random sign and
    fraction)."""
    top = (1 << fmt.exp_bits) - 2
    e = np.clip(exponent + rng.integers(-2, 3, size=shape), 1, top)
    return ((rng.integers(0, 2, size=shape) << (fmt.width - 1)) | (e << fmt.man_bits)
            | rng.integers(0, 1 << fmt.man_bits, size=shape))


@dataclass
class ProgramReport(HarnessRun):
    """What one fuzzed program did and whether it passed: the harness run's record
    (:class:`~systolica.tb.harness.HarnessRun`: cycles, times, beats, words, errors) with
    the program's draw and counts.

    Attributes
    ----------
    index : int
        The program's index under its seed.
    rows, cols : int
        Its tile.
    types : str
        The type set its tile was generated for (``TileConfig.types_name``).
    commands, burst : int
        Commands drawn, and illegal commands of a rejection burst besides them.
    idle, backpressure : float
        The harness's probabilities for the program.
    matmuls, reads : int
        Legal matmuls and READs.
    mx_matmuls : int
        Legal MX matmuls among ``matmuls``.
    rejected : dict of str to int
        Illegal commands by error code (``ERRORS`` names).
    stamps_checked : int
        Cycle stamps compared with the stepped cycle model.
    """

    index: int
    rows: int
    cols: int
    commands: int
    idle: float
    backpressure: float
    burst: int = 0
    matmuls: int = 0
    mx_matmuls: int = 0
    reads: int = 0
    rejected: dict = field(default_factory=dict)
    stamps_checked: int = 0
    types: str = "all"


def _unbuilt(program, item):
    """The Command of matmul ``item`` if the program's tile was not generated for its
    operand types or mode (the tile rejects it: ``TYPE_NOT_BUILT``), else None."""
    s, v, accumulate, ftz, bank, offset = item[:6]
    perf_mode = item[6] if len(item) > 6 else None
    is_transpose = len(item) > 7 and item[7]
    tile = dict(zip(("tile_position", "tile_size"), item[8:10], strict=False))
    stype, mtype = operand_formats(s.dtype, v.dtype, perf_mode=perf_mode)
    model = program.model
    if {stype.name, mtype.name} <= set(model.dtypes) and (perf_mode is None
                                                          or model.double_row):
        return None
    return Command("matmul", k=s.shape[0], m=s.shape[1], n=v.shape[1], bank=bank,
                   offset=offset, dtype=stype.name, moving_dtype=mtype.name, ftz=bool(ftz),
                   accumulate=bool(accumulate), perf_mode=perf_mode,
                   is_transpose=bool(is_transpose), **tile)


def _submit(program, items):
    """Hand ``items`` (see :func:`random_program`) to a BulkProgram in program order; a
    matmul of a type the tile was not generated for goes as the illegal command it is."""
    batch = []
    for item in items:
        if isinstance(item, MatmulMx):
            if batch:
                program.submit_many(batch)
                batch = []
            command = item.command()
            if program.mx:
                program.submit_mx(item.stationary, item.moving, item.stationary_scale,
                                  item.moving_scale, accumulate=item.accumulate,
                                  bank=item.bank, offset=item.offset,
                                  tile_position=item.tile_position, tile_size=item.tile_size,
                                  dst_dtype=command.dst_dtype, rounding=command.rounding,
                                  seed=command.seed)
            else:
                program.submit_command(command)
            continue
        command = item if isinstance(item, Command) else _unbuilt(program, item)
        if command is not None:
            if batch:
                program.submit_many(batch)
                batch = []
            program.submit_command(command)
        else:
            batch.append(item)
    if batch:
        program.submit_many(batch)


def program_config(index, sizes=SIZES, types="all"):
    """The :class:`~systolica.hdl.config.TileConfig` of program ``index``: the programs take
    every size of ``sizes`` in turn with the first type set of ``types`` (see
    :func:`type_sets`), then every size with the second, and so on; one type set gives
    ``sizes[index % len(sizes)]`` as before.

    Raises
    ------
    ValueError
        If the size or the type set is bad (TileConfig's message).
    """
    sets = type_sets(types)
    turn = index % (len(sizes) * len(sets))
    return TileConfig(*sizes[turn % len(sizes)], sets[turn // len(sizes)])


def run_program_index(seed, index, *, chunk=CHUNK, sizes=SIZES, simulator="verilator",
                      build_root=None, keep=False, tile=None, plusargs=(), dense=0.0,
                      sample=None, burst=None, floats=0.0, directed=None, types="all"):
    """Generate, run and check program ``index`` of ``seed``; return a :class:`ProgramReport`.

    The program's tile is :func:`program_config` (its turn of ``sizes`` and of the type
    sets of ``types``); the random programs draw every type, and those outside its type set
    are sent as the illegal commands they are on that tile (``TYPE_NOT_BUILT``): TF32/FP32
    commands (:func:`wide_item`) replace :data:`WIDE_SHARE` of the legal matmuls on a tile
    generated with ``fp32``, :data:`UNBUILT_WIDE_SHARE` on one without.

    ``tile``: a harness :class:`~systolica.sim.builder.runner.Build` to run on instead of building
    one (its configuration must be the program's, size and type set, else ``ValueError``;
    the mutation runner passes its mutant build), and
    ``plusargs`` extra simulator arguments for it; ``dense`` and ``floats`` see
    :func:`random_program`. ``directed``: a function ``(rng, rows, cols)`` returning the
    program's items (such as :func:`pattern_sweep`) instead of a random program; ``chunk``
    is then not used.
    ``sample``: called as ``sample(report, records, operands, predicted)`` after the check
    (the functional coverage's :func:`systolica.verif.coverage.sample_program`
    samples the program into its database). ``burst``: see :func:`random_program`.
    """
    from systolica.sim.builder.runner import build
    from systolica.tb.bulk import BulkProgram
    from systolica.tb.harness import harness_depth_for, run_harness

    rng = np.random.default_rng([seed, index])
    # The second generator fills what the tile must ignore (READ fields, stationary lanes
    # >= M, INT8 lanes' high bytes) and adds edge operands and rejection bursts.
    noise = np.random.default_rng([seed, index, 1])
    config = program_config(index, sizes, types)
    rows, cols = config.rows, config.cols
    # Every level in every four programs, the pairs varying from one four to the next.
    backpressure = BACKPRESSURE[index % len(BACKPRESSURE)]
    idle = ((0.0, *IDLE)[(index + index // 4) % (len(IDLE) + 1)])
    if directed is None:
        # The third generator draws the TF32/FP32 commands (legal on an fp32 tile, else
        # TYPE_NOT_BUILT), leaving the other two generators' draws as they were.
        wide = np.random.default_rng([seed, index, 2])
        mx = np.random.default_rng([seed, index, 3])      # the fourth: MX matmuls
        items = random_program(rng, rows, cols, chunk, dense, noise, burst, floats, wide,
                               WIDE_SHARE if config.wide else UNBUILT_WIDE_SHARE, mx,
                               MX_SHARE if config.mx else UNBUILT_MX_SHARE,
                               across=config.mx)
        counts = {"commands": chunk, "burst": len(items) - chunk}
    else:
        items = directed(rng, rows, cols)
        counts = {"commands": len(items), "burst": 0}
    if tile is not None and tile.config != config:
        raise ValueError(f"the build passed as tile is a {tile.config.describe()}, program "
                         f"{index} runs on a {config.describe()}; pass the build's size as "
                         f"sizes and its type set as types")
    program = BulkProgram(config, noise=noise)
    _submit(program, items)
    records = program.model.records
    if tile is None:
        tile = build(config, simulator, build_root=build_root,
                     harness_depth=harness_depth_for(program, simulator))
    runs = tile.directory / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"fuzz{os.getpid()}_{index}_", dir=runs))
    sim_seed = int(rng.integers(1, 1 << 31))
    run = run_harness(program, tile, run_dir, seed=sim_seed, idle=idle,
                      backpressure=backpressure, plusargs=plusargs)
    report = ProgramReport(index, rows, cols, types=config.types_name, idle=idle,
                           backpressure=backpressure, **counts,
                           **{f.name: getattr(run, f.name)
                              for f in dataclasses.fields(HarnessRun)})
    for r in records:
        if r.error is not None:
            report.rejected[r.error] = report.rejected.get(r.error, 0) + 1
        elif r.op == "matmul":
            report.matmuls += 1
            report.mx_matmuls += r.command.mx
        else:
            report.reads += 1
    errors = report.errors
    if not report.checked:
        return report       # the run failed or its results are unreadable: nothing checked
    board = program.scoreboard
    for mismatch in board.mismatches[:5]:
        errors.append(f"wrong word: {mismatch}")
    if len(board.mismatches) > 5:
        errors.append(f"... {len(board.mismatches)} wrong words in all")
    _check_accounting(records, errors)
    patterns = HarnessPatterns(sim_seed, level(idle), level(backpressure))
    predicted = command_schedule(rows, cols, [r.command for r in records],
                                 result_ready=patterns.ready, offer=patterns.offer,
                                 banks=config.psum_banks, entries=config.psum_entries,
                                 dtypes=config.dtypes, double_row=config.double_row,
                                 mx=config.mx)
    report.stamps_checked = _compare_stamps(records, predicted, errors)
    if sample is not None:
        operands = {i: ((item.stationary_scale, item.moving_scale) if isinstance(item, MatmulMx)
                        else item[:2]) for i, item in enumerate(items)
                    if not isinstance(item, Command)}
        sample(report, records, operands, predicted)
    if report.passed and not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    elif not report.passed:
        errors.append(f"run folder kept: {run_dir}")
    return report


def _check_accounting(records, errors):
    for r in records:
        if r.accept is None:
            errors.append(f"command {r.index} ({r.command}) has no accept stamp")
        beats = len(r.result_cycles)
        want = 0 if r.error is not None else r.n
        if beats != want:
            errors.append(f"command {r.index} ({r.command}, error {r.error}): {beats} result "
                          f"beats, expected {want}")


def _compare_stamps(records, predicted, errors, limit=5):
    checked = bad = 0
    for r, p in zip(records, predicted, strict=True):
        pairs = [("accept", [r.accept], [p.accept]), ("results", r.result_cycles, p.results)]
        if r.op == "matmul" and r.error is None:
            pairs.append(("moving beats", r.issues, p.issues))
        for what, got, want in pairs:
            checked += len(want)
            if list(got) != list(want):
                bad += 1
                if bad <= limit:
                    first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False))
                                  if a != b), min(len(got), len(want)))
                    errors.append(f"command {r.index} ({r.command}): {what} stamp {first} is "
                                  f"{list(got)[first:first + 1]}, the cycle model says "
                                  f"{list(want)[first:first + 1]}")
    if bad > limit:
        errors.append(f"... {bad} stamp sequences differ from the cycle model in all")
    return checked


def replay_command(seed, index, chunk, sizes=SIZES, types=TYPES):
    """The command line that runs program ``index`` of ``seed`` alone, keeping its files."""
    names = TYPE_SET_SEPARATOR.join(TileConfig(1, 1, t).types_name for t in type_sets(types))
    return (f"{sys.executable} -m systolica fuzz --seed {seed} --program {index} "
            f"--chunk {chunk} --sizes {','.join(f'{r}x{c}' for r, c in sizes)} "
            f"--types {names} --keep")


def fuzz(seed, commands, *, chunk=CHUNK, sizes=SIZES, simulator="verilator", build_root=None,
         programs=None, keep=False, out=print, sample=None, types=TYPES):
    """Run ``commands`` fuzzed commands (in programs of ``chunk``); return the reports.
    ``sample``: see :func:`run_program_index`; ``types``: the type sets the programs' tiles
    take in turn (:func:`program_config`; default :data:`TYPES`).

    Raises
    ------
    ValueError
        If a size of ``sizes`` or a type set of ``types`` is bad (TileConfig's message),
        before anything runs.
    """
    for rows, cols in sizes:
        for name in type_sets(types):
            TileConfig(rows, cols, name)
    if programs is None:
        programs = range(max(1, -(-commands // chunk)))
    reports = []
    started = time.perf_counter()
    for index in programs:
        size = min(chunk, commands - index * chunk) if commands else chunk
        report = run_program_index(seed, index, chunk=max(1, size), sizes=sizes,
                                   simulator=simulator, build_root=build_root, keep=keep,
                                   sample=sample, types=types)
        reports.append(report)
        rejected = sum(report.rejected.values())
        out(f"program {index}: {report.rows}x{report.cols} {report.types} idle "
            f"{report.idle:.1f} bp {report.backpressure:.1f}: {report.commands} commands"
            + (f" + a burst of {report.burst} illegal" if report.burst else "")
            + f" ({report.matmuls} matmuls, "
            f"{report.reads} reads, {rejected} rejected), {report.words:,} words, "
            f"{report.stamps_checked:,} stamps, {report.cycles:,} cycles: "
            f"{'ok' if report.passed else 'FAILED'}  [{time.perf_counter() - started:.0f} s]")
        for error in report.errors:
            out(f"  {error}")
        if not report.passed:
            out(f"  replay: {replay_command(seed, index, chunk, sizes, types)}")
    return reports


def totals(reports):
    """Sums over the :class:`ProgramReport` s ``reports`` (a dict): ``programs``,
    ``commands`` (plus ``burst``, the illegal commands of rejection bursts), ``matmuls``
    (``mx_matmuls`` of them MX), ``reads``, ``rejected`` (by error code), ``words`` (PSUM
    words checked), ``result_beats``, ``stamps_checked``, ``missing_beats`` and
    ``unexpected_beats`` (what the scoreboards lost or did not expect; 0 and 0 when nothing
    is lost), ``mismatches`` (wrong words), ``cycles`` and ``seconds`` (clock cycles
    simulated and the harness runs' wall time, s) and ``failed_programs`` (indices)."""
    rejected = {}
    for r in reports:
        for name, count in r.rejected.items():
            rejected[name] = rejected.get(name, 0) + count
    out = {"programs": len(reports), "rejected": dict(sorted(rejected.items())),
           "failed_programs": [r.index for r in reports if not r.passed]}
    for name in ("commands", "burst", "matmuls", "mx_matmuls", "reads", "words", "result_beats",
                 "stamps_checked", "missing_beats", "unexpected_beats", "mismatches",
                 "cycles"):
        out[name] = sum(getattr(r, name) for r in reports)
    out["seconds"] = round(sum(r.seconds for r in reports), 1)
    return out


def _harness_time(reports, cycles):
    """The harness runs' seconds and rate, to the precision they have: "0.0031 s of harness
    runs (182,000 cycles/s)" (three significant figures, whole seconds from 100 s), or
    "under 1 ms of harness runs" (no rate from a zero)."""
    harness = sum(r.seconds for r in reports)
    if harness < 1e-3:
        return "under 1 ms of harness runs"
    rate = float(f"{cycles / harness:.3g}")
    shown = f"{harness:,.0f}" if harness >= 100 else f"{harness:.3g}"
    return f"{shown} s of harness runs ({rate:,.0f} cycles/s)"


def summarize(reports, seconds):
    t = totals(reports)
    lines = [
        f"commands   {t['commands']:,} in {t['programs']} programs on tiles "
        f"{', '.join(sorted({f'{r.rows}x{r.cols} ({r.types})' for r in reports}))}"
        + (f", plus {t['burst']:,} illegal commands in rejection bursts" if t["burst"] else ""),
        f"matmuls    {t['matmuls']:,}"
        + (f" ({t['mx_matmuls']:,} MX)" if t["mx_matmuls"] else "")
        + f"; reads {t['reads']:,}"
        f"; rejected {sum(t['rejected'].values()):,} ("
        + ", ".join(f"{k} {v:,}" for k, v in t["rejected"].items()) + ")",
        f"checked    {t['words']:,} PSUM words, {t['result_beats']:,} result beats, "
        f"{t['stamps_checked']:,} stamps against the cycle model",
        f"lost       {t['missing_beats']:,} result beats ({t['unexpected_beats']:,} "
        f"unexpected); failed programs: {t['failed_programs'] or 'none'}",
        f"time       {seconds:.0f} s; {t['cycles']:,} cycles simulated in "
        f"{_harness_time(reports, t['cycles'])}",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = OneLineParser(prog="systolica fuzz",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=integer(0), default=1,
                        help="seed of the programs (default %(default)s)")
    parser.add_argument("--commands", type=integer(1), default=None,
                        help="commands in all (default 100000; not with --program, whose "
                             "count follows from the index and --chunk)")
    parser.add_argument("--chunk", type=integer(1), default=CHUNK,
                        help="commands per program (default %(default)s)")
    parser.add_argument("--program", type=integer(0), action="append",
                        help="run only this program index (replay); repeatable")
    parser.add_argument("--sizes", type=tile_sizes(),
                        default=",".join(f"{r}x{c}" for r, c in SIZES),
                        help="tile sizes, one per program in turn (default %(default)s)")
    parser.add_argument("--types", default=TYPES,
                        help="type set the tiles are generated for (int8, bf16, fp16, fp8, "
                             "fp8-double-row, fp32, mx (MX matmuls; tiles of 8 rows or more), "
                             "all (every set but fp32 and mx); joined with + "
                             f"or ,), or several separated by {TYPE_SET_SEPARATOR}: the "
                             "programs take every size with the first, then every size with "
                             "the next, in turn; matmuls of other types go as the illegal "
                             "commands they are (default %(default)s: the 8/16-bit types on "
                             "16-bit lanes, then with TF32/FP32 on 32-bit lanes)")
    parser.add_argument("--sim", default="verilator", choices=("verilator", "icarus"),
                        help="simulator (default %(default)s)")
    parser.add_argument("--build-dir", type=folder, default=None,
                        help="build folder (default: $SYSTOLICA_BUILD_DIR or the "
                             "checkout's build/)")
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    parser.add_argument("--write", metavar="FILE", default=None,
                        help="also write the run's options, totals, time and the machine's "
                             "1-minute load average (at the start and the end) as JSON to "
                             "FILE, for 'systolica docs-table fuzz FILE'")
    add_json_argument(parser, "the totals and every program's report")
    args = parser.parse_args(argv)
    if args.program and args.commands is not None:
        parser.error("--commands and --program conflict: a replayed program's commands "
                     "follow from its index and --chunk; allowed: one of them")
    try:        # TileConfig checks every size and type set before anything runs
        for name in type_sets(args.types):
            for rows, cols in args.sizes:
                TileConfig(rows, cols, name)
    except ValueError as error:
        parser.error(str(error))
    commands = 100_000 if args.commands is None else args.commands
    if args.program:
        commands = (max(args.program) + 1) * args.chunk
    return report_as_json(args, lambda: _run(args, commands))


def _run(args, commands):
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    reports = fuzz(args.seed, commands, chunk=args.chunk, sizes=args.sizes, simulator=args.sim,
                   build_root=args.build_dir, programs=args.program, keep=args.keep,
                   types=args.types)
    failed = [r for r in reports if not r.passed]
    seconds = round(time.perf_counter() - started, 1)
    print(summarize(reports, seconds))
    print("FAIL" if failed else "PASS: every command accounted for, every word and stamp "
          "checked")
    result = {"seed": args.seed, "passed": not failed, "totals": totals(reports),
              "seconds": seconds,
              "programs": [{**dataclasses.asdict(r), "passed": r.passed} for r in reports]}
    if args.write:
        record = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
                  "seed": args.seed, "sizes": [f"{r}x{c}" for r, c in args.sizes],
                  "types": list(type_sets(args.types)), "chunk": args.chunk,
                  "simulator": args.sim, "cpus": os.cpu_count(), "seconds": seconds,
                  "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
                  "passed": not failed, "totals": totals(reports),
                  "programs": [{k: getattr(r, k) for k in (
                      "index", "rows", "cols", "types", "commands", "burst", "matmuls",
                      "cycles", "seconds")} | {"passed": r.passed} for r in reports]}
        path = Path(args.write)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    return (1 if failed else 0), result

if __name__ == "__main__":
    sys.exit(main())
