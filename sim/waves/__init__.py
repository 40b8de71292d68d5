"""Waveform tools: GTKWave save files and translate filters (:mod:`.gtkwave`,
:mod:`.gtkwave_filter`) and the timeline PNG / Perfetto trace of a program
(:mod:`.timeline`). Imports the build layer and the run API; never the applications or
``systolica.scaling``."""
