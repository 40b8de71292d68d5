"""Building a tile configuration: Verilog generation, the simulators, build folders and
cocotb runs, and the errors of the simulation layer. Imports ``hdl``, ``golden`` and ``tb``;
never the run API, the applications or ``systolica.scaling``."""
