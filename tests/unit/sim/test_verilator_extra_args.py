"""Unit tier: ``$SYSTOLICA_VERILATOR_ARGS`` adds Verilator options to every build
(``sim.builder.runner.verilator_args``) and a bad value is refused in one line."""

import pytest

from systolica.sim.builder import runner


def test_extra_options_follow_the_fixed_ones_split_like_a_shell(monkeypatch):
    monkeypatch.setenv("SYSTOLICA_VERILATOR_ARGS", "-O3  --x-assign fast '--threads' 2")
    assert runner.verilator_args() == ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-O3",
                                       "--x-assign", "fast", "--threads", "2")


def test_no_variable_means_the_fixed_options(monkeypatch):
    monkeypatch.delenv("SYSTOLICA_VERILATOR_ARGS", raising=False)
    assert runner.verilator_args() == ("-Wno-fatal", "-Wno-lint", "-Wno-style")


def test_an_unclosed_quote_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("SYSTOLICA_VERILATOR_ARGS", "-O3 '--threads")
    with pytest.raises(ValueError, match=r"^SYSTOLICA_VERILATOR_ARGS must split like a shell"):
        runner.verilator_args()
