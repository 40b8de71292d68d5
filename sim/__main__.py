"""``python -m systolica.sim``: ``systolica sim`` (:mod:`systolica.cli.simulate`);
``python -m systolica.sim waves``: ``systolica waves`` (:mod:`systolica.cli.waves`).
Kept as an alias of the ``systolica`` command."""

import sys

if sys.argv[1:2] == ["waves"]:
    from systolica.cli.waves import main

    sys.exit(main(sys.argv[2:]))

from systolica.cli.simulate import main  # noqa: E402

sys.exit(main())
