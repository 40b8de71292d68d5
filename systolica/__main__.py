"""``python -m systolica``: the same as the ``systolica`` command
(:mod:`systolica.sim.apps.main`)."""

from systolica.sim.apps.main import main

raise SystemExit(main())
