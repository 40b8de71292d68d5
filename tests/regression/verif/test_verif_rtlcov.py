"""RTL code coverage (``make coverage``): Verilator's coverage.dat read per hdl module."""

import pytest

from systolica.verif import rtlcov


def test_verilog_modules_map_to_their_hdl_files():
    names = {"systolica_pe": "pe.py", "\\systolica_pe.adder": "fp32_add.py",
             "systolica_pe.multiplier": "float_mul.py", "systolica_tile": "tile.py",
             "systolica_tile.array": "array.py", "systolica_tile.loader.load_skew": "skew.py",
             "systolica_tile.issue.skew": "skew.py", "systolica_tile.result.deskew": "skew.py",
             "systolica_tile.result.psum$102": "psum.py", "systolica_tile.result.psum": "psum.py",
             "systolica_tile.result.psum$102.adder_3": "fp32_add.py",
             "systolica_tile.queue": "command_queue.py", "systolica_tile.loader": "loader.py",
             "systolica_tile.issue": "issue.py", "systolica_tile.result": "result.py",
             "systolica_harness": None}
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


def test_table_prints_raw_toggle_coverage_beside_the_figure_without_constants():
    """Per module: every toggle point counted (raw) beside the figure with the points of
    proved-constant bits left out; the targets apply to the latter only."""
    def key(name, kind="toggle"):
        return (kind, "systolica_tile.queue", "tile.v", 1, name)

    points = {key("block", "line"): 3, key("a:0->1"): 1, key("a:1->0"): 2,
              key("b[0]:0->1"): 0, key("b[0]:1->0"): 0, key("c:0->1"): 1, key("c:1->0"): 0}
    raw = rtlcov.per_file(points)
    constant = {("systolica_tile.queue", "b", 0)}
    lines, below = rtlcov._table_lines(rtlcov.per_file(points, constant), raw, "test")
    assert lines[0].split()[:6] == ["hdl", "module", "line", "toggle", "raw", "toggle"]
    assert lines[1].split() == ["command_queue.py", "1/1", "100.0", "%", "3/6", "50.0", "%",
                                "3/4", "75.0", "%", "2"]
    assert below == ["command_queue.py toggle 75.0 % < 90 %"]     # not the raw 50 %


def test_toggle_bits_decode_verilator_names():
    def key(name):
        return ("toggle", "systolica_tile.array", "tile.v", 1, name)

    points = {key("__02453[3]:0->1"): 1, key("__02453[3]:1->0"): 0,
              key("queue_0__02ebank[4]:0->1"): 0, key("queue_0__02ebank[4]:1->0"): 0,
              key("chain_start:1->0"): 2}
    bits = rtlcov.toggle_bits(points)
    assert bits == {("systolica_tile.array", "$53", 3): (True, False),
                    ("systolica_tile.array", "queue_0.bank", 4): (False, False),
                    ("systolica_tile.array", "chain_start", None): (False, True)}


def test_constant_bits_are_tied_or_proved_and_toggled_ones_never(tmp_path):
    """Bits tied in the netlist (one a 1 that rose once as the simulation started), two
    only SAT can show constant ((a + a)[0], once in a wire named like Amaranth's "$7"), one
    undriven (Verilator holds it at 0), one that can toggle and a register that starts at 0
    but can be 1: the first five are excluded, the others not (the register would be, if
    the proof started from its initial value), a point whose name and bit fit no wire (a
    bracketed name read without its bit) is skipped, bit 0 of "o" is proved although a wire
    named "o[0]" exists, and toggling control bits are not proved."""
    verilog = tmp_path / "tile.v"
    verilog.write_text("""
module systolica_tile(input clk, input [3:0] a, output [7:0] y, output z, output q);
  reg r = 1'b0;
  always @(posedge clk) r <= a[2];
  assign q = r;
  wire [7:0] w;
  wire [4:0] \\$7 ;
  wire x;
  wire [1:0] u;
  wire [1:0] \\o[0] ;
  assign \\o[0]  = 2'b00;
  wire [1:0] o;
  wire [2:0] \\o[1] ;
  assign o = a[1:0] + a[1:0];
  assign \\o[1]  = {a[2:0]};
  assign w = {a, 4'b0010};
  assign \\$7  = a + a;
  assign x = \\$7 [0];
  assign y = w | {7'b0, x} | {6'b0, u};
  assign z = a[1];
endmodule
""")
    module = "systolica_tile"
    bits = {(module, "w", 1): (True, False), (module, "w", 0): (False, False),
            (module, "x", None): (False, False),
            (module, "$7", 0): (False, False),
            (module, "u", 0): (False, False), (module, "w", 5): (False, False),
            (module, "r", None): (False, False), (module, "o[0]", None): (False, False),
            (module, "o", 1): (False, False), (module, "o", 0): (False, False),
            (module, "w", 6): (True, True), (module, "z", None): (True, True)}
    constant = rtlcov.prove_constant(verilog, bits, tmp_path / "prove", controls=2)
    assert constant == {(module, "w", 1): (1, "tied"), (module, "w", 0): (0, "tied"),
                        (module, "u", 0): (0, "tied"),
                        (module, "x", None): (0, "proved"), (module, "$7", 0): (0, "proved"),
                        (module, "o", 0): (0, "proved")}


def test_bits_constant_only_jointly_are_proved_by_induction(tmp_path):
    """A two-entry queue of 4-bit words that takes only words below 8: bit 3 of each entry
    is 0 in every reachable state, but neither entry's bit on its own is (each holds or
    takes the other's word), so only the joint induction shows it; ``h`` holds its initial
    1 forever (the simulation saw it rise once: 1), ``g`` holds a 1 the run did not see
    (0 holds inductively, but not initially), ``e1[0]`` takes an input bit."""
    verilog = tmp_path / "tile.v"
    verilog.write_text("""
module systolica_tile(input clk, input push, input shift, input [3:0] a, output [3:0] y,
                      output t);
  reg [3:0] e0 = 4'd0;
  reg [3:0] e1 = 4'd0;
  reg h = 1'b1;
  reg g = 1'b1;
  wire legal = a < 4'd8;
  always @(posedge clk) begin
    if (push & legal) e1 <= a;
    else if (shift) e1 <= e0;
    if (shift) e0 <= e1;
    h <= h;
    g <= g;
  end
  assign y = e0;
  assign t = h ^ g;
endmodule
""")
    module = "systolica_tile"
    bits = {(module, "e0", 3): (False, False), (module, "e1", 3): (False, False),
            (module, "h", None): (True, False), (module, "g", None): (False, False),
            (module, "e1", 0): (False, False), (module, "e0", 0): (True, True),
            (module, "e0", 1): (True, True), (module, "e1", 1): (True, True)}
    constant = rtlcov.prove_constant(verilog, bits, tmp_path / "prove", controls=3)
    assert constant == {(module, "e0", 3): (0, "induction"), (module, "e1", 3): (0, "induction"),
                        (module, "h", None): (1, "induction")}


def test_a_second_run_on_one_build_folder_is_refused(tmp_path):
    """Two coverage runs on one build folder would delete each other's runs: the second
    is refused at once with a message, and the folder is free again after the first."""
    with rtlcov.exclusive(tmp_path):
        with pytest.raises(rtlcov.Busy, match="another rtl-coverage run is using"):
            with rtlcov.exclusive(tmp_path):
                pass
    with rtlcov.exclusive(tmp_path):
        pass
