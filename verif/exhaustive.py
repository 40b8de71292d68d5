"""Exhaustive and bulk checks of the RTL arithmetic units against the golden model.

``systolica exhaustive`` (``make exhaustive``):

- **multipliers**: the PE's shared float multiplier (:class:`~systolica.hdl.FloatMultiplier`
  with every float type, unit ``float_mul``) on every operand-type pairing it implements
  (any two of bf16, fp16, e4m3, e5m2, e3m4, e4m3fn: 36 pairings; the 16 x 16-bit ones have
  2^32 operand pairs, FP8 x 16-bit 2^24, FP8 x FP8 2^16), and the double-row PE's second,
  FP8-only multiplier (``float_mul_hi``: e4m3 / e5m2, 4 pairings), IEEE and FTZ, against
  the golden decode and product (:func:`golden_products`), bit for bit. A pairing with more
  than ``--full-limit`` pairs per mode is sampled: its special values and ``--rows`` random
  ``a`` values, each against every ``b``;
- **adder**: the RTL FP32 adder (:class:`~systolica.hdl.fp32_add.Fp32Adder`) on
  ``--adder-pairs`` random operand pairs per mode (default 10^9; mixed distributions that
  make the operands' exponents close, far, subnormal and special) plus a directed grid of
  every exponent difference x rounding class x effective operation, IEEE and FTZ, against
  :func:`~systolica.golden.bf16.fp32_add`.

Each unit is verilated alone inside a generated C++ harness (:func:`harness_source`) that
never wakes Python per pair: in ``grid`` mode it sweeps one operand port over a range and the
other over all its values and writes the outputs as a binary stream; in ``list`` mode it
reads operand pairs from stdin in blocks. Python computes the golden results of the same
block with numpy and compares whole arrays. The harness is generated from a
:class:`UnitSpec` (the component, its two operand ports, its mode ports and its output).

``--write`` records the run in a results file (``verif/results/exhaustive.json``): the
SHA-256 of each unit's generated Verilog (:func:`netlist_hash`), per pairing and mode the
pairs checked, whether all of them or a sample, the mismatches and examples, the date,
commit and run time. ``systolica docs-table exhaustive`` renders it into
``docs/verification.md``, and ``tests/unit/verif/test_verif_exhaustive_netlist.py`` fails
when the hash there is not that of the Verilog ``hdl/`` generates now, unless the block
says STALE.

``--sample`` runs CI's seeded sample. Work is split over ``--jobs`` processes (default: the
cores), with a progress line and an ETA every 5 seconds.
"""

import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from systolica.sim.options import (
    OneLineParser,
    add_json_argument,
    folder,
    integer,
    report_as_json,
)

from .pool import worker_pool

#: Operand pairs per multiplier work item (whole outer rows of all inner values).
MUL_PAIRS_PER_ITEM = 1 << 25
#: Adder pairs per work item.
ADD_PAIRS_PER_ITEM = 1 << 22
#: Where ``--write`` puts the results by default (committed; ``systolica docs-table
#: exhaustive`` renders it into docs/verification.md).
RESULTS = Path(__file__).resolve().parent / "results" / "exhaustive.json"


@dataclass(frozen=True)
class UnitSpec:
    """A combinational unit for the harness: ``make()`` builds the Amaranth component;
    ``operands`` are its two operand ports (name, width), ``modes`` its mode input ports
    (the harness sets them from its command line), ``output`` its result port (name,
    width); ``source`` says which hdl/ object it is (for the results file)."""

    name: str
    make: object
    operands: tuple
    modes: tuple
    output: tuple
    source: str = ""


def _multiplier():
    from systolica.hdl import FloatMultiplier

    return FloatMultiplier()


def _multiplier_hi():
    from systolica.hdl import FloatMultiplier
    from systolica.hdl.float_mul import DOUBLE_ROW_DTYPES

    return FloatMultiplier(DOUBLE_ROW_DTYPES)


def _adder():
    from systolica.hdl.fp32_add import Fp32Adder

    return Fp32Adder()


_MUL_PORTS = dict(operands=(("a", 16), ("b", 16)), modes=("a_type", "b_type", "ftz"),
                  output=("product", 32))
#: The PE's shared float multiplier (every float type; ``a`` is the moving operand in the PE,
#: ``b`` the stationary one).
MULTIPLIER = UnitSpec("float_mul", _multiplier, **_MUL_PORTS,
                      source="hdl/float_mul.py FloatMultiplier() (PE submodule multiplier)")
