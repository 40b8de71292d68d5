"""RTL code coverage (``make coverage``): Verilator's coverage.dat read per hdl module."""

from systolica.sim.verif import rtlcov


def test_verilog_modules_map_to_their_hdl_files():
    names = {"systolica_pe": "pe.py", "\\systolica_pe.adder": "fp32_add.py",
             "systolica_pe.multiplier": "float_mul.py", "systolica_tile": "tile.py",
             "systolica_tile.array": "array.py", "systolica_tile.load_skew": "skew.py",
             "systolica_tile.deskew": "skew.py", "systolica_tile.psum$102": "psum.py",
             "systolica_tile.psum$102.adder_3": "fp32_add.py", "systolica_harness": None}
    assert {name: rtlcov.hdl_file(name) for name in names} == names


def test_coverage_points_are_summed_per_module(tmp_path):
    def point(page, line, name, count):
        fields = {"f": "tile.v", "l": str(line), "page": page, "o": name, "h": "top.x"}
        body = "".join(f"\x01{k}\x02{v}" for k, v in fields.items())
        return f"C '{body}' {count}\n"

    one = tmp_path / "a.dat"
    two = tmp_path / "b.dat"
    one.write_text("# SystemC::Coverage-3\n" + point("v_line/systolica_pe", 3, "block", 0)
                   + point("v_toggle/systolica_pe", 4, "x:0->1", 0)
                   + point("v_toggle/systolica_harness", 9, "y:0->1", 0))
    two.write_text(point("v_line/systolica_pe", 3, "block", 2)
                   + point("v_toggle/systolica_pe", 4, "x:0->1", 0))
    table = rtlcov.per_file(rtlcov.read_points([one, two]))
    assert set(table) == {"pe.py"}
    assert table["pe.py"]["line"][:2] == [1, 1]
    assert table["pe.py"]["toggle"][:2] == [0, 1]
