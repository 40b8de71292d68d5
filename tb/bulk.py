"""Bulk stimulus: whole programs handed to the simulation as memory files.

The per-cycle TB (:mod:`systolica.tb.tile_tb`) wakes Python twice per clock cycle; here the
harness ``tb/harness.v`` holds the stimulus in memories loaded with ``$readmemh``, drives
the tile's streams itself (with seeded idle and backpressure), and captures every result
beat and cycle stamp, so Python wakes once per program. The host side of this module packs
whole programs with numpy from the Amaranth layouts' field offsets and checks every captured
result with the same model and scoreboard as the per-cycle TB. The cocotb side is
:mod:`systolica.tb.cases.bulk`, which imports nothing of the host side (so the simulator
process starts quickly).
"""

import math
from pathlib import Path

import numpy as np
from amaranth.lib import data

from systolica.hdl.layouts import (
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
)

from .model import TileModel
from .packing import LayoutPacker
from .scoreboard import Scoreboard

#: Verilog source of the harness (top module ``systolica_harness``).
HARNESS = Path(__file__).resolve().parent / "harness.v"
#: Top module name of the harness.
HARNESS_TOPLEVEL = "systolica_harness"
#: Instance name of the tile inside the harness (its scope in a dump of a bulk run).
HARNESS_TILE = "tile"
#: Smallest harness memory depth (beats per stream); larger programs get the next power of 2.
MIN_DEPTH = 4096


#: Memory the harness's stimulus and capture memories may take in a Verilator build, in
#: bytes: :func:`resident_depth` sizes them to it, so that one build serves every program
#: that fits instead of one build per program size.
RESIDENT_BYTES = 64 << 20


def harness_depth(beats):
    """Memory depth a harness needs for ``beats`` beats per stream (int, power of two)."""
    return max(MIN_DEPTH, 1 << math.ceil(math.log2(max(1, beats))))


