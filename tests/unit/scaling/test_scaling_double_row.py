"""The scaling layer's FP8 peak of NeuronCore-v3 comes from the double-row cycle model."""

from systolica.scaling.claims import preset_rows
from systolica.scaling.hardware import load_hardware
from systolica.scaling.tilemodel import double_row_macs_per_pe_per_cycle


def test_double_row_rate_is_two_macs_per_pe_per_cycle():
    # The cycle model equals the RTL's stamps (tests/regression/rtl/test_rtl_types.py measures
    # 16 x 16).
    for rows, cols in ((16, 16), (128, 128), (4, 8)):
        assert double_row_macs_per_pe_per_cycle(rows, cols, 512) == 2


def test_trn2_fp8_peak_from_the_measured_rate():
    hw = load_hardware("trn2")
    assert hw.tile.macs_per_pe_per_cycle == {"bf16": 1, "fp8": 2}
    assert "double-row" in hw.tile.rate_notes["fp8"]
    assert round(hw.core_peak("fp8") / 1e12, 1) == 157.3
    row = next(r for r in preset_rows(hw) if r.what == "core peak fp8")
    assert row.stated == 158e12 and row.agrees and "double-row" in row.source
