"""The PE cell-count report: Yosys synthesises every PE variant; each datapath costs more."""

from systolica.cli.cells import VARIANTS, cell_stats, main


def test_each_datapath_costs_more_cells():
    stats = [cell_stats(**options) for _, options in VARIANTS]
    int8_total, int8_kinds = stats[0]
    assert int8_total == sum(int8_kinds.values())
    # Flip-flops: 2 x 8-bit weights + 16-bit moving + its mode (select, active, hi, two
    # 3-bit types, FTZ) + 32-bit PSUM (INT8 only), and 16-bit weights with a float type.
    flops = [sum(v for k, v in kinds.items() if "DFF" in k) for _, kinds in stats]
    assert flops[0] == 2 * 8 + 16 + 10 + 32
    assert flops[1:] == [2 * 16 + 16 + 10 + 32] * 3
    totals = [total for total, _ in stats]
    assert totals[1] > 2 * totals[0] and totals[0] < totals[1] < totals[2] < totals[3]


def test_cells_report_prints_every_variant(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(title in out for title, _ in VARIANTS) and "total" in out
