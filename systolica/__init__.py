"""Systolica: an RTL-level model of a NeuronCore-class tensor-engine tile.

The package's parts are subpackages (``systolica.hdl``, ``systolica.golden``,
``systolica.tb``, ``systolica.sim``, ``systolica.scaling``; see docs/layout.md).
This top level holds only the ``systolica`` command's entry point, ``python -m systolica``
(:mod:`systolica.cli.main`), and imports nothing at import time.
"""
