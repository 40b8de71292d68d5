"""The ``systolica`` command (:mod:`.main`), a module per subcommand: ``sim`` (:mod:`.simulate`;
the MiniLM workload's options in :mod:`.minilm`), ``waves``, ``bench``, ``regress``,
``cells``, ``minilm-speedup`` (:mod:`.minilm_speedup`); the verification subcommands are
:mod:`systolica.verif`'s modules and the scaling ones :mod:`systolica.scaling.cli`. The top of
the application layer: it may import everything, nothing imports it but the entry points."""
