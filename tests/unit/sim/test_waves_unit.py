"""Unit tier of the waves tooling: the BF16/FP32 filter, save files, viewer, reproduce commands.

No simulator runs here (tests/regression/waves/test_waves_savefile.py and
tests/regression/waves/test_waves_reproduce.py run them).
"""

import os
import select
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.hdl import Shape

from systolica.cli import waves as waves_cli
from systolica.hdl.config import TileConfig
from systolica.sim.waves import gtkwave as waves
from systolica.sim.waves.gtkwave_filter import decode
from systolica.sim.waves.gtkwave_filter import main as filter_main

REPO = Path(__file__).resolve().parents[3]   # tests/<tier>/<area>/this file


@pytest.mark.parametrize("text,kind,shown", [
    ("3FC0", "bf16", "1.5"), ("bf80", "bf16", "-1"), ("8000", "bf16", "-0"),
    ("0000", "bf16", "0"), ("7F80", "bf16", "+Inf"), ("FF80", "bf16", "-Inf"),
    ("7FC0", "bf16", "NaN"), ("7FC1", "bf16", "NaN(0x7FC1)"), ("7F7F", "bf16", "3.39e+38"),
    ("0001", "bf16", "9e-41"), ("3E9A", "bf16", "0.3"), ("3E9B", "bf16", "0.303"),
    ("3F800000", "fp32", "1"), ("3DCCCCCD", "fp32", "0.1"), ("7FC00000", "fp32", "NaN"),
    ("FFC00001", "fp32", "NaN(0xFFC00001)"), ("00000001", "fp32", "1e-45"),
    ("80000000", "fp32", "-0"), ("C2F6E979", "fp32", "-123.456"),
    ("xxxx", "bf16", "xxxx"), ("zzzz0000", "fp32", "zzzz0000"), ("3fc0\n", "bf16", "1.5"),
])
def test_filter_decodes_bit_patterns(text, kind, shown):
    assert decode(text, kind) == shown


def test_filter_output_reads_back_to_the_same_bits():
    import ml_dtypes
    import numpy as np

    bits = np.arange(0, 1 << 16, 7, dtype=np.uint16)
    values = bits.view(ml_dtypes.bfloat16)
    finite = np.isfinite(values.astype(np.float32))
    for b, v in zip(bits[finite], values[finite], strict=True):
        back = np.float32(float(decode(f"{int(b):04X}", "bf16"))).astype(ml_dtypes.bfloat16)
        assert back.view(np.uint16) == b or (v == 0 and back == 0), hex(b)


def test_filter_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="kind must be one of bf16, fp32, fp16, .*not 'fp64'"):
        decode("3C00", "fp64")
    assert filter_main(["fp64"], stdin=[], stdout=None) == 2


def test_narrow_float_filters_read_back_every_pattern():
    import numpy as np

    from systolica.golden import FORMATS
    from systolica.sim.waves.gtkwave_filter import NARROW

    for kind, fields in NARROW.items():
        fmt = FORMATS[kind]
        assert fields == (fmt.exp_bits, fmt.man_bits, fmt.bias, fmt.has_inf)
        bits = np.arange(1 << fmt.width, dtype=f"u{fmt.width // 8}")
        for b, v in zip(bits, bits.view(fmt.dtype).astype(np.float64), strict=True):
            shown = decode(f"{int(b):0{fmt.width // 4}X}", kind)
            if np.isnan(v):
                assert shown.startswith("NaN("), (kind, hex(b))
            elif np.isinf(v):
                assert shown == ("+Inf" if v > 0 else "-Inf"), (kind, hex(b))
            else:
                back = np.array(float(shown)).astype(fmt.dtype).view(bits.dtype)
                assert back == b or (v == 0 and shown in ("0", "-0")), (kind, hex(b), shown)
    assert decode("77", "e4m3") == "240" and decode("7E", "e4m3fn") == "448"


# ---- MX: x4 words and E8M0 scales ---------------------------------------------------------

@pytest.mark.parametrize("text,kind,shown", [
    # e4m3fn bytes, lane 0 = bits 7..0: 0x38 = 1.0, 0xC0 = -2, 0x40 = 2, 0x7E = 448,
    # 0xFF = NaN (S.1111.111), 0x80 = -0, 0x01 = 2^-9 (the smallest subnormal; the shortest
    # decimal that reads back, as FP8 lanes show it)
    ("7E40C038", "x4-e4m3fn", "1 | -2 | 2 | 448"),
    ("018000FF", "x4-e4m3fn", "NaN(0xFF) | 0 | -0 | 0.002"),
    # e5m2 bytes: 0x3C = 1.0, 0x7C = +Inf, 0xFC = -Inf, 0x7B = 57344
    ("7BFC7C3C", "x4-e5m2", "1 | +Inf | -Inf | 57344"),
    # e2m1 nibbles, lane 0 = bits 3..0: 1 = 0.5, A = -1 (1.01.0), 7 = 6, F = -6; a 32-bit
    # value keeps its low 16 bits
    ("F7A1", "x4-e2m1", "0.5 | -1 | 6 | -6"), ("12348000", "x4-e2m1", "0 | 0 | 0 | -0"),
    ("7E40C038", "x4", "38 | C0 | 40 | 7E"),
    ("7F", "e8m0", "2^0"), ("00", "e8m0", "2^-127"), ("FE", "e8m0", "2^127"),
    ("FF", "e8m0", "NaN"), ("80", "e8m0", "2^1"), ("xx", "e8m0", "xx"),
    ("zzzzzzzz", "x4-e5m2", "zzzzzzzz"),
])
def test_filter_decodes_x4_words_and_e8m0_scales(text, kind, shown):
    assert decode(text, kind) == shown