#: The double-row PE's second multiplier (FP8 e4m3 / e5m2 only; bits [15:8] of each operand).
MULTIPLIER_HI = UnitSpec("float_mul_hi", _multiplier_hi, **_MUL_PORTS,
                         source="hdl/float_mul.py FloatMultiplier(DOUBLE_ROW_DTYPES) "
                                "(PE submodule multiplier_hi)")
#: The PE / PSUM FP32 adder.
ADDER = UnitSpec("fp32_add", _adder, (("a", 32), ("b", 32)), ("ftz",), ("sum", 32),
                 source="hdl/fp32_add.py Fp32Adder()")
UNITS = (MULTIPLIER, MULTIPLIER_HI, ADDER)


def unit_verilog(spec):
    """The unit's Verilog (str) as hdl/ generates it now: top module ``dut``, no source
    locations (so the text depends on the RTL, not on the checkout's path or line numbers)."""
    from amaranth.back import verilog

    return verilog.convert(spec.make(), name="dut", emit_src=False)


def netlist_hash(spec):
    """SHA-256 (64 hex digits) of :func:`unit_verilog`: the figure a results file is
    stamped with."""
    return hashlib.sha256(unit_verilog(spec).encode()).hexdigest()


# ------------------------------------------------------------------------------------------
# Multiplier pairings


@dataclass(frozen=True)
class Pairing:
    """One operand-type pair of a multiplier: ``a`` (outer, moving) x ``b`` (inner,
    stationary) by their golden names (``"bf16"``, ``"e4m3"``)."""

    unit: UnitSpec
    a: str
    b: str

    @property
    def label(self):
        return f"{self.unit.name} {self.a} x {self.b}"

    def widths(self):
        """Bits of the ``a`` and ``b`` operand types (int, int)."""
        from systolica.golden.formats import FORMATS

        return FORMATS[self.a].width, FORMATS[self.b].width

    @property
    def space(self):
        """Operand pairs of one mode (int): every ``a`` pattern x every ``b`` pattern."""
        wa, wb = self.widths()
        return 1 << (wa + wb)


def pairings():
    """Every pairing the RTL implements (list of :class:`Pairing`): any two of the float
    types on the shared multiplier (``golden.formats.operand_formats``: any 8/16-bit float
    type pairs with any other), and any two of e4m3 / e5m2 on the double-row one."""
    from systolica.golden.formats import DOUBLE_ROW_TYPES, FORMATS

    floats = [name for name, f in FORMATS.items() if f.is_float]
    out = [Pairing(MULTIPLIER, a, b) for a in floats for b in floats]
    out += [Pairing(MULTIPLIER_HI, a, b) for a in DOUBLE_ROW_TYPES for b in DOUBLE_ROW_TYPES]
    return out


def special_values(name):
    """Bit patterns of type ``name`` at every class boundary (list of int): +-0, the
    smallest and largest subnormal, the smallest normal, +-1, the largest finite, +-Inf and
    NaNs (e4m3fn: its one NaN and the all-ones finite values beside it)."""
    from systolica.golden.formats import FORMATS

    f = FORMATS[name]
    sign, top = 1 << (f.width - 1), (1 << f.exp_bits) - 1
    values = [0, 1, (1 << f.man_bits) - 1, 1 << f.man_bits, f.bias << f.man_bits,
              (top << f.man_bits) - 1, top << f.man_bits, (top << f.man_bits) | 1,
              (top << f.man_bits) | ((1 << f.man_bits) - 1),
              (top << f.man_bits) | (1 << (f.man_bits - 1))]
    return sorted({v | s for v in values for s in (0, sign)})


def outer_rows(pairing, *, full_limit, sample_rows, seed, special_rows=None):
    """``a`` operand values to sweep against every ``b`` (sorted int array): all of them
    when the pairing has at most ``full_limit`` pairs per mode, else the special values of
    :func:`special_values` (``special_rows`` of them, seeded, when given) and
    ``sample_rows`` seeded random ones."""
    wa, _ = pairing.widths()
    if pairing.space <= full_limit:
        return np.arange(1 << wa)
    rng = np.random.default_rng([seed, 32, *(ord(c) for c in pairing.label)])
    specials = special_values(pairing.a)
    if special_rows is not None:
        specials = rng.choice(specials, min(special_rows, len(specials)), replace=False)
    rows = {int(v) for v in specials} | {int(v) for v in rng.integers(0, 1 << wa,
                                                                      sample_rows)}
    return np.array(sorted(rows))


