"""cocotb testbench of the Systolica tile.

Split as in cocotb's ``matrix_multiplier`` example:

- :mod:`systolica.tb.streams`: valid/ready stream driver and monitor (pack and unpack through
  the Amaranth layouts of :mod:`systolica.hdl.layouts`).
- :mod:`systolica.tb.scoreboard`: compares every PSUM row with the golden model and accounts
  for every transaction.
- :mod:`systolica.tb.tile_tb`: the TB class that wires drivers, monitor, model and scoreboard.
- :mod:`systolica.tb.cases.tile`: the regression's cocotb tests.
- :mod:`systolica.tb.cases.program`: runs a matmul program from a file (``run_matmul``,
  ``python -m systolica.sim``).

This package imports cocotb and is meant to be loaded inside a simulator.
"""