def resident_depth(rows, cols, command_width, lane_width=16, mx=False):
    """The largest power-of-two memory depth whose harness memories fit in
    :data:`RESIDENT_BYTES` for a ``rows x cols`` tile with ``lane_width``-bit operand lanes
    (and their scales with ``mx``; int, at least :data:`MIN_DEPTH`).

    Per beat the harness holds a command, a stationary row, a moving vector and a result,
    each rounded up to 32-bit words as Verilator stores them, plus three 32-bit stamps.
    """
    def words(bits):
        return (bits + 31) // 32

    per_beat = 4 * (words(command_width) + words(stationary_layout(cols, lane_width, mx).size)
                    + words(moving_layout(rows, lane_width, mx).size)
                    + words(result_layout(cols).size) + 3)
    return max(MIN_DEPTH, 1 << int(math.log2(RESIDENT_BYTES // per_beat)))


class BulkProgram:
    """A program for the harness: beats for its memories and the expectations to check.

    Beats are kept as arrays and packed into memory files in one numpy pass
    (:class:`~systolica.tb.packing.LayoutPacker`); the captured results are unpacked and
    checked per program, with no Python object per beat.

    Parameters
    ----------
    config : systolica.hdl.config.TileConfig
        The tile: its size, PSUM and type set (read as attributes; tb imports no config).
    log : logging.Logger, optional
        Where the scoreboard reports mismatches.
    noise : numpy.random.Generator, optional
        Fill the operand bits the tile must ignore with random bits drawn from it:
        stationary lanes outside the matmul's M columns (from its tile's first column) and the
        high byte of every 8-bit operand lane (INT8, FP8;
        not in double-row mode, where it holds data; moving lanes ``>= K`` stay zero, as the
        layout asks). The golden model is not affected.
    """

    def __init__(self, config, log=None, noise=None):
        self.rows, self.cols = rows, cols = config.rows, config.cols
        self._noise = noise
        self.width = width = config.operand_width
        self.scoreboard = Scoreboard(log=log)
        self.mx = config.mx
        self.model = TileModel(rows, cols, self.scoreboard, config.psum_banks,
                               config.psum_entries, dtypes=config.dtypes,
                               double_row=config.double_row, mx=config.mx)
        self._packers = {"commands": LayoutPacker(command_layout()),
                         "stationary": LayoutPacker(stationary_layout(cols, width, self.mx)),
                         "moving": LayoutPacker(moving_layout(rows, width, self.mx)),
                         "results": LayoutPacker(result_layout(cols))}
        self._commands = []              # command beats (dicts of ints)
        self._stationary = []            # uint16 (uint32: 32-bit lanes) [K, cols] per matmul
        self._program = []               # every Command, in order
        self._moving = {}                # command index -> [N, rows] moving lanes (uint16;
                                         # uint32: 32-bit lanes)
        self._stationary_scales = []     # MX tile: E8M0 bits [K, cols] per matmul
        self._moving_scales = {}         # MX tile: command index -> [N, rows] E8M0 bits
        self._plan = None                # (commands packed, moving data, groups, scales)
        self.stationary_count = 0
        #: Status the harness reported: (rejected count, last error code), after check().
        self.status = None
        self._staged = []   # prepared matmuls whose golden model is still to come

    def _add_command(self, beat):
        self._commands.append({name: int(getattr(v, "value", v)) for name, v in beat.items()})

    def submit(self, stationary, moving, *, accumulate=False, ftz=False, bank=0, offset=0,
               perf_mode=None, is_transpose=False, tile_position=None, tile_size=None):
        """Add one matmul (see :meth:`TileModel.submit`); returns its record."""
        return self.submit_many([(stationary, moving, accumulate, ftz, bank, offset,
                                  perf_mode, is_transpose, tile_position, tile_size)])[0]

    def submit_many(self, matmuls):
        """Add matmuls that follow each other (``(stationary, moving, accumulate, ftz, bank,
        offset[, perf_mode[, is_transpose[, tile_position, tile_size]]])`` tuples; see
        :meth:`TileModel.submit_many`); returns their records."""
        self.stage_many(matmuls)
        return self.commit_staged()

    def stage_many(self, matmuls):
        """Check matmuls (as :meth:`submit_many`) and add their beats to the program, but
        leave their golden model for :meth:`commit_staged`, which can run while the
        simulator does (it needs only the operands). Nothing else may be submitted before
        :meth:`commit_staged`.

        Raises
        ------
        TypeError, ValueError
            As :meth:`TileModel.submit`, before any beat is added.
        """
        if self._staged:
            raise RuntimeError("commit the staged matmuls before staging more")
        self._staged = self.model.prepare_many(matmuls)
        for item in self._staged:
            self._stage(item)

    def _stage(self, item):
        """Add a prepared matmul's command and operand beats to the program."""
        command, s_bits, m_bits = self.model.stimulus(item)
        if self._noise is not None:
            s_bits, m_bits = self._scribble(item["command"], s_bits, m_bits)
        if self.mx:
            s_scales, m_scales = self.model.scales(item)
            if self._noise is not None:      # lanes past M: the tile loads scale 0 there
                outside = np.ones(self.cols, bool)
                outside[:item["command"].m] = False
                s_scales[:, outside] = self._noise.integers(0, 256, s_scales[:, outside].shape)
            self._stationary_scales.append(s_scales)
            self._moving_scales[len(self._program)] = m_scales
        self._add_command(command)
        self._moving[len(self._program)] = m_bits
        self._program.append(item["command"])
        self._stationary.append(s_bits)
        self.stationary_count += len(s_bits)

    def submit_mx(self, stationary, moving, stationary_scale, moving_scale, *,
                  accumulate=False, bank=0, offset=0, tile_position=None, tile_size=None,
                  dst_dtype="fp32", rounding="rne", seed=0):
        """Add one MX matmul (see :meth:`TileModel.submit_mx`; a tile generated with the
        ``mx`` type set); returns its record.

        Raises
        ------
        RuntimeError
            If matmuls are staged (commit them first).
        TypeError, ValueError
            As :meth:`TileModel.submit_mx`, before any beat is added.
        """
        if self._staged:
            raise RuntimeError("commit the staged matmuls before an MX matmul")
        item = self.model.prepare_mx(stationary, moving, stationary_scale, moving_scale,
                                     accumulate, bank, offset, tile_position, tile_size,
                                     dst_dtype, rounding, seed)
        self._stage(item)
        return self.model.commit_mx(item)

    def _scribble(self, command, s_bits, m_bits):
        """Random bits where the tile must ignore them (see ``noise``)."""
        from systolica.golden.formats import format_of

        rng = self._noise
        s_bits, m_bits = s_bits.copy(), m_bits.copy()
        row, col = command.tile_position or (0, 0)
        rows = command.tile_size[0] if command.tile_size else self.rows
        outside = np.ones(self.cols, bool)
        outside[col:col + command.m] = False
        s_bits[:, outside] = rng.integers(0, 1 << self.width, size=s_bits[:, outside].shape)
        if not command.double_row and not command.mx:   # there the high bytes hold data
            lanes = ((s_bits[:, col:col + command.m], command.dtype),
                     (m_bits[:, row:row + min(command.k, rows)], command.mtype))
            for bits, name in lanes:
                if format_of(name).width == 8:
                    bits |= (rng.integers(0, 256, size=bits.shape) << 8).astype(bits.dtype)
        return s_bits, m_bits

    def commit_staged(self):
        """Model the staged matmuls (golden sums, shadow PSUM, expectations); returns their
        records (list). Until it returns, :attr:`result_count` is not to be read."""
        if not self._staged:
            return []
        records = self.model.commit_many(self._staged)
        self._staged = []
        return records

    def submit_command(self, command):
        """Add a READ or an illegal command (see :meth:`TileModel.submit_command`); returns
        its record."""
        if self._staged:
            raise RuntimeError("commit the staged matmuls before a READ or another command")
        record, beat = self.model.submit_command(command)
        self._add_command(beat)
        self._program.append(command)
        return record

    def drop_stationary(self):
        """Send no stationary beats at all (tests of the stuck-tile timeout only)."""
        self._stationary, self.stationary_count = [], 0

    @property
    def command_count(self):
        """Command beats of the program (int)."""
        return len(self._commands)

    def _packed(self):
        """``(moving data, groups)`` of the program's moving beats, packed as the host
        sends them (matmuls in flight together share beats), and the model's
        :attr:`~TileModel.events` and :attr:`~TileModel.moving_owners` for the check."""
        if self._plan is None or self._plan[0] != len(self._program):
            moving, results = self.model.program_beats(self._program)
            data, groups = self.model.pack(self._program, self._moving, moving)
            scales = (self.model.pack(self._program, self._moving_scales, moving)[0]
                      if self.mx else None)
            self.model.events, self.model.moving_owners = results, moving
            self._plan = (len(self._program), data, groups, scales)
        return self._plan[1:3]

    @property
    def moving_count(self):
        """Moving beats of the program, packed (int)."""
        return len(self._packed()[0])

    @property
    def result_count(self):
        """Result beats the program expects, staged matmuls' included (int)."""
        self._packed()
        return self.model.result_count

    @property
    def depth(self):
        """Harness memory depth this program needs (int)."""
        return harness_depth(max(self.command_count, self.stationary_count,
                                 self.moving_count, self.result_count))

    def write(self, folder):
        """Write the memory files into ``folder``; return the harness plusargs (list of str)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        names = self._commands[0].keys() if self._commands else ()
        commands = {name: np.array([c[name] for c in self._commands]) for name in names}
        contents = {
            "commands": (self.command_count, commands),
            "stationary": (self.stationary_count, {"data": _stack(self._stationary, self.cols)}),
            "moving": (self.moving_count, dict(zip(("data", "groups"), self._packed(),
                                                   strict=True))),
        }
        if self.mx:
            contents["stationary"][1]["scale"] = _stack(self._stationary_scales, self.cols)
            contents["moving"][1]["scale"] = self._plan[3]
        files = {}
        for name, (beats, values) in contents.items():
            path = folder / f"{name}.hex"
            path.write_text(self._packers[name].pack_hex(beats, **values) or "0\n")
            files[name] = path
        return [f"+commands={files['commands']}", f"+c_count={self.command_count}",
                f"+stationary={files['stationary']}", f"+s_count={self.stationary_count}",
                f"+moving={files['moving']}", f"+m_count={self.moving_count}",
                f"+r_count={self.result_count}",
                f"+results={folder / 'results.hex'}", f"+rstamps={folder / 'rstamps.hex'}",
                f"+mstamps={folder / 'mstamps.hex'}", f"+cstamps={folder / 'cstamps.hex'}"]

    def check(self, folder, status=None):
        """Read the harness's captured results and stamps from ``folder`` and check them.

        Every result beat goes through the scoreboard; cycle stamps are converted so that
        cycle 0 is the first cycle a beat can transfer (as in the per-cycle TB and
        ``golden.timing``). ``status`` is the harness's final ``(rejected, error)``; it
        must equal the model's prediction. Returns the number of result beats read (int).

        Raises
        ------
        FileNotFoundError
            If the harness wrote no results (the simulation did not finish).
        AssertionError
            If ``status`` differs from the rejections the model predicts.
        """
        if self._staged:
            raise RuntimeError("commit the staged matmuls before checking results")
        folder = Path(folder)

        def stamps(name):
            path = folder / name
            if not path.is_file():
                return np.zeros(0, np.int64)
            return _read_words(path.read_text()) - 1

        if self.result_count:
            results = self._packers["results"].unpack_hex((folder / "results.hex").read_text())
        else:
            results = {"data": np.zeros((0, self.cols), np.uint64),
                       "last": np.zeros(0, np.uint64)}
        lanes, last = results["data"].astype(np.uint32), results["last"].astype(np.int64)
        rstamps = stamps("rstamps.hex")
        count = min(len(lanes), len(rstamps))
        self._packed()
        self.model.on_results(lanes[:count], rstamps[:count], last[:count])
        self.model.stamp(stamps("cstamps.hex"), stamps("mstamps.hex"))
        if status is not None:
            self.status = tuple(status)
            want = self.model.expected_status()
            assert self.status == want, (
                f"status: {self.status[0]} commands rejected (last error code "
                f"{self.status[1]}); the model expects {want[0]} (code {want[1]})")
        return count


def _stack(blocks, lanes):
    """Concatenate per-matmul ``[beats, lanes]`` arrays (an empty ``[0, lanes]`` if none)."""
    return np.concatenate(blocks) if blocks else np.zeros((0, lanes), np.uint16)


_STAMPS = LayoutPacker(data.StructLayout({"cycle": 32}))


def _read_words(text):
    """The 32-bit words of a ``$writememh`` file (int64 array; ``//`` comments skipped)."""
    return _STAMPS.unpack_hex(text)["cycle"].astype(np.int64)
