"""``python -m systolica``: the same as the ``systolica`` command
(:mod:`systolica.cli.main`)."""

from systolica.cli.main import main

raise SystemExit(main())