def _ctype(width):
    return "uint32_t" if width <= 32 else "uint64_t"


def harness_source(spec):
    """C++ source of the Verilator harness for ``spec`` (top module ``dut``).

    ``harness grid START COUNT INNER MODES...`` sweeps the first operand over ``START ..
    START + COUNT - 1`` and, for each, the second over ``0 .. INNER - 1``; ``harness list
    MODES...`` reads operand pairs from stdin. Outputs go to stdout as a binary stream."""
    (a, a_width), (b, b_width) = spec.operands
    out, out_width = spec.output
    modes = "".join(f"    top->{name} = strtoul(argv[first + {i}], nullptr, 0);\n"
                    for i, name in enumerate(spec.modes))
    t_out = _ctype(out_width)
    return f"""// Generated by systolica.verif.exhaustive for {spec.name}: do not edit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "Vdut.h"
#include "verilated.h"

int main(int argc, char** argv) {{
    if (argc < 2) {{
        fprintf(stderr, "usage: grid START COUNT INNER MODES... | list MODES...\\n");
        return 2;
    }}
    VerilatedContext* ctx = new VerilatedContext;
    Vdut* top = new Vdut{{ctx}};
    bool grid = strcmp(argv[1], "grid") == 0;
    int first = grid ? 5 : 2;
    if (argc < first + {len(spec.modes)}) {{ fprintf(stderr, "missing mode values\\n"); return 2; }}
{modes}    const size_t block = 1 << 16;
    std::vector<{t_out}> outs(block);
    if (grid) {{
        uint64_t start = strtoull(argv[2], nullptr, 0), count = strtoull(argv[3], nullptr, 0);
        const uint64_t inner = strtoull(argv[4], nullptr, 0);
        if (inner > (1ull << {b_width})) {{ fprintf(stderr, "INNER too large\\n"); return 2; }}
        size_t n = 0;
        for (uint64_t x = start; x < start + count; ++x) {{
            top->{a} = x;
            for (uint64_t y = 0; y < inner; ++y) {{
                top->{b} = y;
                top->eval();
                outs[n++] = top->{out};
                if (n == block) {{ fwrite(outs.data(), sizeof({t_out}), n, stdout); n = 0; }}
            }}
        }}
        if (n) fwrite(outs.data(), sizeof({t_out}), n, stdout);
    }} else {{
        std::vector<{_ctype(max(a_width, b_width))}> ins(2 * block);
        size_t got;
        while ((got = fread(ins.data(), sizeof(ins[0]), 2 * block, stdin)) > 0) {{
            size_t pairs = got / 2;
            for (size_t i = 0; i < pairs; ++i) {{
                top->{a} = ins[2 * i];
                top->{b} = ins[2 * i + 1];
                top->eval();
                outs[i] = top->{out};
            }}
            fwrite(outs.data(), sizeof({t_out}), pairs, stdout);
        }}
    }}
    fflush(stdout);
    top->final();
    delete top;
    delete ctx;
    return 0;
}}
"""


def build_harness(spec, build_root=None):
    """Generate the unit's Verilog and build its harness (cached by content); return the
    executable's path."""
    from systolica.sim.builder.runner import build_folder, locked
    from systolica.sim.builder.toolchain import prepare_environment

    prepare_environment("verilator")
    folder = build_folder(build_root) / "exhaustive" / spec.name
    with locked(folder / ".lock"):   # processes sharing the folder build it once
        return _build_harness(spec, folder)


def _build_harness(spec, folder):
    text = unit_verilog(spec)
    source = harness_source(spec)
    exe = folder / "obj" / "harness"
    stamp = folder / "inputs.txt"
    key = f"{hash((text, source)) & 0xFFFFFFFF:08x}"
    if exe.is_file() and stamp.is_file() and stamp.read_text() == text + source:
        return exe
    (folder / "dut.v").write_text(text)
    (folder / "harness.cpp").write_text(source)
    env = dict(os.environ, MAKEFLAGS="CFG_CXXFLAGS_PCH_I=-include")
    command = [shutil.which("verilator") or "verilator", "--cc", "--exe", "--build", "-O3",
               "-Wno-fatal", "--top-module", "dut", "--Mdir", str(folder / "obj"),
               "-o", "harness", "-CFLAGS", "-O2", str(folder / "dut.v"),
               str(folder / "harness.cpp")]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode or not exe.is_file():
        log = folder / "build.log"
        log.write_text(done.stdout + done.stderr)
        raise RuntimeError(f"the {spec.name} harness build failed ({key}); see {log}")
    stamp.write_text(text + source)
    return exe


