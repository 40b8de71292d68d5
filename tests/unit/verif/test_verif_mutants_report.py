"""The mutation run's report step: a proof that Yosys or ABC cannot run ends the run with one
line naming the failure and where the kill-set's outcome is kept, not a traceback."""

from types import SimpleNamespace

from systolica.verif import mutants


def test_a_failed_proof_is_one_line_and_keeps_the_kills(monkeypatch, tmp_path, capsys):
    def refused(*args, **kwargs):
        raise RuntimeError("yosys refused the miter of 1-1 on systolica_tile.array.pe_2_3: "
                           "Design contains 'x' or 'z' bits.")
    monkeypatch.setattr(mutants, "score_report", refused)
    args = SimpleNamespace(size=(4, 4), jobs=1, doc=None, reuse_kills=False, programs=8,
                           commands=300, seed=1, types="all+fp32", target=95.0)
    status, result = mutants._report(args, [], tmp_path, 0.0, {})
    out = capsys.readouterr().out
    assert status == 2
    assert out.startswith("systolica mutants: error: the equivalence proofs failed: yosys "
                          "refused the miter") and out.count("\n") == 1
    assert str(tmp_path / "killed_by.json") in result["error"] and "--reuse-kills" in out
