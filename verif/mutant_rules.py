"""What names surviving mutants as candidates for the equivalence prover
(:mod:`systolica.verif.equivalence`): the hand arguments (:data:`ARGUED`, keyed by
:func:`fingerprint`), the class rules (:data:`CLASS_RULES`: a class of mutations decided from
the mutation itself) and the structural check (:func:`outside_output_cone`). None of them
counts a mutant as equivalent by itself: only a proof does (:mod:`systolica.verif.mutants`
reports both).
"""

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from systolica.hdl.issue import MODE_LAYOUT
from systolica.sim.builder.generate import TOPLEVEL

from .netlist import OUTPUTS, RtlilCell, RtlilModule, parse_rtlil, run_yosys, sig_bits

#: Survivors argued equivalent by hand, keyed by :func:`fingerprint` (the mutated cell's
#: RTLIL and the mutation, so an entry stops matching when that cell changes): the reason
#: why the mutated value cannot reach an output. docs/mutants.md lists them with the run.
#: For one-off arguments: a class of mutations gets a rule in :data:`CLASS_RULES` instead.
#: The entries below were keyed on the netlist before the tile's component split and match
#: no cell of it (their classes are rules now: lz-stage, hi-subnormal, value-range,
#: constant-compare, unread-bit); they stay as the written arguments until a run re-keys
#: the one-offs among them (the PSUM address bijection, the queue-slot borrow, the
#: beats-left counter).
_LZ = ("a leading_zeros() stage output bit below what is read: with span the power of "
       "two above the counted width (32 for the FP32 adder's 27 bits and the BF16/FP16 "
       "multiplier's 22, 16 for multiplier_hi's 8), stage S's shifted word lz_sS feeds "
       "only the later stages' zero tests, which read its bits >= span + 1 - S, and "
       "nothing else reads an lz_s wire: ")
_HI = ("multiplier_hi's product reaches an output only on double-row beats (pe.py: result = "
       "Mux(hi_in, adder_hi.sum, first)), and its magnitude only when both operands decode "
       "as non-zero finite e4m3 or e5m2: it is FloatMultiplier(DOUBLE_ROW_DTYPES), whose "
       "decoder has no case for another type code (that operand decodes as zero, and the "
       "product is then +-0 or NaN, never magnitude); the interface also refuses any other "
       "double-row pair (golden.operand_formats) and the tile rejects one (DOUBLE_ROW_TYPE): "
       "decoded exponents -6..8 (e4m3) and -14..16 "
       "(e5m2), so exp = a_exp + b_exp + 128 - lz lies in 93..160 (lz <= 7 for a non-zero "
       "product), and the result always takes the exp >= 1 (normal) branch: ")
