"""``python -m systolica.sim``: see :mod:`systolica.sim.cli`; ``python -m systolica.sim waves``:
see :mod:`systolica.sim.waves`."""

import sys

if sys.argv[1:2] == ["waves"]:
    from .waves import main

    sys.exit(main(sys.argv[2:]))

from .cli import main  # noqa: E402

sys.exit(main())