# ------------------------------------------------------------------------------------------
# Golden side


def golden_products(a_bits, b_bits, a_type, b_type, ftz):
    """Golden FP32 product bits (uint32 array) of operand bit patterns ``a_bits``,
    ``b_bits`` (integer arrays) of the golden types ``a_type``, ``b_type`` (``"bf16"``):
    each decoded exactly (``golden.formats.decode``, FTZ applied to it), multiplied by the
    golden chain with K = 1 (one FP32 rounding, FTZ and NaN rules of ``docs/numerics.md``)."""
    from systolica.golden.bf16 import fp32_chain_batch
    from systolica.golden.formats import FORMATS, decode

    def values(bits, name):
        f = FORMATS[name]
        return decode(np.asarray(bits).astype(f"u{f.width // 8}").view(f.dtype),
                      ftz=bool(ftz)).reshape(-1, 1, 1)

    return fp32_chain_batch(values(a_bits, a_type), values(b_bits, b_type),
                            bool(ftz)).reshape(-1).view(np.uint32)


def golden_sums(a_bits, b_bits, ftz):
    """Golden FP32 sum bits of FP32 operand bit patterns (uint32 array)."""
    from systolica.golden.bf16 import fp32_add

    return fp32_add(a_bits.view(np.float32), b_bits.view(np.float32),
                    ftz=bool(ftz)).view(np.uint32)


def _mismatch_report(a, b, want, got, limit=5):
    bad = np.flatnonzero(want != got)
    return int(bad.size), [(int(a[i]), int(b[i]), int(want[i]), int(got[i]))
                           for i in bad[:limit]]


def multiplier_item(exe, a_type, b_type, ftz, start, count, inner):
    """Check ``a`` operands ``start .. start + count - 1`` x every ``b`` operand ``0 ..
    inner - 1`` of the pairing ``a_type`` x ``b_type`` (golden names); return ``(pairs,
    mismatches, examples)``."""
    from systolica.golden.formats import FORMATS

    done = subprocess.run([str(exe), "grid", str(start), str(count), str(inner),
                           str(FORMATS[a_type].code), str(FORMATS[b_type].code), str(int(ftz))],
                          capture_output=True, check=True)
    got = np.frombuffer(done.stdout, np.uint32)
    a = np.repeat(np.arange(start, start + count, dtype=np.uint32), inner)
    b = np.tile(np.arange(inner, dtype=np.uint32), count)
    if got.size != a.size:
        return a.size, a.size, [("short output", got.size)]
    want = golden_products(a, b, a_type, b_type, ftz)
    return (a.size, *_mismatch_report(a, b, want, got))


def _run_list(exe, modes, a, b):
    """Outputs (uint32 array) of the harness ``exe`` on operand arrays ``a``, ``b`` with the
    mode port values ``modes`` (sequence of int, in the spec's order)."""
    pairs = np.empty(2 * a.size, np.uint32)
    pairs[0::2], pairs[1::2] = a, b
    done = subprocess.run([str(exe), "list", *map(str, map(int, modes))],
                          input=pairs.tobytes(),
                          capture_output=True, check=True)
    return np.frombuffer(done.stdout, np.uint32)


def adder_item(exe, ftz, a, b):
    """Check the adder on operand arrays ``a``, ``b`` (uint32); return ``(pairs,
    mismatches, examples)``."""
    got = _run_list(exe, [ftz], a, b)
    if got.size != a.size:
        return a.size, a.size, [("short output", got.size)]
    return (a.size, *_mismatch_report(a, b, golden_sums(a, b, ftz), got))


