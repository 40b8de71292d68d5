"""Constants that both ``hdl/`` and ``golden/`` must know, and that neither may import from the
other (hdl imports only amaranth, golden only numpy): they must be equal."""

from systolica import golden, hdl
from systolica.golden import command, formats, timing
from systolica.hdl import command_queue, config, fp32_add, layouts, tile
from systolica.tb import model


def test_command_queue_depth():
    assert tile.COMMAND_QUEUE_DEPTH == command_queue.COMMAND_QUEUE_DEPTH \
        == hdl.COMMAND_QUEUE_DEPTH == timing.COMMAND_QUEUE_DEPTH


def test_psum_geometry_and_latency():
    assert (layouts.PSUM_BANKS, layouts.PSUM_ENTRIES) == (command.PSUM_BANKS,
                                                          command.PSUM_ENTRIES) == (
        golden.PSUM_BANKS, golden.PSUM_ENTRIES)
    for rows, cols in ((1, 1), (3, 5), (16, 16)):
        assert tile.Tile(config.TileConfig(rows, cols)).latency == timing.tile_latency(rows,
                                                                                     cols)


def test_tile_config_knows_the_command_word_and_its_defaults():
    """hdl.config is standard library only: its copies of the types, PSUM geometry, field
    widths and queue depth are the golden model's and the RTL's."""
    assert config.ALL_DTYPES == command.DTYPES == tuple(t.name.lower() for t in layouts.DType)
    assert config.DOUBLE_ROW_DTYPES == formats.DOUBLE_ROW_TYPES
    assert (config._PSUM_BANKS, config._PSUM_ENTRIES) == (layouts.PSUM_BANKS,
                                                          layouts.PSUM_ENTRIES)
    assert (config._BANK_WIDTH, config._SIZE_WIDTH) == (layouts.BANK_WIDTH,
                                                        layouts.SIZE_WIDTH)
    assert config._QUEUE_DEPTH == command_queue.COMMAND_QUEUE_DEPTH
    assert {t for members in config.TYPE_SETS.values() for t in members} == set(
        command.DTYPES)


def test_pass_counts_and_lane_widths():
    assert (layouts.FP32_PASSES, layouts.WIDE_TRANSPOSE_PASSES) == (
        timing.FP32_PASSES, timing.WIDE_TRANSPOSE_PASSES)
    # the testbench's lane-width rule (from a type list) is the configuration's
    for name in [*config.TYPE_SETS, "all", "all+fp32", "int8+mx"]:
        tile = config.TileConfig(2, 2, name)
        assert model.lane_width(tile.dtypes, tile.mx) == tile.operand_width, name


def test_canonical_nan():
    assert fp32_add.CANONICAL_NAN == golden.CANONICAL_NAN == 0x7FC00000


def test_error_codes_in_check_order():
    assert [e.name for e in layouts.ErrorCode if e is not layouts.ErrorCode.NONE] == list(
        command.ERRORS)
    assert [e.value for e in layouts.ErrorCode] == list(range(len(command.ERRORS) + 1))


def test_double_row_types():
    assert [d.name.lower() for d in command_queue.DOUBLE_ROW_DTYPES] == list(
        formats.DOUBLE_ROW_TYPES)
    assert {d.name: d.value for d in layouts.DType} == {
        name.upper(): fmt.code for name, fmt in {**formats.FORMATS,
                                                 **formats.WIDE_FORMATS}.items()}


def test_narrow_dtypes_are_the_8_bit_types():
    assert [d.name.lower() for d in layouts.NARROW_DTYPES] == [
        name for name, fmt in formats.FORMATS.items() if fmt.width == 8]


def test_command_field_widths():
    fields = dict(layouts.command_layout())
    assert {name: fields[name].width for name in command.FIELD_WIDTHS} == command.FIELD_WIDTHS
    assert (command.BANK_WIDTH, command.SIZE_WIDTH) == (layouts.BANK_WIDTH, layouts.SIZE_WIDTH)
    assert (command.SEED_WIDTH, command.MX_GROUP_ROWS) == (layouts.SEED_WIDTH,
                                                           layouts.MX_GROUP_ROWS)
    assert command.MX_DTYPES == tuple(t.name.lower() for t in layouts.MX_DTYPES)
    assert set(command.OPS) == {op.name.lower() for op in layouts.Op}


def test_tile_sizes():
    from systolica.golden import tile_sizes

    assert all(layouts.tile_sizes(extent) == tile_sizes(extent) for extent in range(1, 130))


def test_mx_constants():
    import ml_dtypes
    import numpy as np

    from systolica.golden import mx
    from systolica.hdl import mx_quad

    assert mx_quad.MX_LANES == mx.LANES
    assert {d.name.lower() for d in mx_quad.MX_DTYPES} == {
        name for name, _, _ in mx.MX_TYPES.values()} - {"e2m1"}
    nan = np.array([mx_quad.SCALE_NAN], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    assert np.isnan(nan.astype(np.float32)).all()
    one = np.array([mx_quad.SCALE_BIAS2 // 2], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    assert one.astype(np.float32)[0] == 1.0


def test_xorwow_seeding_constants():
    from systolica.golden.mx import xorwow_constants
    from systolica.hdl import psum

    golden_words = xorwow_constants(130)
    for lane in (0, 1, 7, 63, 129):
        assert psum.xorwow_constants(lane) == golden_words[:, lane].tolist()
    assert (psum.XORWOW_D0, psum.XORWOW_STEP) == (6615241, 362437)
