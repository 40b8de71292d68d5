"""Mutation testing (``make mutants`` draws 240 mutants of a 4 x 4 tile): here a seeded
sample of a 2 x 2 tile's mutants in one netlist, the unmutated design passing the kill-set,
at least one mutant killed, the equivalence prover rejecting the killed ones on their own
module, and the structural check (outside every output's fan-in cone) against the killed
mutants and two hand-made cases, and the class rules against the killed mutants."""

from systolica.verif import equivalence, mutant_rules, mutants

COUNT = 8


def test_mutant_sample_and_equivalence_checks_agree(seed):
    tile, mutations = mutants.build_mutants(2, 2, COUNT, seed)
    assert [m.index for m in mutations] == list(range(1, COUNT + 1))
    assert mutants.run_mutant(tile, 0, seed, programs=1, commands=150)[1] is None
    folder = tile.verilog.parent
    killed = set()
    for mutation in mutations:
        error = mutants.run_mutant(tile, mutation.index, seed, programs=1, commands=150)[1]
        if error is not None:
            killed.add(mutation.index)
    assert killed, "no mutant of the sample was killed: mutsel does not reach the netlist"
    # The prover may never call a killed mutant equivalent (the earlier SAT check did).
    for mutation in mutations:
        if mutation.index in killed:
            verdict = equivalence.prove(mutation, folder, levels=1, timeout=30)
            assert verdict.verdict != "equivalent", (mutation.describe(), verdict)
    # The structural check may never call a killed mutant equivalent; on a 2 x 2 tile the
    # last column's travelling outputs (active_out of pe_0_1) feed nothing, pe_0_0's feed
    # pe_0_1.
    dead = mutants.Mutation(101, "-mode const1 -module systolica_tile.array -cell pe_0_1 "
                            "-port active_out -portbit 0 -wire pe_0_1_active_out -wirebit 0", ())
    live = mutants.Mutation(102, "-mode const1 -module systolica_tile.array -cell pe_0_0 "
                            "-port active_out -portbit 0 -wire pe_0_0_active_out -wirebit 0", ())
    structural = mutant_rules.outside_output_cone([*mutations, dead, live], folder)
    assert not killed & set(structural), structural
    assert 101 in structural and 102 not in structural, structural
    # nor may a class rule
    ruled = mutant_rules.class_rule_matches(mutations, (folder / "design.il").read_text())
    assert not killed & set(ruled), {i: ruled[i][1] for i in killed & set(ruled)}


def test_argued_entries_are_keyed_and_reasoned():
    """Each hand-argued survivor is named by a 12-digit fingerprint and carries its reason."""
    assert all(len(key) == 12 and int(key, 16) >= 0 for key in mutant_rules.ARGUED)
    assert all(len(reason) > 40 for reason in mutant_rules.ARGUED.values())


def test_mutants_are_drawn_over_the_datapaths_of_the_chosen_type_set(tmp_path, seed):
    wide = mutants.generate(2, 2, 60, seed, tmp_path / "fp32", types="fp32")
    narrow = mutants.generate(2, 2, 60, seed, tmp_path / "int8", types="int8")

    def files(draw):
        return {source.split(":")[0].rsplit("/", 1)[-1] for m in draw for source in m.sources}
    assert "fp32_mul.py" in files(wide)         # the TF32 / FP32 multiplier is in the netlist
    assert not {"fp32_mul.py", "float_mul.py"} & files(narrow)      # INT8 PEs only


def test_reusing_a_draw_that_never_ran_is_one_line(tmp_path, capsys):
    """--reuse-kills / --rerun-survivors on a draw with no earlier run (no killed_by.json):
    one line naming the flag given and the missing file, status 2, not a traceback."""
    for flag in ("--reuse-kills", "--rerun-survivors"):
        status = mutants.main(["--count", "8", "--size", "2x2", "--seed", "99", flag,
                               "--build-dir", str(tmp_path)])
        out = capsys.readouterr().out.strip().splitlines()
        assert status == 2
        assert out[-1].startswith(f"systolica mutants: error: {flag}: ")
        assert out[-1].endswith("killed_by.json not found; run this draw once without it")
