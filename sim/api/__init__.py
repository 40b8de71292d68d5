"""The run API: matmuls and command programs on the RTL tile (:mod:`.runs`), any-size GEMMs
cut into tile programs (:mod:`.tiling`) and the engines that run them serially or on a Dask
cluster (:mod:`.engine`). Imports the build layer; never the applications or
``systolica.scaling``."""