ARGUED = {
    # ---- leading-zero counter (hdl/fp32_add.py leading_zeros, in the adders and both
    # multipliers) ----------------------------------------------------------------------
    "9497cb9652dc": _LZ + "adder_hi lz_s2[26] (span 32: bit 31 only).",
    "f22947155212": _LZ + "adder_hi lz_s2[27], flipped when lz_s2[28] is 0 (span 32: bit 31 "
                          "only).",
    "7e01655008fd": _LZ + "multiplier lz_s4[15], flipped with lz_s4[31] (span 32: bits >= "
                          "29).",
    "141f28b47f17": _LZ + "multiplier lz_s2[15] (span 32: bit 31 only).",
    "07b8794fe926": _LZ + "multiplier lz_s8[21] (span 32: bits >= 25).",
    "b95c6f8cb746": _LZ + "multiplier lz_s2[7] (span 32: bit 31 only).",
    # ---- multiplier_hi (the FP8 double-row product) -----------------------------------
    "da476f92a270": _HI + "wide[17] inverted only feeds round_up and tiny, read on the "
                          "subnormal branch alone.",
    "5bb030dc68c0": _HI + "exp >= 1 with exp's bit 4 inverted: 93..160 moved by 16 stays "
                          ">= 1.",
    "d58e54a846fa": _HI + "tiny[2] flipped is read on the subnormal branch alone.",
    "b0efd9871164": _HI + "exp >= 255 with exp's bit 5 flipped when bit 8 is set: bit 8 is "
                          "clear for 93..160.",
    "24ce53788f22": _HI + "exp's bit 0 flipped when bit 9 is set: bit 9 is clear for "
                          "93..160.",
    "3f938e2620c0": _HI + "the FTZ flush of a tiny product (ftz read as 0) is on the "
                          "subnormal branch alone.",
    # ---- bits a cell computes that nothing reads ---------------------------------------
    "c923377db884": "bit 11 of the constant 26 in right = Mux(exp < -24, 26, 1 - exp) "
                    "(multiplier_hi): the 13-bit mux's bits 5..12 go to $71, which nothing "
                    "reads (right is 5 bits), so right is unchanged",
    "3a470bcba5e9": "bit 29 of prod << lz (multiplier): the shift's bits 22 and up go to "
                    "$173, which nothing reads (sig takes bits 0..21), so sig is unchanged",
    "58accd354834": "bit 8 of diff = l_exp[7:0] - s_exp[7:0] (the borrow) forced 0: L is "
                    "the operand of larger magnitude, so l_exp >= s_exp (both 1..255) and "
                    "the borrow is always 0",
    "bd858b4beb2f": "exp >= 255 in the adder with exp's bit 8 read as 0: exp is l_exp + 1 "
                    "(carry out) or l_exp - left with left <= l_exp - 1, l_exp in 1..255, so "
                    "exp <= 255 (bit 8 clear) unless l_exp = 255, i.e. the larger operand is "
                    "Inf or NaN, when the sum is taken from the NaN / Inf branches and "
                    "magnitude is not used",
    "97a31d822043": "e == 0b11111 (an e5m2 exponent's all-ones test, multiplier) with the "
                    "exponent's bit 0 flipped when its bit 4 is 0: an exponent with bit 4 clear "
                    "is not all ones before or after the flip, and one with bit 4 set is not "
                    "changed, so the test's output is the same for every input",
    "82c74f7efcb1": "l_exp - 1 with l_exp's bit 6 read as 0, in left = Mux(lz > l_exp - 1, "
                    "l_exp - 1, lz) (adder): this $sub is only the mux's value (the comparison "
                    "has its own $sub), taken only when lz > l_exp - 1, and lz <= 27, so then "
                    "l_exp <= 27 and its bit 6 is already 0",
    "816651b6cc24": "bit 7 of l_mag flipped when its bit 3 is set, in adder_hi of a partition-"
                    "row-0 PE: its sum reaches an output only on double-row beats, where "
                    "a = first = p0 (row 0 starts the chain with its product) and b = p1 are "
                    "both products of two FP8 operands (e4m3 / e5m2: the interface refuses any "
                    "other double-row pair, golden.operand_formats, and the tile rejects "
                    "one, DOUBLE_ROW_TYPE): at most 4 x 4 = 8 significant bits, so fraction "
                    "bits 0..15 of a finite product are 0 (and of NaN 0x7FC00000 and Inf), "
                    "l_mag's bit 3 is never set and the flip never happens",
    # ---- tile control (written for hdl/tile.py; its logic now lives in command_queue.py
    # (slot), issue.py (beat_left) and result.py (the PSUM address), so these keys match no
    # cell until a mutation run re-keys them) ----------------------------------------
    "2060371ef974": "bit 0 of bank * 512 forced 1 in a command's first PSUM address "
                    "bank * 512 + offset: every address of every command (a matmul's writes "
                    "and accumulate reads, a READ's reads, all taken from beat_addr and "
                    "cur_addr = beat_addr + 1, 12 bits) moves by +1 modulo 4096, a bijection "
                    "of PSUM's 8 x 512 entries (the sum is cut to beat_addr's 12 bits); the "
                    "same entries are written and read in the same order under other names, "
                    "and PSUM starts all zeros, so every READ and accumulate returns what it "
                    "would have",
    "4e0b9e570fa3": "slot = (queued count) - start, bit 1 flipped when bit 3 (the borrow) "
                    "is set: start needs queued[0] (can_start), so the count is >= start "
                    "and the borrow is never set",
    "18c6c00bbbfb": "beat_left's bit 6 flipped when its bit 10 is set: beat_left is used "
                    "(registered into cur_left, last, running, busy, the token's last with "
                    "its valid) only on an issue, when it is cur_left of a running command "
                    "(<= 510) or head.n - 1 of a queued one (<= 511): bit 10 is then clear",
}


# ---- class rules ------------------------------------------------------------------------
# An argument that holds for a whole class of mutations, decided from the mutation itself
# (module kind, the mutated cell's type and connections in design.il, the wire bit it
# touches, the mode): a rule names the class and says why it is equivalent. score_report
# applies every rule to every mutant, killed ones included, and refuses a run in which a
# rule calls a killed mutant equivalent (as for the structural check): that keeps the
# rules honest. One-off arguments stay in ARGUED.

