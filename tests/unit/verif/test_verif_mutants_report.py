"""The mutation run's report step: a proof that Yosys or ABC cannot run ends the run with one
line naming the failure and where the kill-set's outcome is kept, not a traceback."""

from types import SimpleNamespace

import pytest

from systolica.verif import mutants


def test_a_failed_proof_is_one_line_and_keeps_the_kills(monkeypatch, tmp_path, capsys):
    def refused(*args, **kwargs):
        raise RuntimeError("yosys refused the miter of 1-1 on systolica_tile.array.pe_2_3: "
                           "Design contains 'x' or 'z' bits.")
    monkeypatch.setattr(mutants, "score_report", refused)
    args = SimpleNamespace(size=(4, 4), jobs=1, doc=None, reuse_kills=False, programs=8,
                           commands=300, seed=1, types="all+fp32", target=95.0, count=240)
    status, result = mutants._report(args, [], tmp_path, 0.0, {})
    out = capsys.readouterr().out
    assert status == 2
    assert out.startswith("systolica mutants: error: the equivalence proofs failed: yosys "
                          "refused the miter") and out.count("\n") == 1
    assert str(tmp_path / "killed_by.json") in result["error"] and "--reuse-kills" in out


def test_rerun_survivors_and_reuse_kills_exclude_each_other(capsys):
    try:
        mutants.main(["--reuse-kills", "--rerun-survivors"])
    except SystemExit as stop:
        assert stop.code == 2
    else:
        raise AssertionError("the two options were accepted together")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exclude each other" in err[0], err


def test_rerun_survivors_skips_only_the_proven_equivalent(tmp_path):
    """--rerun-survivors reruns the kill-set on the open survivors: it reads which of the
    last report's survivors were proven equivalent (an open one, and one whose proof gave
    no answer, are run again)."""
    import json

    (tmp_path / "results-8x300.json").write_text(json.dumps({"survivors": [
        {"index": 2, "disposition": "equivalent (proof)"},
        {"index": 12, "disposition": "open"},
        {"index": 40, "disposition": "open (no answer in time)"},
        {"index": 41, "disposition": "equivalent (proof)"}]}))
    assert mutants._proven_equivalent(tmp_path, 8, 300) == {2, 41}
    assert mutants._proven_equivalent(tmp_path, 4, 300) == set()     # another kill-set size


def test_the_survivor_page_names_the_size_types_and_sweeps_of_the_run(monkeypatch, tmp_path):
    """A run on another size and type set writes a page whose command reruns it: ``--size``
    and ``--types`` named, and the MX sweep listed in the kill-set of an mx tile."""
    report = {"text": "mutants 0: killed 0\nscore -", "survivors": [],
              "score_excluding_equivalent": 100.0}
    monkeypatch.setattr(mutants, "score_report", lambda *args, **kwargs: report)
    monkeypatch.setattr(mutants, "markdown", lambda report, header: header)
    page = tmp_path / "page.md"
    args = SimpleNamespace(size=(8, 4), jobs=2, doc=str(page), reuse_kills=False,
                           rerun_survivors=False, programs=8, commands=300, seed=1,
                           types="int8+mx", target=95.0, count=mutants.COUNT)
    status, _ = mutants._report(args, [], tmp_path, 0.0, {})
    text = page.read_text()
    assert status == 0
    assert "`systolica mutants --size 8x4 --types int8+mx --doc " in text
    assert "the edge sweeps and the MX sweep," in text and "FP32" not in text
    args.size, args.types, args.count = (4, 4), "all", 6
    mutants._report(args, [], tmp_path, 0.0, {})
    assert "`systolica mutants --count 6 --doc " in page.read_text()
    assert "MX sweep" not in page.read_text()


def test_an_mx_tile_without_whole_scale_groups_and_a_missing_mutant_are_refused_at_once(
        capsys):
    """An mx tile whose rows are not a multiple of 8 (the kill-set could send no MX matmul)
    and an --only beyond --count end in one line on stderr before anything is built."""
    for argv, words in ((["--size", "3x3", "--types", "int8+mx"], "multiple of 8"),
                        (["--count", "6", "--only", "9"], "mutants 1..6")):
        try:
            mutants.main(argv)
        except SystemExit as stop:
            assert stop.code == 2
        else:
            raise AssertionError(f"{argv} was accepted")
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


@pytest.mark.parametrize("score, status, verdict", [
    (95.0, 0, "target 95 % of the non-equivalent: met"),
    (94.9, 1, "target 95 % of the non-equivalent: not met (exit status 1)")])
def test_the_score_line_says_whether_the_target_was_met(monkeypatch, tmp_path, capsys, score,
                                                        status, verdict):
    report = {"text": "mutants 1: killed 1\nscore -", "survivors": [],
              "score_excluding_equivalent": score}
    monkeypatch.setattr(mutants, "score_report", lambda *args, **kwargs: report)
    args = SimpleNamespace(size=(4, 4), jobs=1, doc=None, reuse_kills=False,
                           rerun_survivors=False, programs=8, commands=300, seed=1,
                           types="all", target=95.0, count=mutants.COUNT)
    assert mutants._report(args, [], tmp_path, 0.0, {})[0] == status
    assert verdict in capsys.readouterr().out.splitlines()