def random_fp32_pairs(rng, count):
    """``count`` random FP32 operand pairs (uint32 arrays ``a``, ``b``) from a mix of
    distributions: uniform bits; exponents within a few of each other (alignment and
    rounding); far apart (sticky bits); the subnormal and overflow ends; specials; equal
    magnitudes of opposite sign (cancellation)."""
    a = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    kind = rng.integers(0, 6, count)
    exp_a = (a >> 23) & 0xFF
    # 1: close exponents; 2: difference up to 40; 3: small exponents; 4: near overflow.
    delta = np.where(kind == 1, rng.integers(-3, 4, count), rng.integers(-40, 41, count))
    exp_b = np.clip(exp_a.astype(np.int64) + delta, 0, 255).astype(np.uint32)
    exp_b = np.where(kind == 3, rng.integers(0, 4, count).astype(np.uint32), exp_b)
    exp_a = np.where(kind == 3, rng.integers(0, 4, count).astype(np.uint32), exp_a)
    exp_a = np.where(kind == 4, rng.integers(250, 255, count).astype(np.uint32), exp_a)
    exp_b = np.where(kind == 4, rng.integers(250, 255, count).astype(np.uint32), exp_b)
    shaped = (kind >= 1) & (kind <= 4)
    a = np.where(shaped, (a & 0x807FFFFF) | (exp_a << 23), a)
    b = np.where(shaped, (b & 0x807FFFFF) | (exp_b << 23), b)
    # 5: b = -a, or -a with its last bits changed (cancellation to few bits).
    near = (a ^ 0x80000000) ^ rng.integers(0, 4, count).astype(np.uint32)
    b = np.where(kind == 5, near, b)
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                         0x7F800001, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
                         0xFF7FFFFF], np.uint32)
    pick = rng.random(count) < 0.01
    a[pick] = rng.choice(specials, int(pick.sum()))
    return a, b


#: Rounding classes of an add's exact result relative to the rounded one.
ROUNDING = ("exact", "below half", "tie to even, down", "tie to even, up", "above half")


def rounding_grid(rng, *, max_difference=29, batches=32):
    """Directed FP32 adder operands aimed at every cell of exponent difference
    ``0..max_difference`` x effective operation (add, subtract) x rounding class of
    :data:`ROUNDING`, in the normal and the subnormal exponent range: the smaller operand's
    low bits are set to nothing, a lone top bit (a tie), just below it or just above it.

    Returns ``(a, b, cells)``: the uint32 operand arrays (``batches`` x 2^16 pairs) and
    ``cells[d, op, class]``, how many pairs landed in each cell (classified exactly).
    """
    found_a, found_b = [], []
    cells = np.zeros((max_difference + 1, 2, len(ROUNDING)), np.int64)
    for _ in range(batches):
        n = 1 << 16
        d = rng.integers(0, max_difference + 1, n)
        sub = rng.integers(0, 2, n).astype(np.uint32)
        low = rng.random(n) < 0.25
        exp_a = np.where(low, rng.integers(1, 4, n), rng.integers(max_difference + 1, 250, n))
        exp_b = np.maximum(exp_a - d, 0)
        # A power of two (or its neighbours) as the larger operand: below it the gap halves.
        frac_a = np.where(rng.random(n) < 0.25, rng.choice([0, 1, (1 << 23) - 1], n),
                          rng.integers(0, 1 << 23, n))
        frac_b = rng.integers(0, 1 << 23, n)
        pattern = rng.integers(0, 4, n)
        shift = np.clip(d, 0, 23)
        low_mask = (1 << shift) - 1
        tie = np.where(shift > 0, 1 << np.maximum(shift - 1, 0), 0)
        bits = np.select([pattern == 0, pattern == 1, pattern == 2], [0, tie, tie - 1], tie + 1)
        frac_b = (frac_b & ~low_mask) | (bits & low_mask)
        sign = rng.integers(0, 2, n).astype(np.uint32) << 31
        a = ((exp_a.astype(np.uint32) << 23) | frac_a.astype(np.uint32)) ^ sign
        b = ((exp_b.astype(np.uint32) << 23) | frac_b.astype(np.uint32) | (sub << 31)) ^ sign
        klass = classify_rounding(a, b)
        d_field = np.abs(((a >> 23) & 0xFF).astype(np.int64)
                         - ((b >> 23) & 0xFF).astype(np.int64))
        ok = (klass >= 0) & (d_field <= max_difference)
        np.add.at(cells, (d_field[ok], sub[ok], klass[ok]), 1)
        found_a.append(a)
        found_b.append(b)
    return np.concatenate(found_a), np.concatenate(found_b), cells


