"""Error injection for tests only: a golden model that expects one wrong PSUM word, so a
run fails on purpose and the checkers' failure paths (the scoreboard's report, the fuzzer's
replay line, the regression's reproduce-with-waves command) can be tested.

Production code never imports this module. The cocotb regression module
(:mod:`systolica.tb.cases.tile`) uses :func:`model_class`, so a reproduce command run in a
shell can switch it on with ``SYSTOLICA_CORRUPT_GOLDEN=1``
(:data:`systolica.tb.protocol.CORRUPT_GOLDEN`); host-side tests put
:class:`CorruptFirstMatmul` in place of :class:`~systolica.tb.model.TileModel` directly.
"""

import os

from . import protocol
from .model import TileModel

#: The bit of PSUM [0, 0] that the corrupted golden model flips in the first matmul.
CORRUPT_BIT = 4


class CorruptFirstMatmul(TileModel):
    """:class:`~systolica.tb.model.TileModel` whose first accepted matmul expects bit
    :data:`CORRUPT_BIT` of PSUM [0, 0] flipped (one wrong word; every later one is right)."""

    def expectation(self, golden, index):
        if index:
            return golden
        golden = golden.copy()          # uint32 bit patterns [cols, N]
        golden[0, 0] ^= 1 << CORRUPT_BIT
        return golden


def model_class():
    """:class:`CorruptFirstMatmul` when ``$SYSTOLICA_CORRUPT_GOLDEN`` is ``1``, else
    :class:`~systolica.tb.model.TileModel`."""
    return CorruptFirstMatmul if os.environ.get(protocol.CORRUPT_GOLDEN) == "1" else TileModel
