"""A stand-in for :func:`systolica.nki.engines.schedule` until the engine timing model
(branch nki-engines) is merged: a Profile-like object that counts instructions per opcode,
engine and source line and reports no time. Delete this file at the merge."""

import json
from collections import Counter

from .instructions import ENGINES


class StubProfile:
    """Profile-like: the attributes of ``systolica.nki.engines.Profile``, times all zero."""

    stub = True

    def __init__(self, instructions, target):
        self.target = target
        self.seconds = 0.0
        self.cycles = dict.fromkeys(ENGINES, 0)
        self.engine_busy = dict.fromkeys(ENGINES, 0.0)
        self.mfu = 0.0
        self.hbm_bytes = sum(i.nbytes for i in instructions if i.engine == "dma" and
                             "hbm" in (i.params.get("src"), i.params.get("dst")))
        self.hbm_bandwidth = 0.0
        self.critical_path = []
        self.instructions = [{"index": i.index, "engine": i.engine, "start": 0.0, "end": 0.0}
                             for i in instructions]
        self._rows = Counter((i.opcode, i.engine, i.source) for i in instructions)

    def table(self):
        """Rows ``(opcode, engine, source line, count, total seconds)``."""
        return [(op, eng, src, n, 0.0) for (op, eng, src), n in sorted(self._rows.items())]

    def to_json(self):
        return {"target": self.target, "seconds": self.seconds, "cycles": self.cycles,
                "engine_busy": self.engine_busy, "mfu": self.mfu, "hbm_bytes": self.hbm_bytes,
                "hbm_bandwidth": self.hbm_bandwidth, "critical_path": self.critical_path,
                "table": [list(r) for r in self.table()], "stub": True}

    def write_trace(self, path):
        with open(path, "w") as f:
            json.dump({"traceEvents": []}, f)

    def plot(self, path):
        raise NotImplementedError("the timeline needs the engine timing model (nki-engines)")

    def __str__(self):
        lines = ["opcode               engine  source                count  (no timing: "
                 "stub schedule)"]
        lines += [f"{op:<20} {eng:<7} {src:<21} {n:>5}" for op, eng, src, n, _t in self.table()]
        return "\n".join(lines)


def schedule(instructions, target="trn2", *, tile_cycles=None):
    """A :class:`StubProfile` of ``instructions`` (``tile_cycles`` is ignored)."""
    del tile_cycles
    return StubProfile(list(instructions), target)