def test_x4_filters_show_the_elements_ml_dtypes_decodes_in_lane_order():
    """Random x4 words of each MX type: the four numbers shown are ml_dtypes' values of the
    word's elements, lane j from bits 8j+7..8j (FP8) or 4j+3..4j (MXFP4)."""
    import ml_dtypes
    import numpy as np

    from systolica.golden.mx import MX_TYPES
    from systolica.sim.waves.gtkwave_filter import X4

    rng = np.random.default_rng(26)
    names = {name: dtype for dtype, (name, _, _) in MX_TYPES.items()}
    assert {element for _, element in X4.values()} == {*names, None}
    for kind, (bits, element) in X4.items():
        if element is None:
            continue
        lane_bits = 4 if names[element] == np.dtype(ml_dtypes.float4_e2m1fn) else 8
        assert bits == 4 * lane_bits, kind
        for _ in range(200):
            codes = [int(c) for c in rng.integers(0, 1 << lane_bits, 4)]
            word = sum(code << (lane_bits * j) for j, code in enumerate(codes))
            want = np.array(codes, np.uint8).view(names[element]).astype(np.float64)
            shown = decode(f"{word:0{bits // 4}X}", kind).split(" | ")
            assert len(shown) == 4, (kind, hex(word))
            for text, value in zip(shown, want, strict=True):
                if np.isnan(value):
                    assert text.startswith("NaN"), (kind, hex(word), text)
                elif np.isinf(value):
                    assert text == ("+Inf" if value > 0 else "-Inf"), (kind, hex(word))
                else:
                    back = np.float64(float(text)).astype(names[element]).astype(np.float64)
                    assert back == value and np.signbit(float(text)) == np.signbit(value), \
                        (kind, hex(word), text)


def test_e8m0_filter_shows_every_scale_as_a_power_of_two():
    import ml_dtypes
    import numpy as np

    values = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    for code, value in enumerate(values):
        shown = decode(f"{code:02X}", "e8m0")
        if np.isnan(value):
            assert code == 0xFF and shown == "NaN"
        else:
            assert shown.startswith("2^") and np.ldexp(1.0, int(shown[2:])) == value, code


def _generated(tmp_path, rows=2, cols=3, simulator="icarus", mode="bf16"):
    dump = tmp_path / "dump.fst"
    dump.write_bytes(b"")
    return waves.write_save_file(tmp_path / "tile.gtkw", dump, config=TileConfig(rows, cols),
                                 simulator=simulator, mode=mode)


