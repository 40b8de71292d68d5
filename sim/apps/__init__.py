"""The applications behind the ``systolica`` command (:mod:`.main`): the random workload
(:mod:`.simulate`), the MiniLM workload (:mod:`.minilm`), waves (:mod:`.waves`), bench,
regress, cells and the verification tools (:mod:`.verif`). The only part of ``systolica.sim``
that may import ``systolica.scaling``."""
