"""``python -m systolica.sim``: see :mod:`systolica.sim.cli`."""

import sys

from .cli import main

sys.exit(main())
