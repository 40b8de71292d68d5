"""Verification that measures itself: the command-stream fuzzer, the exhaustive multiplier
and adder checks, the mutation score and the functional and RTL coverage (``make fuzz``,
``make exhaustive``, ``make mutants``, ``make coverage``). Each module is a subcommand of
``systolica``: ``fuzz``, ``exhaustive``, ``mutants``, ``coverage``, ``rtl-coverage``.
"""