#: Wires of the double-row multiplier that only its below-normal branch reads.
_HI_SUBNORMAL_WIRES = ("right", "wide", "round_up", "tiny")


def _hi_subnormal_lines():
    """float_mul.py's lines that compute them (from the branch's comment to ``tiny``'s
    assignment) and the FTZ flush test of that branch, found by their text so that an edit
    above them cannot shift the rule onto other lines; () when the text is not found."""
    lines = (Path(__file__).resolve().parents[1] / "hdl" / "float_mul.py").read_text()
    lines = lines.splitlines()
    try:
        start = next(i for i, t in enumerate(lines, 1)
                     if t.strip().startswith("# Below the normal range"))
        end = next(i for i, t in enumerate(lines, 1) if i > start and "tiny.eq(" in t)
        flush = next(i for i, t in enumerate(lines, 1) if "self.ftz & (tiny" in t)
    except StopIteration:
        return ()
    return (*range(start + 1, end + 1), flush)


_HI_SUBNORMAL_LINES = _hi_subnormal_lines()
#: in_mode's K field (amaranth Field: offset, width) and the fields below it.
_K = MODE_LAYOUT["k"]
_BEFORE_K = [name for name, field in MODE_LAYOUT if field.offset < _K.offset]
_FP32_ADDERS = ("adder", "adder_hi")


@dataclass(frozen=True)
class Site:
    """What the class rules read of one mutation: ``kind`` (the module's last name:
    ``adder`` for PSUM's ``adder_<c>`` too), the PE ``row`` (None outside the array), the
    mutated cell, the mutated port's bits and the wire bits at ``-portbit`` / ``-ctrlbit``."""

    mutation: object    # mutants.Mutation
    kind: str
    row: object
    module: RtlilModule
    cell: RtlilCell
    port: str
    portbit: int
    ctrlbit: object
    bits: tuple         # the mutated port's bits (sig_bits)
    tile_rows: int = 0  # the tile's PE rows (from the module names)

    @property
    def bit(self):
        return self.bits[self.portbit] if self.portbit < len(self.bits) else None

    def port_bits(self, port):
        spec = self.cell.conns.get(port)
        return None if spec is None else sig_bits(spec, self.module.wires)


def _tile_rows(modules):
    return 1 + max((int(r) for r in re.findall(r"\.pe_(\d+)_\d+$", "\n".join(modules),
                                                re.M)), default=-1)


def site_of(mutation, modules):
    """The :class:`Site` of ``mutation`` in ``modules`` (:func:`parse_rtlil`), or None when
    it is not a single port bit of an internal cell."""
    port = re.search(r"-port (\S+) -portbit (\d+)", mutation.args)
    module = modules.get(mutation.module)
    if port is None or module is None:
        return None
    cell = module.cells.get(mutation.cell.lstrip("\\"))
    if cell is None or not cell.type.startswith("$") or port.group(1) not in cell.conns:
        return None
    path = mutation.module.split(".")
    kind = re.sub(r"^adder_\d+$", "adder", path[-1])
    pe = re.fullmatch(r"pe_(\d+)_(\d+)", path[-2]) if len(path) > 1 else None
    ctrl = re.search(r"-ctrlbit (\d+)", mutation.args)
    return Site(mutation, kind, int(pe.group(1)) if pe else None, module, cell,
                port.group(1), int(port.group(2)), int(ctrl.group(1)) if ctrl else None,
                tuple(sig_bits(cell.conns[port.group(1)], module.wires)), _tile_rows(modules))


def _mutate_bit(mode, value, ctrl):
    """A port bit's value under mutation ``mode`` (``ctrl``: the control bit's value)."""
    return {"inv": 1 - value, "const0": 0, "const1": 1, "cnot0": value ^ (1 - ctrl),
            "cnot1": value ^ ctrl}[mode]


def _wire_name(bit):
    return bit[0].lstrip("\\") if isinstance(bit, tuple) else None