def classify_rounding(a, b):
    """Rounding class (index into :data:`ROUNDING`) of ``a + b`` rounded to FP32, for
    finite operands whose exact sum float64 holds (exponent difference <= 29); -1 else."""
    with np.errstate(all="ignore"):
        fa = a.view(np.float32).astype(np.float64)
        fb = b.view(np.float32).astype(np.float64)
        finite = np.isfinite(fa) & np.isfinite(fb)
        exact = fa + fb                          # exact: 24 + 29 bits fit in 53
        rounded = exact.astype(np.float32)
        r64 = rounded.astype(np.float64)
        err = exact - r64                        # exact too
        ulp = np.abs(np.spacing(rounded).astype(np.float64))
    d = np.abs(((a >> 23) & 0xFF).astype(np.int64) - ((b >> 23) & 0xFF).astype(np.int64))
    k = np.full(a.shape, -1, np.int64)
    valid = finite & (d <= 29) & np.isfinite(rounded)
    even = (rounded.view(np.uint32) & 1) == 0
    k = np.where(valid & (err == 0), 0, k)
    mag = np.abs(err)
    # Rounded toward zero (the discarded part was below half, or a tie kept the smaller
    # neighbour) when the error has the sign of the result.
    toward_zero = np.sign(err) == np.sign(r64)
    # Half the gap on the exact value's side: below a power of two (normal, not the
    # smallest normal exponent) the gap is half the spacing above it.
    bits = rounded.view(np.uint32)
    pow2 = ((bits & 0x7FFFFF) == 0) & (((bits >> 23) & 0xFF) > 1)
    half = np.where(~toward_zero & pow2, ulp / 4, ulp / 2)
    k = np.where(valid & (err != 0) & (mag < half), 1, k)
    tie = valid & (err != 0) & (mag == half) & even
    k = np.where(tie & toward_zero, 2, k)
    k = np.where(tie & ~toward_zero, 3, k)
    k = np.where(valid & (err != 0) & (mag < half) & ~toward_zero, 4, k)
    return k


# ------------------------------------------------------------------------------------------
# Drivers


def _eta(done, total, started):
    elapsed = time.perf_counter() - started
    left = elapsed / done * (total - done) if done else 0.0
    return f"{elapsed:.0f} s elapsed, about {left:.0f} s left"


def check_multipliers(exes, plan, *, jobs=1, out=print):
    """Check multiplier pairings, IEEE and FTZ. ``exes`` maps a unit name to its harness,
    ``plan`` is a list of ``(Pairing, rows)`` (the ``a`` values to sweep against every
    ``b``). Returns ``{label: {mode: (pairs, mismatches, examples)}}``."""
    items = []
    for pairing, rows in plan:
        _, wb = pairing.widths()
        step = max(1, MUL_PAIRS_PER_ITEM >> wb)
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        for ftz in (False, True):
            for run in np.split(np.asarray(rows), breaks):
                for i in range(0, len(run), step):
                    part = run[i:i + step]
                    items.append((pairing, ftz, int(part[0]), len(part), 1 << wb))
    total = sum(count * inner for _, _, _, count, inner in items)
    with worker_pool(jobs) as pool:
        futures = [((p.label, ftz), pool.submit(multiplier_item, exes[p.unit.name], p.a, p.b,
                                                 ftz, start, count, inner))
                   for p, ftz, start, count, inner in items]
        return _gather("multipliers", futures, total, out)


def _gather(unit, futures, total, out):
    """Collect ``((label, ftz), future)`` work items' ``(pairs, mismatches, examples)`` per
    label and mode, with a progress line and an ETA every 5 seconds; return ``{label:
    {mode: (pairs, mismatches, examples)}}``."""
    results = {}
    done, bad_total, started, shown = 0, 0, time.perf_counter(), 0.0
    for (label, ftz), future in futures:
        pairs, bad, examples = future.result()
        entry = results.setdefault(label, {"IEEE": [0, 0, []], "FTZ": [0, 0, []]})
        entry = entry["FTZ" if ftz else "IEEE"]
        entry[0] += pairs
        entry[1] += bad
        entry[2] += examples[: max(0, 5 - len(entry[2]))]
        done += pairs
        bad_total += bad
        if time.perf_counter() - shown > 5 or done == total:
            shown = time.perf_counter()
            out(f"{unit}: {done:,} of {total:,} pairs ({100 * done / total:.1f} %), "
                f"{bad_total} mismatches, {_eta(done, total, started)}")
    return {label: {mode: tuple(v) for mode, v in modes.items()}
            for label, modes in results.items()}


