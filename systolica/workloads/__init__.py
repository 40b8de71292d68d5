"""The workloads the ``systolica`` command runs on the RTL tile: :mod:`.minilm` (the
all-MiniLM-L6-v2 sentence encoder, every matmul on the tile). The random workload is the
cocotb regression's random test (:mod:`systolica.tb.cases`), driven by ``systolica sim
--workload random``."""