def _lz_stage(site):
    """The lz_sS word's unread low bits (see the rule's argument)."""
    if site.kind not in (*_FP32_ADDERS, "multiplier", "multiplier_hi"):
        return None
    if site.cell.type != "$mux" or site.port not in ("A", "B", "Y"):
        return None
    out = site.port_bits("Y")
    if site.portbit >= len(out) or not isinstance(out[site.portbit], tuple):
        return None
    wire, bit = out[site.portbit]
    stage = re.fullmatch(r"\\lz_s(\d+)", wire)
    if stage is None:
        return None
    step, span = int(stage.group(1)), site.module.wires[wire]
    if bit >= span + 1 - step:
        return None
    return f"{site.kind} lz_s{step}[{bit}] (span {span}: bits >= {span + 1 - step} are read)"


_REDUCE_CONST = {"$reduce_or": "0", "$reduce_bool": "0", "$logic_not": "0",
                 "$reduce_and": "1"}


def _constant_compare(site):
    """A flip under a control bit that already decides a compare against a constant."""
    mode, ctrl = site.mutation.mode, site.ctrlbit
    if mode not in ("cnot0", "cnot1") or ctrl is None or ctrl == site.portbit:
        return None
    if site.cell.type in _REDUCE_CONST and site.port == "A":
        constant = _REDUCE_CONST[site.cell.type]
    elif site.cell.type in ("$eq", "$ne") and site.port in ("A", "B"):
        other = site.port_bits("B" if site.port == "A" else "A")
        if other is None or not all(b in ("0", "1") for b in other):
            return None
        signed = (site.cell.params.get("A_SIGNED") == "1"
                  and site.cell.params.get("B_SIGNED") == "1")
        constant = other[ctrl] if ctrl < len(other) else (other[-1] if signed else "0")
    else:
        return None
    fires = "1" if mode == "cnot1" else "0"
    if constant == fires:
        return None
    return (f"{site.cell.type} {site.port}[{site.portbit}] flipped only when "
            f"{site.port}[{ctrl}] is {fires}, where the constant has {constant}")


@dataclass(frozen=True)
class ValueRange:
    """A wire whose every value that can reach an output is known: ``values`` (ints), or
    ``zero_bits`` (bits always 0); ``view``: the wire's only reader as a function of its
    value (compared when the mutated port drives the wire); ``rows``: PE rows it holds in
    (None: every)."""

    kinds: tuple
    wire: str
    why: str
    values: tuple = ()
    zero_bits: tuple = ()
    view: object = None
    rows: object = None