def check_adder(exe, *, pairs, seed, jobs=1, out=print, grid_difference=29):
    """Check the adder on ``pairs`` random pairs and the rounding grid, IEEE and FTZ;
    return ``({"random" | "grid": {mode: (pairs, mismatches, examples)}}, cells)``."""
    rng = np.random.default_rng([seed, 16])
    grid_a, grid_b, cells = rounding_grid(rng, max_difference=grid_difference)
    chunks = max(1, -(-pairs // ADD_PAIRS_PER_ITEM))
    total = 2 * (pairs + grid_a.size)
    with worker_pool(jobs) as pool:
        futures = []
        for ftz in (False, True):
            futures.append((("grid", ftz), pool.submit(adder_item, exe, ftz, grid_a,
                                                         grid_b)))
            for i in range(chunks):
                count = min(ADD_PAIRS_PER_ITEM, pairs - i * ADD_PAIRS_PER_ITEM)
                futures.append((("random", ftz), pool.submit(_random_adder_item, exe, ftz,
                                                             seed, i, count)))
        return _gather("adder", futures, total, out), cells


def _random_adder_item(exe, ftz, seed, index, count):
    a, b = random_fp32_pairs(np.random.default_rng([seed, int(ftz), index]), count)
    return adder_item(exe, ftz, a, b)




def _print_results(results):
    """Print per-label, per-mode counts and first mismatches; return whether any failed."""
    failed = False
    for label, modes in results.items():
        for mode, (pairs, bad, examples) in modes.items():
            failed |= bool(bad)
            if bad:
                print(f"{label} {mode}: {pairs:,} pairs, {bad} MISMATCHES"
                      + "".join(f"\n  a={e[0]:#x} b={e[1]:#x} golden={e[2]:#010x} "
                                f"rtl={e[3]:#010x}" for e in examples if isinstance(e[0], int)))
    return failed


def _entries(results, unit, space_of, coverage_of):
    """Results-file entries (list of dict) of one ``_gather`` result."""
    out = []
    for label, modes in results.items():
        for mode, (pairs, bad, examples) in modes.items():
            out.append({"unit": unit, "pairing": label.removeprefix(f"{unit} "), "mode": mode,
                        "space": space_of(label), "coverage": coverage_of(label),
                        "pairs": int(pairs), "mismatches": int(bad),
                        "examples": [[int(v) for v in e] if isinstance(e[0], int) else
                                     [str(v) for v in e] for e in examples]})
    return out


def _commit():
    """``(short commit, dirty)`` of the checkout: ``dirty`` when the files the run depends
    on (``hdl/``, ``golden/``, this module) differ from the commit; ("0000000", True)
    outside git."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, check=True,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "../hdl", "../golden",
                                Path(__file__).name],
                               cwd=here, check=True, capture_output=True, text=True).stdout
        return commit, bool(dirty.strip())
    except (OSError, subprocess.CalledProcessError):
        return "0000000", True


def main(argv=None):
    parser = OneLineParser(prog="systolica exhaustive",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--unit", choices=("multiplier", "adder", "both"), default="both",
                        help="units to check (default %(default)s; multiplier: both "
                             "multipliers of the PE)")
    parser.add_argument("--full-limit", type=integer(1), default=1 << 32,
                        help="run a pairing fully when it has at most this many pairs per "
                             "mode, else sample it (default %(default)s: all of them)")
    parser.add_argument("--full", metavar="A,B", action="append", default=[],
                        help="also run this float_mul pairing fully whatever its size "
                             "(a x b by golden names, e.g. bf16,bf16; repeatable)")
    parser.add_argument("--rows", type=integer(1), default=24,
                        help="random outer operand values of a sampled pairing, besides its "
                             "special values, each against every inner one "
                             "(default %(default)s)")
    parser.add_argument("--adder-pairs", type=integer(1), default=10**9,
                        help="random FP32 adder pairs per mode (default %(default)s)")
    parser.add_argument("--sample", action="store_true",
                        help="CI's seeded sample: pairings up to 2^16 pairs fully, the others "
                             "on 3 random and 3 special outer values, 2^22 adder pairs "
                             "per mode")
    parser.add_argument("--seed", type=integer(0), default=1,
                        help="seed of the sampled rows and random adder pairs "
                             "(default %(default)s)")
    parser.add_argument("--jobs", type=integer(1), default=os.cpu_count() or 1,
                        help="worker processes (default: the cores, %(default)s)")
    parser.add_argument("--build-dir", type=folder, default=None,
                        help="build folder (default: $SYSTOLICA_BUILD_DIR or the "
                             "checkout's build/)")
    parser.add_argument("--write", metavar="FILE", nargs="?", const=str(RESULTS),
                        help="write the results file (default FILE: verif/results/"
                             "exhaustive.json; render it with 'systolica docs-table "
                             "exhaustive --write docs/verification.md')")
    add_json_argument(parser, "the results file's content")
    args = parser.parse_args(argv)
    args.special_rows = None
    labels = {p.label for p in pairings()}
    for item in args.full:
        if f"float_mul {item.replace(',', ' x ')}" not in labels:
            parser.error(f"argument --full: no float_mul pairing {item!r}; allowed: two of "
                         f"bf16, fp16, e4m3, e5m2, e3m4, e4m3fn separated by a comma")
    if args.sample:
        args.full_limit, args.rows, args.special_rows = 1 << 16, 3, 3
        args.adder_pairs = min(args.adder_pairs, 1 << 22)
    return report_as_json(args, lambda: _run(args))


def _run(args):
    started = time.perf_counter()
    entries, hashes, failed, timing = [], {}, False, {}
    units = []
    if args.unit in ("multiplier", "both"):
        units += [MULTIPLIER, MULTIPLIER_HI]
    if args.unit in ("adder", "both"):
        units.append(ADDER)
    for spec in units:
        hashes[spec.name] = {"sha256": netlist_hash(spec), "source": spec.source}
    if args.unit in ("multiplier", "both"):
        exes = {spec.name: build_harness(spec, args.build_dir)
                for spec in (MULTIPLIER, MULTIPLIER_HI)}
        forced = {f"float_mul {item.replace(',', ' x ')}" for item in args.full}
        plan = [(p, outer_rows(p, full_limit=p.space if p.label in forced else args.full_limit,
                               sample_rows=args.rows, seed=args.seed,
                               special_rows=args.special_rows))
                for p in pairings()]
        by_label = {p.label: (p, rows) for p, rows in plan}
        t0 = time.perf_counter()
        results = check_multipliers(exes, plan, jobs=args.jobs)
        failed |= _print_results(results)
        seconds = round(time.perf_counter() - t0, 1)
        for spec in (MULTIPLIER, MULTIPLIER_HI):
            part = {k: v for k, v in results.items() if by_label[k][0].unit is spec}

            def coverage(label):
                p, rows = by_label[label]
                wa, _ = p.widths()
                if len(rows) == 1 << wa:
                    return "all"
                return f"sample: {len(rows)} of {1 << wa:,} a values x every b"

            entries += _entries(part, spec.name, lambda k: by_label[k][0].space, coverage)
        timing["multipliers"] = {"pairs": sum(v[0] for m in results.values()
                                              for v in m.values()), "seconds": seconds}
        print(f"multipliers: {len(plan)} pairings, {seconds:.0f} s")
    adder = None
    if args.unit in ("adder", "both"):
        exe = build_harness(ADDER, args.build_dir)
        t0 = time.perf_counter()
        results, cells = check_adder(exe, pairs=args.adder_pairs, seed=args.seed,
                                     jobs=args.jobs)
        failed |= _print_results(results)
        seconds = round(time.perf_counter() - t0, 1)
        random_coverage = ("10^9 random" if args.adder_pairs >= 10**9 else
                           f"sample: {args.adder_pairs:,} random (the full run: 10^9)")
        entries += _entries(results, ADDER.name, lambda k: None,
                            lambda k: ("rounding grid" if k.endswith("grid")
                                       else random_coverage))
        timing["adder"] = {"pairs": sum(v[0] for m in results.values() for v in m.values()),
                           "seconds": seconds}
        hit = int((cells > 0).sum())
        unreachable = [f"d={d} {'sub' if o else 'add'} {ROUNDING[c]}"
                       for d, o, c in np.argwhere(cells == 0)]
        adder = {"grid_cells_hit": hit, "grid_cells": int(cells.size),
                 "grid_unreachable": unreachable, "seconds": seconds}
        print(f"adder: rounding grid {hit} of {cells.size} (exponent difference x add/sub x "
              f"rounding class) cells hit, {len(unreachable)} unreachable; {seconds:.0f} s")
    commit, dirty = _commit()
    seconds = round(time.perf_counter() - started, 1)
    result = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
              "commit": commit, "dirty": dirty, "seconds": seconds, "jobs": args.jobs,
              "seed": args.seed, "options": {k: getattr(args, k) for k in (
                  "unit", "full_limit", "full", "rows", "adder_pairs", "sample")},
              "netlists": hashes, "timing": timing, "results": entries,
              "adder_grid": adder,
              "passed": not failed}
    total = sum(e["pairs"] for e in entries)
    print(f"{total:,} pairs in {seconds:.0f} s ({total / max(seconds, 1e-9):,.0f} pairs/s); "
          + ("FAIL" if failed else "PASS: 0 mismatches"))
    if args.write:
        path = Path(args.write)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    return (1 if failed else 0), result


if __name__ == "__main__":
    sys.exit(main())
