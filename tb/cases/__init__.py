"""The cocotb test modules (what a simulator run executes), named apart from pytest's
``test_*.py``: :mod:`.tile` (the regression's tests on the per-cycle TB), :mod:`.program`
(one command program from a file) and :mod:`.bulk` (clocks the bulk-stimulus harness). The
host names them through :mod:`systolica.tb.protocol`."""
