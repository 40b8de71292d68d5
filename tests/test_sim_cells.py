"""The PE cell-count report: Yosys synthesises both PE variants and BF16 costs more."""

from systolica.sim.cells import cell_stats, main


def test_bf16_pe_costs_more_cells_than_int8_only():
    int8_total, int8_kinds = cell_stats(False)
    bf16_total, bf16_kinds = cell_stats(True)
    assert int8_total == sum(int8_kinds.values())
    # Flip-flops: 2 x 8-bit weights + 16-bit moving + its mode (select, active, BF16, FTZ)
    # + 32-bit PSUM (INT8 only), and the same with 16-bit weights when BF16 is built.
    assert sum(v for k, v in int8_kinds.items() if "DFF" in k) == 2 * 8 + 16 + 4 + 32
    assert sum(v for k, v in bf16_kinds.items() if "DFF" in k) == 2 * 16 + 16 + 4 + 32
    assert bf16_total > 2 * int8_total


def test_cells_report_prints_both(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "INT8 only" in out and "BF16 + INT8" in out and "total" in out
