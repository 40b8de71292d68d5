"""Verification that measures itself: the command-stream fuzzer, the exhaustive multiplier
and adder checks, and the mutation score (``make fuzz``, ``make exhaustive``,
``make mutants``). Each module is a command line (``python -m systolica.sim.apps.verif.NAME``).
"""
