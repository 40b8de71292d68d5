"""``python -m systolica``: the same as the ``systolica`` command (:mod:`systolica.sim.main`)."""

from systolica.sim.main import main

raise SystemExit(main())
