"""Unit tier: ``systolica.sim.options.exit_with``, the exit of the ``python -m`` entry points
outside the systolica command (``make check-mx``'s mx_sweep and mx_rate, the equivalence
prover): the status passes through, and Ctrl-C is one line and 130, not a traceback."""

import subprocess
import sys

import pytest

from systolica.sim.options import exit_with


def test_the_status_passes_through():
    with pytest.raises(SystemExit) as done:
        exit_with(lambda: 1)
    assert done.value.code == 1


def test_ctrl_c_is_one_line_and_130(capsys):
    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(SystemExit) as done:
        exit_with(interrupted)
    assert done.value.code == 130
    assert capsys.readouterr().err == "interrupted\n"


#: Runs a module as ``python -m`` would, with the simulator run raising KeyboardInterrupt.
_INTERRUPTED = ("import runpy, sys, systolica.sim as sim\n"
                "def ctrl_c(*args, **kwargs):\n"
                "    raise KeyboardInterrupt\n"
                "sim.run_program = ctrl_c\n"
                "sys.argv = [sys.argv[1]]\n"
                "runpy.run_module(sys.argv[0], run_name='__main__')\n")


@pytest.mark.parametrize("module", ["mx_rate", "mx_sweep"])
def test_ctrl_c_in_a_check_mx_module_is_one_line_and_130(module):
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED, f"systolica.verif.{module}"],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (130, "interrupted\n"), done.stderr
