"""``python -m systolica.scaling``: the same as the ``systolica`` command."""

from .cli import main

raise SystemExit(main())