def _range_outcome(site, entry):
    """Why ``site``'s mutation is invisible for every value of ``entry``'s wire, or None."""
    bits = site.bits
    mode, ctrl = site.mutation.mode, site.ctrlbit
    wire_at = {p: b[1] for p, b in enumerate(bits)
               if isinstance(b, tuple) and _wire_name(b) == entry.wire}
    if site.portbit not in wire_at:
        return None
    driver = site.port in OUTPUTS and all(k == p for p, k in wire_at.items())
    zero_bits = (entry.zero_bits(site.tile_rows) if callable(entry.zero_bits)
                 else entry.zero_bits)
    if zero_bits:
        if ctrl is not None and ctrl not in wire_at:
            return None
        bit = wire_at[site.portbit]
        c = wire_at.get(ctrl)
        for value in (0, 1):
            for cv in (0, 1):
                if (bit in zero_bits and value) or (c in zero_bits and cv):
                    continue
                if _mutate_bit(mode, value, cv if ctrl is not None else 0) != value:
                    return None
        return f"{entry.wire}[{bit}] never changes"

    def port_value(v):
        out = []
        for p, b in enumerate(bits):
            if p in wire_at:
                out.append((v >> wire_at[p]) & 1)
            elif b in ("0", "1"):
                out.append(int(b))
            elif driver:           # the driver's result bits beyond the wire: v's too
                out.append((v >> p) & 1)
            else:
                return None
        return out

    def mutated(pv):
        pv = list(pv)
        pv[site.portbit] = _mutate_bit(mode, pv[site.portbit],
                                       pv[ctrl] if ctrl is not None else 0)
        return pv

    values = [port_value(v) for v in entry.values]
    if any(pv is None for pv in values) or (ctrl is not None and ctrl >= len(bits)):
        return None
    if all(mutated(pv) == pv for pv in values):
        return f"{entry.wire}: {site.port}[{site.portbit}] never changes"

    def number(pv, signed):
        n = sum(b << i for i, b in enumerate(pv))
        return n - (1 << len(pv)) if signed and pv and pv[-1] else n

    compare = {"$lt": lambda a, b: a < b, "$le": lambda a, b: a <= b,
               "$gt": lambda a, b: a > b, "$ge": lambda a, b: a >= b,
               "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b}
    if site.cell.type in compare and site.port in ("A", "B"):
        other = site.port_bits("B" if site.port == "A" else "A")
        if other is None or not all(b in ("0", "1") for b in other):
            return None
        signed = (site.cell.params.get("A_SIGNED") == "1"
                  and site.cell.params.get("B_SIGNED") == "1")
        k = number([int(b) for b in other], signed)
        op = compare[site.cell.type]

        def test(pv):
            x = number(pv, signed)
            return op(x, k) if site.port == "A" else op(k, x)

        if all(test(mutated(pv)) == test(pv) for pv in values):
            return (f"{site.cell.type} against {k} with {entry.wire} in "
                    f"{min(entry.values)}..{max(entry.values)}: same for every value")
        return None
    if entry.view is not None and driver:
        def wire_value(pv):
            return sum(pv[p] << k for p, k in wire_at.items())
        if all(entry.view(wire_value(mutated(pv))) == entry.view(wire_value(pv))
               for pv in values):
            return f"{entry.wire}'s reader gives the same for every value"
    return None


# Citations name the statement (file and code in backticks, checked against hdl/ by
# tests/unit/verif/test_verif_mutant_rules.py), never a line number: lines move.
_HI_WHY = ("multiplier_hi's product reaches an output only on double-row beats (pe.py "
           "`result.eq(Mux(self.hi_in, adder_hi.sum, first))`); hi_in is set only for a "
           "matmul that passed the DOUBLE_ROW_TYPE check (command_queue.py "
           "`with m.Elif(~is_read & command.double_row & ~fp8_pair):`: both types E4M3 (3) "
           "or E5M2 (4); issue.py `hi_end.eq(Mux(mode.double & over, mode.row0 + "
           "mode.k - mode.trows, 0))`, `lane.hi.eq(inside & (hi_end > k))`), "
           "whose type codes travel with the operand (pe.py `for name in "
           "travelling(width, self._mx)]`)")
#: Wire values known by argument (see each ``why``).
VALUE_RANGES = (
    ValueRange(_FP32_ADDERS, "diff", values=tuple(range(255)), view=lambda d: min(d, 31),
               why="L is the operand of larger magnitude (fp32_add.py `swap.eq(b_mag > "
                   "a_mag)`, `l_mag.eq(Mux(swap, b_mag, a_mag))`), so its exponent field is "
                   ">= S's and l_exp >= s_exp, both in 1..255 (fp32_add.py "
                   "`l_exp.eq(Mux(l_mag[23:31] == 0, 1, l_mag[23:31]))`): diff = l_exp - "
                   "s_exp lies in 0..254 (the $sub's bits 8 and up are 0), and its only "
                   "reader is fp32_add.py `shift.eq(Mux(diff > 31, 31, diff))`"),
    ValueRange(("multiplier_hi",), "exp", values=tuple(range(93, 161)),
               why=_HI_WHY + "; its magnitude (float_mul.py `product.eq(Cat(magnitude, "
                   "sign))`) only when both operands decode (FloatMultiplier's decode) as "
                   "non-zero finite e4m3 / e5m2 (any other type decodes as zero): "
                   "exponents -6..8 and -14..16, so exp (float_mul.py `exp.eq(a_exp + b_exp "
                   "+ 128 - lz)`) lies in 93..160 (lz <= 7 for a non-zero 8-bit product); "
                   "other values of exp never reach an output"),
    *(ValueRange(("multiplier_hi",), t, values=(3, 4),
                 why=_HI_WHY + f": {t} is E4M3 (3) or E5M2 (4) whenever the product is "
                               "used") for t in ("a_type", "b_type")),
    *(ValueRange(("adder_hi",), w, zero_bits=tuple(range(16)), rows=(0,),
                 why="adder_hi of a partition-row-0 PE (the tile ties chain_start high: "
                     "pe.py `first.eq(Mux(self.chain_start | self.first_in, product, "
                     "total))`) adds two products of FP8 operands: its sum reaches an output "
                     "only on double-row beats (pe.py `result.eq(Mux(self.hi_in, adder_hi.sum, "
                     "first))`), whose types are e4m3 / e5m2 (the DOUBLE_ROW_TYPE check of "
                     "command_queue.py); such a product "
                     "has at most 4 x 4 = 8 significant bits and is a normal FP32 number "
                     "(2^-34 .. 2^25), so its fraction bits 0..15 are 0, as are those of "
                     "+-0, +-Inf and the NaN 0x7FC00000; a_mag, b_mag, l_mag, s_mag "
                     "(fp32_add.py `mag.eq(Mux(self.ftz & (exp == 0), 0, x[0:31]))`, "
                     "`l_mag.eq(Mux(swap, b_mag, a_mag))`) copy them or are 0")
      for w in ("a", "b", "a_mag", "b_mag", "l_mag", "s_mag")),
    *(ValueRange(("issue",), f"mode_{g}",
                 zero_bits=lambda rows: tuple(range(_K.offset + (2 * rows).bit_length(),
                                                    _K.offset + _K.width)),
                 why=f"mode_{g}.k (issue.MODE_LAYOUT: the row cell's mode bits {_K.offset}.."
                     f"{_K.offset + _K.width - 1} after {', '.join(_BEFORE_K)}) is written "
                     "only on an issue in its row cell (issue.py `m.d.sync += mode.eq(owner)`), "
                     "from the issuing slot's K (issue.py `m.d.comb += [owner[name].eq(cur[name]) "
                     "for name in mode_bits]`), which a slot takes from the head that starts in "
                     "it (issue.py `\"k\": head.k`); a queued matmul passed K_RANGE "
                     "(command_queue.py `k_limit.eq(Mux(command.double_row, 2 * rows, rows))`: "
                     "1 <= K <= 2 x rows for double-row, <= rows otherwise), so mode.k <= 2 x rows "
                     "and its bits from (2 x rows).bit_length() up are 0 (and the mode starts at "
                     "0)")
      for g in range(4)),
)


def _value_range(site):
    for entry in VALUE_RANGES:
        if site.kind in entry.kinds and (entry.rows is None or site.row in entry.rows):
            outcome = _range_outcome(site, entry)
            if outcome is not None:
                return f"{outcome} ({entry.why})"
    return None


def _hi_subnormal(site):
    """A mutation confined to multiplier_hi's below-normal branch."""
    if site.kind != "multiplier_hi":
        return None
    lines = {n for f, n in site.cell.src if f == "float_mul.py"}
    # by its source line only a cell of one expression: proc's muxes and compares of the
    # If / Elif chain of magnitude hold several branches
    own = "procmux" not in site.mutation.cell and site.cell.type != "$pmux"
    if (own and lines and lines <= set(_HI_SUBNORMAL_LINES)
            and len(lines) == len(site.cell.src)):
        return f"cell {site.mutation.cell} (float_mul.py:{','.join(map(str, sorted(lines)))})"
    if _wire_name(site.bit) in _HI_SUBNORMAL_WIRES:
        return f"{_wire_name(site.bit)}[{site.bit[1]}]"
    return None


def _same_constant(site):
    """A constant input bit forced to the value it has."""
    if site.bit in ("0", "1") and site.mutation.mode == f"const{site.bit}":
        return f"{site.cell.type} {site.port}[{site.portbit}] is the constant {site.bit}"
    return None


def _unread_bit(site):
    """The mutated bit ends on a wire bit nothing in its module reads."""
    if site.port == "Y":
        out = site.bit
    elif site.cell.type == "$mux" and site.port in ("A", "B"):
        y = site.port_bits("Y")
        out = y[site.portbit] if y and site.portbit < len(y) else None
    else:
        return None
    if not isinstance(out, tuple) or out in site.module.read:
        return None
    return f"{site.cell.type} Y[{site.portbit}] drives {out[0].lstrip(chr(92))}[{out[1]}]"


@dataclass(frozen=True)
class ClassRule:
    """An equivalence argument for a class of mutations: ``match(site)`` returns the
    instance's detail, or None when the mutation is not of the class."""

    name: str
    argument: str
    match: object


CLASS_RULES = (
    ClassRule(
        "same-constant", "a cell input bit tied to a constant, forced to that same value "
        "(const0 of a 0, const1 of a 1): the netlist is unchanged", _same_constant),
    ClassRule(
        "lz-stage", "a leading_zeros() stage output bit below what is read "
        "(fp32_add.py's leading_zeros; the FP32 adders, fp32_add.py `lz = leading_zeros(m, "
        "raw[0:27], \"lz\")`, and both float multipliers, float_mul.py `lz = "
        "leading_zeros(m, prod, \"lz\")`): with span the power of two above the counted "
        "width (32 for the adder's 27 bits and the multiplier's 22, 16 for "
        "multiplier_hi's 8), stage S's word lz_sS (fp32_add.py `shifted.eq(Mux(zero, "
        "current << step, current))`) is read only by the next stage, whose zero test "
        "(fp32_add.py `zero.eq(current[span - step:] == 0)`) reads its bits >= span - S/2 "
        "and whose mux moves bit j to j + S/2; the last word lz_s1 is read by nothing "
        "(fp32_add.py `count.eq(Cat(*reversed(bits)))`). So lz_sS's bits below span + 1 - S are "
        "read by nothing, and a mutation of such a bit of the mux that drives lz_sS (its "
        "output or the same bit of a data input) changes no output", _lz_stage),
    ClassRule(
        "constant-compare", "a comparison with a constant ($eq / $ne against a constant "
        "operand, or a zero / all-ones reduction) whose input bit is flipped only while "
        "another input bit (the control) differs from the constant's: the input differs "
        "from the constant in the control bit before and after the flip, so the "
        "comparison's result is the same for every input", _constant_compare),
    ClassRule(
        "value-range", "the mutated port carries a wire whose every value that can reach "
        "an output is known (VALUE_RANGES, each with its argument), and evaluated over all "
        "of them the mutation changes nothing: the port's value, or a comparison's result "
        "against its constant operand, or (on the wire's driver) what the wire's only "
        "reader makes of it", _value_range),
    ClassRule(
        "hi-subnormal", "multiplier_hi's below-normal branch: right, wide, round_up and "
        "tiny (float_mul.py, from `# Below the normal range` to `tiny.eq(wide[26:49] + "
        "round_up)`) and the FTZ flush test (float_mul.py `with m.Elif(self.ftz & "
        "(tiny[23:31] == 0)):`) are read only by magnitude's Elif / Else branches, taken "
        "only when exp < 1; "
        + _HI_WHY + "; its magnitude only when both operands decode as non-zero finite "
        "e4m3 / e5m2, when exp (float_mul.py `exp.eq(a_exp + b_exp + 128 - lz)`) lies "
        "in 93..160 (exponents -6..8 and -14..16, lz <= 7): the branch is never taken "
        "when it could matter", _hi_subnormal),
    ClassRule(
        "unread-bit", "the mutated bit (a cell's output bit, or a $mux data input's bit, "
        "which reaches only the same output bit) drives a wire bit that no cell, "
        "connection or port of its module reads (parse_rtlil's read set: every cell "
        "input, both sides of every connect, every port)", _unread_bit),
)


def class_rule_matches(mutations, design_text):
    """``{index: (rule, detail)}`` for every mutation a :data:`CLASS_RULES` rule calls
    equivalent (the first rule that matches), given design.il's text."""
    modules = parse_rtlil(design_text)
    out = {}
    for m in mutations:
        site = site_of(m, modules)
        if site is None:
            continue
        for rule in CLASS_RULES:
            detail = rule.match(site)
            if detail is not None:
                out[m.index] = (rule, detail)
                break
    return out


def _flat_name(module, name):
    """The name Yosys's ``flatten`` gives object ``name`` of the tile's submodule
    ``module`` (``systolica_tile.array.pe_0_2`` cell ``$27`` ->
    ``$flatten\\array.\\pe_0_2.$27``; a public wire ``pe_0_2_bf16_out`` of
    ``systolica_tile.array`` -> ``array.pe_0_2_bf16_out``)."""
    path = module.split(".")[1:]
    if not path:
        return name
    if name.startswith("$"):
        return "$flatten\\" + ".\\".join(path) + "." + name
    return ".".join(path) + "." + name


def outside_output_cone(mutations, folder):
    """Mutations whose cell (or, for a mutated instance port, the wire on it) lies outside
    the fan-in cone of every tile output in the flattened design as written (Yosys
    ``select o:* %ci*``, through registers too): nothing they change can reach an output,
    so these mutants are equivalent by structure. Returns ``{index: reason}``; a mutation
    whose object the flattened netlist does not name is left out (not called
    equivalent). :func:`score_report` refuses the result if it calls a killed mutant
    equivalent.

    The check is by cell: a dead bit of a live cell (the low bits of a normaliser stage
    whose top bits alone are read) is not found. A bit-level variant (single-bit gates
    and wires) was tried and dropped: the check against the killed mutants showed it
    calling live port wires dead (they are aliases its cone does not follow). For the same
    reason a mutated instance *input* port (whose object is the parent's wire on it) is not
    named: in the 2026-12-03 draw (seed 1) the issue stage's wire on its skew buffer's
    input ``i`` was called outside the cone, and the kill-set killed that mutant (#115, a
    wrong word). An instance output port's wire is named only when it is the port's own
    (``<cell>_<port>``, as Amaranth names it): in the 2026-12-04 draw on the netlist with
    concurrent tiles, a PE's ``stype_out`` bit on the array's shared ``moving_out_next``
    wire was called outside the cone (#30), and the kill-set killed it (a wrong word): the
    flattened netlist reads that bit through another name of the same net.
    """
    folder = Path(folder)
    # memory_collect merges PSUM's write-port cells into the memory cell they write: a
    # write port has no output, so the cone would never reach it (the check against the
    # killed mutants caught that); a mutation of a merged cell is then simply not named.
    run_yosys(f"read_rtlil design.il\nhierarchy -top {TOPLEVEL}\nflatten\nmemory_collect\n"
               "select -write cone.txt o:* %ci*\nselect -write named.txt *\n", folder)

    def names(path):
        return {line.split("/", 1)[1] for line in (folder / path).read_text().splitlines()
                if "/" in line}

    cone, named = names("cone.txt"), names("named.txt")
    design = (folder / "design.il").read_text()
    out = {}
    for m in mutations:
        wire = re.search(r"-wire (\S+)", m.args)
        instance = not m.cell.startswith("$")
        if instance and (not wire or _input_port(design, m) or not _own_wire(m, wire[1])):
            continue        # an input port's wire, or a shared one, may be an alias
        target = _flat_name(m.module, wire.group(1) if instance else m.cell)
        if target in named and target not in cone:
            out[m.index] = (f"{'wire' if instance else 'cell'} {target} is outside the "
                            "fan-in cone of every tile output (flattened netlist)")
    return out


def _own_wire(mutation, wire):
    """Whether ``wire`` is the mutated instance port's own wire, ``<cell>_<port>`` (bool)."""
    port = re.search(r"-port (\S+)", mutation.args)
    return bool(port) and wire == f"{mutation.cell}_{port[1]}"


def _input_port(design, mutation):
    """Whether ``mutation`` (of an instance's port) mutates an input port of the instance's
    module (bool), from the RTLIL text ``design``."""
    port = re.search(r"-port (\S+)", mutation.args)
    cell = re.search(rf"^  cell (\S+) \\?{re.escape(mutation.cell)}$",
                     _module_text(design, mutation.module), re.M)
    if not (port and cell):
        return True         # not found: treated as an input (never named)
    return bool(re.search(rf"^  wire (?:width \d+ )?input \d+ \\?{re.escape(port[1])}$",
                          _module_text(design, cell[1].lstrip("\\")), re.M))


def _module_text(design, module):
    """The RTLIL text of ``module`` in ``design`` (str; empty when it is not there)."""
    start = design.find(f"module \\{module}\n")
    return "" if start < 0 else design[start:design.find("\nend\n", start)]


def cell_texts(design):
    """``{(module, cell): RTLIL text of the cell}`` of an RTLIL file's text (type,
    parameters and connections; attributes stand before a cell and are left out)."""
    cells, module, current = {}, None, None
    for line in design.splitlines():
        if line.startswith("module "):
            module = line.split()[1].lstrip("\\")
        elif line.startswith("  cell "):
            current = [line.strip()]
            cells[(module, line.split()[2].lstrip("\\"))] = current
        elif current is not None:
            if line.startswith("  end"):
                current = None
            else:
                current.append(line.strip())
    return {key: "\n".join(lines) for key, lines in cells.items()}


def fingerprint(mutation, cells):
    """A name for ``mutation`` that does not depend on its index or the checkout's path:
    a hash of the mutated cell's RTLIL text (``cells`` from :func:`cell_texts`) and the
    mutation's arguments without source locations. :data:`ARGUED` is keyed by it, so an
    argument stops applying when the cell it was made for changes."""

    text = cells.get((mutation.module, mutation.cell.lstrip("\\")), "")
    args = re.sub(r" -src \S+", "", mutation.args)
    return hashlib.sha1(f"{args}\n{text}".encode()).hexdigest()[:12]