def test_the_generated_filter_process_answers_one_line_per_value(tmp_path):
    save = _generated(tmp_path)
    launcher = tmp_path / "tile-gtkwave" / "bf16-filter"
    assert os.access(launcher, os.X_OK)
    assert f"^>1 {launcher}" in save.read_text()
    process = subprocess.Popen([str(launcher)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    try:
        for value, shown in (("3FC0", "1.5"), ("C040", "-3"), ("7FC0", "NaN")):
            process.stdin.write(value + "\n")
            process.stdin.flush()
            # GTKWave waits for each answer before it sends the next value.
            ready, _, _ = select.select([process.stdout], [], [], 10)
            assert ready, "the filter did not answer within 10 s (not flushed?)"
            assert process.stdout.readline().strip() == shown
    finally:
        process.stdin.close()
        assert process.wait(timeout=10) == 0


def _groups(save):
    return [line[1:] for line in save.read_text().splitlines() if line.startswith("-")
            and not line.startswith("-group_end")]


def test_save_file_groups_in_order(tmp_path):
    groups = _groups(_generated(tmp_path))
    opened = groups[::2]
    assert opened == ["Clock and reset", "Command stream", "Status", "LoadStationary stream",
                      "MultiplyMoving stream", "PSUM result stream", "PSUM", "Tile state",
                      "PE row 0", "PE row 1"]
    assert groups[1::2] == opened   # each group is closed again


def test_pe_rows_are_collapsed_and_only_up_to_8x8(tmp_path):
    text = _generated(tmp_path, rows=8, cols=8).read_text()
    assert sum(f"-PE row {k}" in text for k in range(8)) == 8
    assert text.count("pe_7_7 weight") == 1
    # Collapsed groups carry GTKWave's "closed" flag on their begin marker.
    from vcd.gtkw import GTKWFlag

    lines = text.splitlines()
    begin = lines.index("-PE row 3")
    assert int(lines[begin - 1][1:], 16) & GTKWFlag.closed.value
    for rows, cols in ((9, 8), (8, 9)):
        assert "PE row" not in _generated(tmp_path, rows, cols).read_text()


def test_lanes_are_signed_decimal_for_int8_and_filtered_for_bf16(tmp_path):
    from vcd.gtkw import GTKWFlag

    def flags_of(text, alias):
        flags = None
        for line in text.splitlines():
            if line.startswith("@"):
                flags = int(line[1:], 16)
            elif alias in line:
                return flags, line
        raise AssertionError(f"{alias} not in the save file")

    int8 = _generated(tmp_path, mode="int8").read_text()
    flags, line = flags_of(int8, "#{moving k1}")
    assert flags & GTKWFlag.signed.value and not flags & GTKWFlag.ptranslated.value
    # Lane 1's low byte: bits 23..16 of the 34-bit payload (two lanes, then the two row
    # cells' bits), MSB-first positions 10..17.
    assert line.split()[2:] == [f"({p})systolica_tile.moving__payload[33:0]"
                                for p in range(10, 18)]
    flags, line = flags_of(int8, "#{psum m2}")
    assert flags & GTKWFlag.signed.value and len(line.split()) == 2 + 32
    bf16 = _generated(tmp_path, mode="bf16").read_text()
    for alias in ("#{moving k1}", "#{stationary m2}", "#{psum m0}", "pe_1_2 psum"):
        flags, _ = flags_of(bf16, alias)
        assert flags & GTKWFlag.ptranslated.value, alias
    mixed = _generated(tmp_path, mode="mixed").read_text()
    assert "#{moving k0 int8}" in mixed and "#{moving k0 bf16}" in mixed
    assert "#{psum m0 int32}" in mixed and "#{psum m0 fp32}" in mixed


def _traces(text, group):
    """{alias: (flags, refs, filter file or None)} of the traces of one group of a save file."""
    lines = text.splitlines()
    begin = lines.index(f"-{group}")
    lines = lines[begin + 1:lines.index(f"-{group}", begin + 1)]
    traces, flags, filter_file = {}, None, None
    for line in lines:
        if line.startswith("@"):
            flags = int(line[1:], 16)
        elif line.startswith("^") and not line.startswith("^>"):
            filter_file = line.split(None, 1)[1]
        elif line.startswith(("#{", "+{")):
            alias = line[2:line.index("}")]
            traces[alias] = (flags, line[line.index("}") + 1:].split(), filter_file)
            filter_file = None
    return traces


def _picked_bits(refs):
    """The bit numbers (LSB = 0) a ``#{alias} (position)name[msb:0] ...`` trace picks."""
    bits = []
    for ref in refs:
        position, _, name = ref[1:].partition(")")
        width = int(name.split("[")[1].split(":")[0]) + 1
        bits.append(width - 1 - int(position))
    return bits


def _table(path):
    lines = Path(path).read_text().splitlines()
    return dict(line.split(None, 1) for line in lines)


def test_command_fields_are_decoded_at_their_layout_offsets(tmp_path):
    from vcd.gtkw import GTKWFlag

    from systolica.hdl.layouts import command_layout

    traces = _traces(_generated(tmp_path).read_text(), "Command stream")
    layout = command_layout()
    payload = f"systolica_tile.command__payload[{layout.size - 1}:0]"
    for name, field in layout:
        flags, refs, filter_file = traces[name]
        assert {ref.partition(")")[2] for ref in refs} == {payload}, name
        width = len(refs)
        # MSB first, so the picked bits run from the field's top bit down to its offset.
        assert _picked_bits(refs) == list(range(field.offset + width - 1, field.offset - 1, -1))
        if name in ("bank", "offset", "k", "m", "n", "tile_row", "tile_col", "tile_rows",
                    "tile_cols"):
            assert flags & GTKWFlag.dec.value and filter_file is None, name
        elif name == "seed":     # a bit pattern (XORWOW state), in hex
            assert flags & GTKWFlag.hex.value and filter_file is None, name
        else:
            assert width == field.width and filter_file, name
    assert _table(traces["op"][2]) == {"0": "MATMUL", "1": "READ"}
    types = {"0": "INT8", "1": "BF16", "2": "FP16", "3": "E4M3", "4": "E5M2", "5": "E3M4",
             "6": "E4M3FN", "7": "TF32", "8": "FP32"}
    assert _table(traces["dtype"][2]) == _table(traces["moving_dtype"][2]) == types
    assert _table(traces["dtype_hi"][2]) == _table(traces["moving_dtype_hi"][2]) == {
        "0": "code 0-7", "1": "code + 8 (FP32)"}
    assert _table(traces["double_row"][2]) == {"0": "single row", "1": "double row"}
    assert _table(traces["accumulate"][2]) == {"0": "overwrite", "1": "accumulate"}
    assert _table(traces["transpose"][2]) == {"0": "matmul", "1": "transpose"}
    assert _table(traces["tiled"][2]) == {"0": "whole array", "1": "tile"}
    assert _table(traces["fp4"][2]) == {"0": "MXFP8 x MXFP8", "1": "MXFP4 stationary",
                                        "2": "MXFP4 moving", "3": "MXFP4 both"}
    assert _table(traces["bf16_out"][2]) == {"0": "FP32 PSUM", "1": "BF16 PSUM"}
    assert _table(traces["stochastic"][2]) == {"0": "round to nearest even",
                                               "1": "stochastic"}
    assert len(traces["bank"][1]) == 8 and len(traces["n"][1]) == 16
    assert traces["valid"][1] == ["systolica_tile.command__valid"]


def test_status_shows_the_count_and_the_error_by_name(tmp_path):
    from vcd.gtkw import GTKWFlag

    traces = _traces(_generated(tmp_path).read_text(), "Status")
    flags, refs, _ = traces["rejected"]
    assert flags & GTKWFlag.dec.value and _picked_bits(refs) == list(range(15, -1, -1))
    _, refs, filter_file = traces["error"]
    assert _picked_bits(refs) == [20, 19, 18, 17, 16]
    assert _table(filter_file) == {"00": "NONE", "01": "BANK_RANGE", "02": "K_RANGE",
                                   "03": "M_RANGE", "04": "N_RANGE", "05": "DOUBLE_ROW_TYPE",
                                   "06": "TYPE_NOT_BUILT", "07": "TRANSPOSE_DOUBLE_ROW",
                                   "08": "TRANSPOSE_ACCUMULATE", "09": "TRANSPOSE_FTZ",
                                   "0a": "TILE_SIZE", "0b": "TILE_POSITION",
                                   "0c": "TILE_K_RANGE", "0d": "TILE_M_RANGE",
                                   "0e": "TILE_DOUBLE_ROW", "0f": "MX_TYPE", "10": "MX_K",
                                   "11": "MX_MODE", "12": "MX_TILE", "13": "DST_MODE"}


def test_psum_bank_and_entry_come_from_the_last_token(tmp_path):
    # 2 x 3 (three columns: one column cell): the token pipeline's last stage,
    # result.out_token = {addr[11:0], read, accumulate, ftz, fp32, last, valid}, with 8
    # banks of 512 entries.
    psum = _traces(_generated(tmp_path).read_text(), "PSUM")
    assert psum["write"][1] == ["systolica_tile.result.write"]
    for alias, bits in (("bank", [17, 16, 15]), ("entry", list(range(14, 5, -1))),
                        ("op", [5]), ("mode", [4]), ("ftz", [3]), ("dtype", [2])):
        refs = psum[alias][1]
        assert {ref.partition(")")[2] for ref in refs} == {"systolica_tile.result.out_token[17:0]"}
        assert _picked_bits(refs) == bits, alias
    assert _table(psum["dtype"][2]) == {"0": "INT32", "1": "FP32"}
    assert _table(psum["op"][2]) == {"0": "MATMUL", "1": "READ"}


@pytest.mark.parametrize("banks,entries,shown", [
    (8, 512, {"bank": 3, "entry": 9}),
    (1, 512, {"entry": 9}),                 # one bank: the address is the entry
    (4, 1, {"bank": 2}),                    # one entry per bank: the address is the bank
    (3, 100, {"address (bank * 100 + entry)": 9}),   # not a power of two: the flat address
    (1, 1, {}),                             # a single word: no address bits at all
])
def test_psum_address_is_split_when_entries_is_a_power_of_two(tmp_path, banks, entries,
                                                                shown):
    save = waves.write_save_file(tmp_path / "t.gtkw", tmp_path / "d.fst",
                                 config=TileConfig(1, 1, psum_banks=banks,
                                                   psum_entries=entries),
                                 simulator="icarus")
    psum = _traces(save.read_text(), "PSUM")
    addressing = {alias: len(refs) for alias, (_, refs, _) in psum.items()
                  if alias not in ("write", "op", "mode", "dtype", "ftz")}
    assert addressing == shown
    depth_bits = (banks * entries - 1).bit_length()
    widths = {ref.partition(")")[2] for _, refs, _ in psum.values() for ref in refs
              if ref.startswith("(")}
    # 6 flags + addr
    assert widths == {f"systolica_tile.result.out_token[{5 + depth_bits}:0]"}


def test_partition_row_shows_as_a_number(tmp_path):
    from vcd.gtkw import GTKWFlag

    for rows, refs in ((2, ["systolica_tile.loader.load_row"]),
                       (5, ["systolica_tile.loader.load_row[2:0]"])):
        save = waves.write_save_file(tmp_path / "t.gtkw", tmp_path / "d.fst",
                                     config=TileConfig(rows, 1), simulator="icarus")
        flags, shown, _ = _traces(save.read_text(), "LoadStationary stream")["partition row k"]
        # A one-bit row counter goes in as a one-bit vector, so GTKWave prints 0/1.
        assert shown == refs and flags & GTKWFlag.dec.value
    save = waves.write_save_file(tmp_path / "t.gtkw", tmp_path / "d.fst",
                                 config=TileConfig(1, 1), simulator="icarus")
    assert "load_row" not in save.read_text()   # a 1-row tile has no row counter


def test_tile_state_is_named(tmp_path):
    save = _generated(tmp_path)
    text = save.read_text()
    traces = _traces(text, "Tile state")
    _, refs, filter_file = traces["command queue"]
    assert refs == ["systolica_tile.queue.queued[2:0]"]
    assert _table(filter_file)["7"] == "3 commands (full)"
    # Bit 0 of a [2:0] vector is GTKWave's position 2.
    assert ("#{queue entry 0} (2)systolica_tile.queue.queued[2:0] "
            "(2)systolica_tile.queue.loaded[2:0]") in text
    assert ("#{queue entry 2} (0)systolica_tile.queue.queued[2:0] "
            "(0)systolica_tile.queue.loaded[2:0]") in text
    assert _table(traces["queue entry 0"][2]) == {
        "0": "empty", "1": "loaded, not queued (illegal)", "2": "waiting for stationary",
        "3": "ready"}
    # 2 x 3: two buffer cells (the two rows; three columns are one cell), bit 2 i + b
    assert ("#{cell 0 buffer 0} (3)systolica_tile.loader.busy[3:0] "
            "(3)systolica_tile.loader.full[3:0]") in text
    assert ("#{cell 1 buffer 1} (0)systolica_tile.loader.busy[3:0] "
            "(0)systolica_tile.loader.full[3:0]") in text
    assert _table(traces["cell 1 buffer 1"][2]) == {
        "0": "free", "1": "loaded", "2": "in use", "3": "loaded and in use (illegal)"}
    assert "#{issue} systolica_tile.issue.running" in text
    assert _table(traces["issuing op"][2]) == {"0": "MATMUL", "1": "READ"}
    assert traces["issuing op"][1] == ["systolica_tile.issue.read"]
    for alias, signal in (("load into", "loader.load_buf"),
                          ("next matmul uses", "loader.buffers__sel"),
                          ("pipeline", "result.advance")):
        assert traces[alias][1] == [f"systolica_tile.{signal}"]
    assert ("systolica_tile.issue.running", 1, None) in waves.save_file_signals(save)


def test_internal_signals_come_from_the_published_probes(tmp_path):
    """Every internal signal the save file names is a published probe of the tile (or of a
    PE), and every probe the tile has at that size is shown."""
    from systolica.hdl.tile import COMMAND_QUEUE_DEPTH, pe_probes, tile_probes

    for rows, cols, types in ((1, 1, "all"), (2, 3, "all"), (8, 2, "int8+mx")):
        config = TileConfig(rows, cols, types)
        save = waves.write_save_file(tmp_path / "tile.gtkw", tmp_path / "dump.fst",
                                     config=config, simulator="icarus")
        scope = "systolica_tile."
        internal = {(name[len(scope):], width) for name, width, _ in
                    waves.save_file_signals(save) if "." in name[len(scope):]}
        probes = {(p.name, p.width) for p in tile_probes(config).values() if p.width}
        pes = {(p.name, p.width) for k in range(rows) for c in range(cols)
               for p in pe_probes(k, c, config.operand_width, config.mx).values()}
        assert internal == probes | pes
        traces = _traces(save.read_text(), "Tile state")
        assert len([a for a in traces if a.startswith("queue entry")]) == COMMAND_QUEUE_DEPTH
        assert _table(traces["command queue"][2])[
            f"{(1 << COMMAND_QUEUE_DEPTH) - 1:x}".upper()] == \
            f"{COMMAND_QUEUE_DEPTH} commands (full)"


def _procs(text, group):
    """{alias: filter process launcher name} of the traces of one group of a save file."""
    lines = text.splitlines()
    begin = lines.index(f"-{group}")
    procs, proc = {}, None
    for line in lines[begin + 1:lines.index(f"-{group}", begin + 1)]:
        if line.startswith("^>"):
            proc = Path(line.split(None, 1)[1]).name
        elif line.startswith(("#{", "+{")):
            procs[line[2:line.index("}")]] = proc
            proc = None
    return procs


def _mx_save(tmp_path, mode):
    return waves.write_save_file(tmp_path / "mx.gtkw", tmp_path / "mx.fst",
                                 config=TileConfig(8, 2, "int8+mx"), simulator="icarus",
                                 mode=mode)


def test_mx_lanes_show_x4_words_and_e8m0_scales_where_the_layouts_put_them(tmp_path):
    # 8 x 2 int8+mx: 32-bit lanes. LoadStationary payload = 2 lanes (bits 63..0) then two
    # 8-bit scales (79..64); MultiplyMoving = 8 lanes (255..0), 4 row-cell bits (259..256),
    # 8 scales (323..260); the result = 2 PSUM words (63..0), ...
    text = _mx_save(tmp_path, waves.MxLanes("e2m1", "e5m2", "bf16")).read_text()
    stationary = _traces(text, "LoadStationary stream")
    procs = _procs(text, "LoadStationary stream")
    # An MXFP4 side: four e2m1 values in the lane's bits [15:0].
    assert _picked_bits(stationary["stationary m1"][1]) == list(range(47, 31, -1))
    assert procs["stationary m1"] == "x4-e2m1-filter"
    assert _picked_bits(stationary["stationary m1 scale"][1]) == list(range(79, 71, -1))
    assert procs["stationary m1 scale"] == "e8m0-filter"
    moving, procs = _traces(text, "MultiplyMoving stream"), _procs(text, "MultiplyMoving stream")
    assert _picked_bits(moving["moving k3"][1]) == list(range(127, 95, -1))
    assert procs["moving k3"] == "x4-e5m2-filter"
    assert _picked_bits(moving["moving k3 scale"][1]) == list(range(291, 283, -1))
    assert procs["moving k7 scale"] == "e8m0-filter"
    result, procs = _traces(text, "PSUM result stream"), _procs(text, "PSUM result stream")
    # A BF16 PSUM word is the FP32 word of a BF16 value: its bits [31:16] through BF16.
    assert _picked_bits(result["psum m1"][1]) == list(range(63, 47, -1))
    assert procs["psum m1"] == "bf16-filter"
    # In the array an MXFP4 side is e4m3fn (converted in front of it); partial sums FP32.
    pe = _procs(text, "PE row 7")
    assert pe["pe_7_1 weight"] == "x4-e4m3fn-filter" and pe["pe_7_1 operand"] == "x4-e5m2-filter"
    assert pe["pe_7_1 psum"] == "fp32-filter" and pe["pe_7_1 scale"] == "e8m0-filter"
    assert "+{pe_7_1 scale} systolica_tile.array.pe_7_1.scale_in[7:0]" in text
    assert "+{pe_7_1 psum} systolica_tile.array.pe_7_1.psum_out[31:0]" in text
    fp8 = _mx_save(tmp_path, waves.MxLanes("e4m3fn", "e2m1")).read_text()
    assert _procs(fp8, "LoadStationary stream")["stationary m0"] == "x4-e4m3fn-filter"
    assert _picked_bits(_traces(fp8, "MultiplyMoving stream")["moving k0"][1]) == \
        list(range(15, -1, -1))
    assert _procs(fp8, "PSUM result stream")["psum m0"] == "fp32-filter"
    assert _procs(fp8, "PE row 0")["pe_0_0 operand"] == "x4-e4m3fn-filter"


def test_mx_lanes_of_unknown_types_show_bytes_and_other_modes_keep_theirs(tmp_path):
    text = _mx_save(tmp_path, "mx").read_text()
    procs = _procs(text, "MultiplyMoving stream")
    assert procs["moving k0"] == "x4-filter" and procs["moving k0 scale"] == "e8m0-filter"
    assert _procs(text, "PE row 0")["pe_0_0 weight"] == "x4-filter"
    assert _procs(text, "PSUM result stream")["psum m0"] == "fp32-filter"
    # An INT8 run on the mx tile: INT8 lanes (low byte of the 32-bit lane) and the scales.
    text = _mx_save(tmp_path, "int8").read_text()
    moving = _traces(text, "MultiplyMoving stream")
    assert _picked_bits(moving["moving k1"][1]) == list(range(39, 31, -1))
    assert _procs(text, "MultiplyMoving stream")["moving k1 scale"] == "e8m0-filter"
    assert "pe_0_0 scale" in _procs(text, "PE row 0")


def test_mx_psum_tokens_show_the_bf16_write(tmp_path):
    # 8 x 2 int8+mx: two column cells; each token is {seed[31:0], first, stochastic, bf16,
    # addr[11:0], read, accumulate, ftz, fp32, last, valid}: 53 bits, cell 1 above cell 0.
    text = _mx_save(tmp_path, "mx").read_text()
    psum = _traces(text, "PSUM")
    assert _picked_bits(psum["cell 0 dst"][1]) == [18]
    assert _picked_bits(psum["cell 0 rounding"][1]) == [19]
    assert _picked_bits(psum["cell 1 first"][1]) == [53 + 20]
    assert _picked_bits(psum["cell 1 seed"][1]) == list(range(53 + 52, 53 + 20, -1))
    from vcd.gtkw import GTKWFlag

    assert psum["cell 1 seed"][0] & GTKWFlag.hex.value and psum["cell 1 seed"][2] is None
    assert _table(psum["cell 0 dst"][2]) == {"0": "FP32 PSUM", "1": "BF16 PSUM"}
    assert _table(psum["cell 0 rounding"][2]) == {"0": "round to nearest even",
                                                 "1": "stochastic"}
    assert "cell 0 seed" not in _traces(_generated(tmp_path).read_text(), "PSUM")


def test_mx_lane_errors(tmp_path):
    with pytest.raises(ValueError, match="^MX lanes need a tile with the mx type set, not all; "
                                         "allowed: a TileConfig whose types include 'mx'"):
        _generated(tmp_path, mode="mx")
    with pytest.raises(ValueError, match="^MxLanes.moving must be one of e4m3fn, e5m2, e2m1 or "
                                         "None, not 'e4m3'$"):
        waves.MxLanes("e4m3fn", "e4m3")
    with pytest.raises(ValueError, match="^MxLanes.psum must be 'fp32' or 'bf16', not 'fp16'$"):
        waves.MxLanes(psum="fp16")


def test_the_x4_filter_process_answers_one_line_per_word(tmp_path):
    _mx_save(tmp_path, "mx")
    launcher = tmp_path / "mx-gtkwave" / "x4-e4m3fn-filter"
    # 0x38 = 1, 0xC0 = -2, 0x40 = 2, 0x7E = 448 (e4m3fn), lane 0 in the low byte
    result = subprocess.run([str(launcher)], input="7E40C038\nxxxxxxxx\n", capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["1 | -2 | 2 | 448", "xxxxxxxx"]


def test_save_file_signals_parses_what_the_writer_writes(tmp_path):
    signals = waves.save_file_signals(_generated(tmp_path, rows=2, cols=3))
    assert ("systolica_tile.clk", 1, None) in signals
    assert ("systolica_tile.queue.queued", 3, None) in signals
    assert ("systolica_tile.command__payload", 187, 1) in signals          # dtype LSB
    assert ("systolica_tile.status", 21, 20) in signals                   # error MSB
    assert ("systolica_tile.result.out_token", 18, 4) in signals                   # accumulate
    assert ("systolica_tile.array.pe_1_2.psum_out", 32, None) in signals
    assert all(bit is None or 0 <= bit < width for _, width, bit in signals)


def _verilog_top(rows, cols, instance=None, types="all"):
    """``(declared, fields)`` of the generated tile top of type set ``types`` (or of the
    module of one of its
    component ``instance`` s): {signal: width} and {signal: {field: (lsb, width)}} from
    Amaranth's ``assign \\sig.field = sig[msb:lsb];``."""
    import re

    from systolica.sim.builder.generate import TOPLEVEL, generate_verilog

    text, _ = generate_verilog(TileConfig(rows, cols, types))
    # An escaped identifier ends with a space.
    module = TOPLEVEL if instance is None else f"\\{TOPLEVEL}.{instance} "
    top = text[text.index(f"module {module}("):]
    top = top[:top.index("endmodule")]
    declared = {}
    for match in re.finditer(r"^\s*(?:input|output|wire|reg)\s+(?:\[(\d+):0\]\s+)?(\w+)\b",
                             top, re.M):
        declared[match[2]] = int(match[1]) + 1 if match[1] else 1
    fields = {}
    for match in re.finditer(r"assign \\((\w+)(?:\[\d+\])?)\.(\w+)\s+= \2\[(\d+)(?::(\d+))?\];",
                             top):
        msb = int(match[4])
        lsb = int(match[5]) if match[5] else msb
        fields.setdefault(match[1], {})[match[3]] = (lsb, msb - lsb + 1)
    return declared, fields


@pytest.mark.parametrize("rows,cols,types", [(2, 3, "all"), (1, 1, "all"), (8, 2, "int8+mx"),
                                            (2, 2, "fp32")])
def test_saved_top_signals_are_in_the_generated_verilog(tmp_path, rows, cols, types):
    # The simulator-free half of tests/regression/waves/test_waves_savefile.py: every signal
    # of the tile top that the save file names is declared there with that width (32-bit
    # operand lanes, and scales, on the mx and fp32 tiles).
    declared, _ = _verilog_top(rows, cols, types=types)
    save = waves.write_save_file(tmp_path / "tile.gtkw", tmp_path / "dump.fst",
                                 config=TileConfig(rows, cols, types), simulator="icarus",
                                 mode="bf16")
    top = [(name.removeprefix("systolica_tile."), width, bit) for name, width, bit
           in waves.save_file_signals(save) if name.count(".") == 1]
    assert len(top) > 15
    assert sorted((name, width) for name, width, _ in top
                  if declared.get(name) != width) == []


def test_token_layout_mirrors_the_tile():
    from systolica.hdl.tile import tile_probes

    probe = tile_probes(TileConfig(2, 2))["psum_token"]     # two column cells
    instance, port = probe.name.split(".")
    _, fields = _verilog_top(2, 2, instance)
    size = Shape.cast(probe.shape.elem_shape).width
    for h in range(probe.shape.length):
        assert fields[f"{port}[{h}]"] == {name: (lsb + h * size, width) for name, (lsb, width)
                                          in waves._fields(probe.shape.elem_shape).items()}


def test_save_file_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown lane mode 'fp8'"):
        _generated(tmp_path, mode="fp8")
    with pytest.raises(ValueError, match="unknown simulator 'questa'"):
        _generated(tmp_path, simulator="questa")
    with pytest.raises(TypeError, match="^config must be a TileConfig, not tuple$"):
        waves.write_save_file(tmp_path / "t.gtkw", tmp_path / "d.fst", config=(1, 1),
                              simulator="icarus")


# ---- viewer --------------------------------------------------------------------------------

def test_without_a_display_the_command_is_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DISPLAY", raising=False)
    assert waves.open_or_print(tmp_path / "d.fst", tmp_path / "d.gtkw") is False
    out = capsys.readouterr().out
    assert f"gtkwave {tmp_path / 'd.fst'} {tmp_path / 'd.gtkw'}" in out


def test_with_a_display_gtkwave_is_started(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "bin" / "gtkwave"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'args'}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":99")
    assert waves.open_or_print(tmp_path / "d.fst", tmp_path / "d.gtkw") is True
    for _ in range(100):
        if (tmp_path / "args").is_file() and (tmp_path / "args").read_text():
            break
        import time

        time.sleep(0.05)
    assert (tmp_path / "args").read_text().split() == [str(tmp_path / "d.fst"),
                                                       str(tmp_path / "d.gtkw")]
    assert "opened GTKWave" in capsys.readouterr().out


def test_open_without_gtkwave_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DISPLAY", ":99")
    with pytest.raises(waves.ViewerNotFoundError, match="gtkwave is not on PATH; install"):
        waves.open_or_print(tmp_path / "d.fst", tmp_path / "d.gtkw", open_viewer=True)


# ---- command line --------------------------------------------------------------------------

@pytest.mark.parametrize("argv,env,message", [
    (["--format", "lxt"], {}, "FORMAT must be one of fst, vcd, not 'lxt'"),
    ([], {"FORMAT": "ghw"}, "FORMAT must be one of fst, vcd, not 'ghw'"),
    ([], {"SIM": "questa"}, "SIM must be one of icarus, verilator, not 'questa'"),
    (["--sim", "questa"], {}, "argument --sim: invalid choice: 'questa'"),
    (["--test", "test_nope"], {}, "--test: no cocotb test 'test_nope' in systolica.tb"),
    (["--open"], {"DISPLAY": ""}, "--open: no display ($DISPLAY is unset)"),
    (["--rows", "0"], {}, "rows must be a positive integer, not 0 (--rows or ROWS)"),
    ([], {"COLS": "x"}, "cols must be a positive integer, not 'x'"),
    (["--types", "int4"], {}, "unknown type set 'int4'; allowed: int8, bf16, fp16, fp8, "
                              "fp8-double-row, fp32, mx, all (joined with '+' or ',') "
                              "(--types or TYPES)"),

    (["--mx", "e4m3"], {}, "--mx (MX) must be one or two of e4m3fn, e5m2, e2m1 joined by ',', "
                           "not 'e4m3'"),
    ([], {"MX": "e2m1,e5m2,e5m2"}, "--mx (MX) must be one or two of"),
    (["--mx", "e2m1", "--rows", "4"], {}, "--mx needs at least 8 rows (an MX matmul's K is a "
                                          "multiple of 8 partition rows), not 4"),
    (["--mx-psum", "bf16"], {}, "--mx-psum (MX_PSUM) applies to --mx (MX) matmuls"),
    ([], {"MX": "e5m2", "MX_PSUM": "fp16"}, "MX_PSUM must be one of fp32, bf16, stochastic, "
                                            "not 'fp16'"),
    (["--mx", "e5m2", "--rows", "8", "--types", "int8"], {},
     "--types int8 (TYPES) lacks mx, which --mx issues"),
    (["--mx", "e5m2", "--rows", "8", "--ftz", "--dtype", "bf16"], {},
     "--mx: MX matmuls take no --ftz"),
    (["--mx", "e5m2", "--rows", "8", "--timeline", "t.png"], {},
     "--mx: --timeline and --trace draw programs of nc_matmul operands only"),
])
def test_bad_arguments_exit_2_with_one_line(argv, env, message, monkeypatch, capsys):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exit_info:
        waves_cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert len([line for line in err.splitlines() if line.startswith("systolica waves")]) == 1


def test_open_without_gtkwave_on_path_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DISPLAY", ":99")
    with pytest.raises(SystemExit) as exit_info:
        waves_cli.main(["--open"])
    assert exit_info.value.code == 2
    assert "--open: gtkwave is not on PATH; install it with 'apt-get install gtkwave'" in \
        capsys.readouterr().err


def test_module_entry_points():
    run = lambda *args: subprocess.run([sys.executable, "-m", *args, "--help"],  # noqa: E731
                                       capture_output=True, text=True, cwd=REPO, timeout=120)
    for args in (("systolica.sim", "waves"), ("systolica.cli.waves",)):
        result = run(*args)
        assert result.returncode == 0, result.stderr
        assert "usage: systolica waves" in result.stdout
        assert "--format" in result.stdout and "--test" in result.stdout
    plain = run("systolica.sim")   # the default workload is the real model (minilm)
    assert plain.returncode == 0 and "--workload" in plain.stdout
    assert "--test" not in plain.stdout
    random = run("systolica.sim", "--workload", "random")
    assert random.returncode == 0 and "usage: systolica sim [" in random.stdout
    assert "--matmuls" in random.stdout and "--test" not in random.stdout


# ---- reproduce commands ------------------------------------------------------------------

def test_failed_tests_are_read_from_results_xml(tmp_path):
    xml = tmp_path / "results.xml"
    xml.write_text("""<testsuites><testsuite name="t">
      <testcase name="test_a" classname="m"/>
      <testcase name="test_b" classname="m"><failure message="boom"/></testcase>
      <testcase name="test_c" classname="m"><error message="crash"/></testcase>
    </testsuite></testsuites>""")
    assert waves.failed_tests(xml) == ["test_b", "test_c"]
    report = waves.reproduce_report(TileConfig(4, 4), "verilator", 7, xml, build_root=tmp_path)
    lines = report.splitlines()
    assert len(lines) == 4 and lines[0].startswith("re-run test_b with waves: ")
    assert lines[1] == "  waveform will be at: " + str(
        tmp_path / "repro" / "4x4-all-verilator" / "test_b-seed7" / "waves.fst")


def test_reproduce_command_names_seed_configuration_and_env(tmp_path):
    config = TileConfig(2, 3, "int8+bf16")
    command, wave = waves.reproduce_command(config, "icarus", "test_identity", 42,
                                            env={"SYSTOLICA_BULK_MACS": "100"},
                                            build_root=tmp_path)
    words = shlex.split(command)
    assert words[0] == "SYSTOLICA_BULK_MACS=100" and words[1] == sys.executable
    assert words[2:5] == ["-m", "systolica", "waves"]
    options = dict(zip(words[5::2], words[6::2], strict=True))
    assert options == {"--sim": "icarus", "--rows": "2", "--cols": "3", "--types": "int8+bf16",
                       "--test": "test_identity", "--seed": "42", "--build-dir": str(tmp_path)}
    assert wave == waves.waveform_path(config, "icarus", "test_identity", 42,
                                       build_root=tmp_path)
    assert wave.name == "waves.fst"


def test_every_tile_test_has_a_lane_mode():
    names = waves.tile_test_names()
    assert len(names) >= 8
    modes = {name: waves.lane_mode(name) for name in names}
    assert {"int8", "bf16", "mixed", "fp16", "e4m3"} == set(modes.values())
    assert set(modes.values()) <= set(waves.LANE_MODES)
    assert modes["test_fp8_double_row"] == "e4m3"
    assert modes["test_identity"] == "int8" and modes["test_bf16_directed_rules"] == "bf16"
    # Banks and read-out: INT8 and BF16 matmuls in one run.
    assert modes["test_psum_banks_offsets_and_read_out"] == "mixed"
    assert modes["test_illegal_commands_are_rejected_with_status"] == "int8"


def test_fp8_and_fp16_lanes_use_their_own_filter(tmp_path):
    for mode in ("e4m3", "fp16"):
        folder = tmp_path / mode
        folder.mkdir()
        text = _generated(folder, mode=mode).read_text()
        assert f"{mode}-filter" in text and "fp32-filter" in text, mode
        assert "bf16-filter" not in text
