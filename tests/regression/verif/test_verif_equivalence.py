"""Error injection for the equivalence prover (``verif.equivalence``), on a 2 x 2 tile: it
must reject three mutants known not to be equivalent, among them the one the earlier SAT
check called equivalent although the fuzzer kills it (an adder's output bit 12 forced to 1:
-Inf read back as 0xff801000), and prove one known equivalent (an unread low bit of a
leading-zero stage); on the tile's top with the datapath cut, prove a queue mutant that
only the tile's own rules make equivalent and reject two whose effect reaches only the cut
datapath or a port. ``make mutants`` runs it on every survivor of the 4 x 4 draw."""

import re

import pytest

from systolica.hdl import layouts
from systolica.verif import equivalence, mutants, netlist

PE = "systolica_tile.array.pe_1_0"


def _driver(modules, module, wire, bit, port="Y"):
    """``(cell, bit)`` of the cell of ``module`` whose output ``port`` (``Y``, or ``Q`` of a
    register) drives ``wire[bit]``."""
    m = modules[module]
    for name, cell in m.cells.items():
        if cell.type.startswith("$") and port in cell.conns:
            ys = netlist.sig_bits(cell.conns[port], m.wires)
            if ("\\" + wire, bit) in ys:
                return name, ys.index(("\\" + wire, bit))
    raise LookupError(f"no cell drives {wire}[{bit}] in {module}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return netlist.prepare_design(2, 2, tmp_path_factory.mktemp("equivalence"))


def test_prover_rejects_known_non_equivalent_mutants_and_proves_a_known_one(folder):
    modules = netlist.parse_rtlil((folder / "design.il").read_text())
    adder = f"{PE}.adder"
    wrong = {
        # the adder's result bit 12 forced to 1 (its final mux), on the adder alone
        1: "-mode const1 -module {} -cell {} -port Y -portbit {}".format(
            adder, *_driver(modules, adder, "sum", 12)),
        # the double-row adder's result bit 16 forced to 1, seen from the PE
        2: f"-mode const1 -module {PE} -cell adder_hi -port sum -portbit 16",
        # the BF16/FP16 multiplier's product bit 3 inverted, seen from the PE
        3: f"-mode inv -module {PE} -cell multiplier -port product -portbit 3",
    }
    for index, args in wrong.items():
        verdict = equivalence.prove(mutants.Mutation(index, args, ()), folder, levels=1)
        assert verdict.verdict == "not equivalent", (args, verdict)
        assert "t1 " in verdict.detail, verdict     # the counterexample's inputs
    # lz_s8's bits below 25 feed nothing (the next stage reads bits >= 28, shifts by 4)
    proved = equivalence.prove(mutants.Mutation(
        4, "-mode const0 -module {} -cell {} -port Y -portbit {}".format(
            adder, *_driver(modules, adder, "lz_s8", 12)), ()), folder, levels=1)
    assert proved.verdict == "equivalent", proved
    # rerunnable: the Yosys script that writes the miter, and ABC's commands beside it
    assert proved.script == str(folder / "proofs" / "4-0-pdr.ys"), proved
    assert "pdr" in (folder / "proofs" / "4-0-pdr.abc").read_text()


def test_pdr_proves_a_sequential_equivalence_and_names_a_counterexample(tmp_path):
    """A register that starts at 0 and holds its value masks an input (``y = x & ~stuck``):
    forcing the mask to 1 is equivalent only because ``stuck`` is 0 in every reachable
    state, which ABC's PDR proves on a module with registers (where ``equiv_simple`` is not
    tried); forcing ``stuck``'s next value to 1 is not equivalent, and the counterexample
    names the input values of the cycles that show it (``x`` = 1 once ``stuck`` is set). A
mutated clock pin is never proven: neither model has clock edges."""
    netlist.run_yosys("read_verilog <<END\n"
                      "module top(input clk, input rst, input x, output y);\n"
                      "  reg stuck = 1'b0;\n"
                      "  always @(posedge clk) stuck <= stuck;\n"
                      "  assign y = x & ~stuck;\n"
                      "endmodule\nEND\n"
                      "proc; opt_clean; write_rtlil design.il\n", tmp_path)
    modules = netlist.parse_rtlil((tmp_path / "design.il").read_text())
    (mask,) = [n for n, c in modules["top"].cells.items() if c.type == "$not"]
    (register,) = [n for n, c in modules["top"].cells.items() if "dff" in c.type]
    proved = equivalence.prove(mutants.Mutation(
        1, f"-mode const1 -module top -cell {mask} -port Y -portbit 0", ()), tmp_path)
    assert proved.verdict == "equivalent" and "PDR" in proved.detail, proved
    wrong = equivalence.prove(mutants.Mutation(
        2, f"-mode const1 -module top -cell {register} -port D -portbit 0", ()), tmp_path)
    assert wrong.verdict == "not equivalent", wrong
    assert re.search(r"t[2-9] x=0x1", wrong.detail), wrong
    # an inverted clock pin has no exact model (AIGER and sat both ignore clocks): unknown
    clock = equivalence.prove(mutants.Mutation(
        3, f"-mode inv -module top -cell {register} -port CLK -portbit 0", ()), tmp_path)
    assert clock.verdict == "unknown" and "no exact model" in clock.detail, clock


@pytest.fixture(scope="module")
def folder_1x1(tmp_path_factory):
    return netlist.prepare_design(1, 1, tmp_path_factory.mktemp("equivalence_1x1"))


def test_tile_scope_cuts_the_datapath_and_still_compares_what_reaches_it(folder_1x1):
    """On the 1 x 1 tile: the queue's second entry's ``tile_col`` bit 0 forced to 0 is
    equivalent (a tiled command starts at column 0, and the field is read only for a tiled
    one) but not on the queue (its head port shows the raw field), so only the tile's top
    proves it, with the array and result path cut. (On the 2 x 2 tile the same argument
    for bit 1 is beyond PDR's minute since the issue logic holds a matmul per row cell.)
    Bit 0 of the head entry's PSUM offset (the register behind ``head__payload``) forced
    to 0 moves a matmul's writes: only the cut result path's inputs show it, and the miter
    must compare them. The type check switched off shows at a port (``status``)."""
    folder = folder_1x1
    modules = netlist.parse_rtlil((folder / "design.il").read_text())
    queue = "systolica_tile.queue"
    offsets = {name: f.offset for name, f in layouts.command_layout()}
    args = {}
    for index, (entry, field) in {5: ("queue_1", "tile_col"),
                                  6: ("head__payload", "offset")}.items():
        cell, port_bit = _driver(modules, queue, entry, offsets[field], port="Q")
        args[index] = (f"-mode const0 -module {queue} -cell {cell} -port Q "
                       f"-portbit {port_bit}")
    args[7] = "-mode const0 -module {} -cell {} -port Y -portbit {}".format(
        queue, *_driver(modules, queue, "built", 0))
    proved = equivalence.prove(mutants.Mutation(5, args[5], ()), folder)
    assert proved.verdict == "equivalent", proved
    assert proved.scope == "systolica_tile" and "array, result cut" in proved.detail, proved
    assert "pdr" in (folder / "proofs" / "5-1-pdr.abc").read_text()
    for index in (6, 7):
        verdict = equivalence.prove(mutants.Mutation(index, args[index], ()), folder)
        assert verdict.verdict == "not equivalent", (args[index], verdict)
        assert "systolica_tile: not equivalent" in verdict.detail, verdict


def test_prover_cli_bad_folders_are_one_line_errors(tmp_path, capsys):
    """``python -m systolica.verif.equivalence``: a folder without the run's files, a
    corrupt ``mutations.json`` and a mutant the run does not hold each end with exit
    status 2 and one line that says what was wrong."""
    def error(*argv):
        with pytest.raises(SystemExit) as ended:
            equivalence.main(list(argv))
        assert ended.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    assert "mutations.json not found" in error("--folder", str(tmp_path), "--mutant", "1")
    (tmp_path / "mutations.json").write_text('[{"index": 1, "args": "-mode inv"}]')
    assert "design.il not found" in error("--folder", str(tmp_path), "--mutant", "1")
    (tmp_path / "design.il").write_text("")
    assert "no such mutant; the run has 1..1" in error("--folder", str(tmp_path),
                                                       "--mutant", "2")
    (tmp_path / "mutations.json").write_text('{"index": ')
    assert "is not a mutation run's list" in error("--folder", str(tmp_path),
                                                   "--mutant", "1")
