"""The PE cell-count report: Yosys synthesises the PE of every type set; each datapath costs
more."""

from systolica.cli.cells import COMPONENTS, VARIANTS, cell_stats, main, synth_cells
from systolica.hdl.mx_quad import MxScale


def test_each_datapath_costs_more_cells():
    assert VARIANTS == ("int8", "bf16", "int8+bf16", "int8+bf16+fp16+fp8",
                        "int8+bf16+fp8-double-row", "all", "fp32", "all+fp32", "int8+mx",
                        "all+mx")
    stats = dict(zip(VARIANTS, (cell_stats(types) for types in VARIANTS), strict=True))
    int8_total, int8_kinds = stats["int8"]
    assert int8_total == sum(int8_kinds.values())
    # Flip-flops: 2 x 8-bit weights + 16-bit moving + its mode (select, active, hi, two
    # 3-bit types, FTZ, transpose, first row of a row tile, and the column-cell mask: one
    # bit on the 1 x 1 tile measured) + 32-bit PSUM (INT8 only), and 16-bit weights with a
    # float type.
    flops = {types: sum(v for k, v in kinds.items() if "DFF" in k)
             for types, (_, kinds) in stats.items()}
    assert flops["int8"] == 2 * 8 + 16 + 13 + 32
    assert set(list(flops.values())[1:6]) == {2 * 16 + 16 + 13 + 32}
    # TF32 / FP32: 32-bit weights and moving lane, 4-bit types and the 2-bit pass (step) in
    # the mode, and the 48-bit partial-product sum of the FP32 multiplier
    assert flops["fp32"] == flops["all+fp32"] == 2 * 32 + 32 + 17 + 32 + 48
    total = {types: count for types, (count, _) in stats.items()}
    assert total["bf16"] > 2 * total["int8"]
    assert total["bf16"] < total["int8+bf16"] < total["int8+bf16+fp16+fp8"] < total["all"]
    assert total["int8+bf16"] < total["int8+bf16+fp8-double-row"] < total["all"]
    assert total["bf16"] < total["fp32"] < total["all"] < total["all+fp32"]
    assert total["int8"] < total["int8+mx"] < total["all+mx"]
    assert total["all"] < total["all+mx"]


def test_cells_report_prints_every_variant(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(types in out for types in VARIANTS) and "total" in out
    assert all(f"the {name} component has" in out for name in COMPONENTS)
    assert all(f"  {name}: " in out for name in COMPONENTS)       # the legend names each


def test_the_mx_step_is_combinational_and_holds_its_scale_stage():
    total, kinds = synth_cells(COMPONENTS["mx-quad"]())
    scale, _ = synth_cells(MxScale())
    assert not any("DFF" in kind for kind in kinds)
    assert total > scale > 0 and kinds


def test_the_mx_option_adds_its_registers_and_the_quad_to_the_pe():
    total, kinds = cell_stats("all+mx")
    plain, plain_kinds = cell_stats("all")
    quad, _ = synth_cells(COMPONENTS["mx-quad"]())

    def flops(k):
        return sum(v for name, v in k.items() if "DFF" in name)
    # 32-bit lanes: the two weights and the moving register grow by 16 bits each, the two
    # type codes by a bit each, and the pass (step) travels; MX adds the mx bit, the moving
    # operand's 8-bit scale and a scale register beside each weight.
    assert flops(kinds) == flops(plain_kinds) + 3 * 16 + 2 + 2 + 1 + 8 + 2 * 8
    assert plain + 0.9 * quad < total < plain + quad + 1000    # the quad, a few muxes
