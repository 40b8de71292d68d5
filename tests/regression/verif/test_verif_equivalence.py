"""Error injection for the equivalence prover (``verif.equivalence``), on a 2 x 2 tile: it
must reject three mutants known not to be equivalent, among them the one the earlier SAT
check called equivalent although the fuzzer kills it (an adder's output bit 12 forced to 1:
-Inf read back as 0xff801000), and prove one known equivalent (an unread low bit of a
leading-zero stage). ``make mutants`` runs it on every survivor of the 3 x 3 draw."""

import pytest

from systolica.verif import equivalence, mutants, netlist

PE = "systolica_tile.array.pe_1_0"


def _driver(modules, module, wire, bit):
    """``(cell, Y bit)`` of the cell of ``module`` whose output Y drives ``wire[bit]``."""
    m = modules[module]
    for name, cell in m.cells.items():
        if cell.type.startswith("$") and "Y" in cell.conns:
            ys = netlist.sig_bits(cell.conns["Y"], m.wires)
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
    assert (folder / "proofs" / "4-0.ys").is_file()
