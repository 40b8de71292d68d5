"""``python -m systolica.sim``: ``systolica sim`` (:mod:`systolica.sim.apps.simulate`);
``python -m systolica.sim waves``: ``systolica waves`` (:mod:`systolica.sim.apps.waves`).
Kept as an alias of the ``systolica`` command."""

import sys

if sys.argv[1:2] == ["waves"]:
    from .apps.waves import main

    sys.exit(main(sys.argv[2:]))

from .apps.simulate import main  # noqa: E402

sys.exit(main())
