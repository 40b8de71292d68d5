"""Large tiles' Verilog: the result path converted in a second process and instanced by the
top (``sim/builder/generate.py``, ``RESULT_MODULE``, ``sim/builder/result_child.py``;
``hdl.Tile(component_modules=...)``, ``hdl.tile.tile_component``)."""

import re
import subprocess
import sys

import pytest
from amaranth.back import rtlil

from systolica.hdl import Tile
from systolica.hdl.config import TileConfig
from systolica.hdl.tile import tile_component, verilog_ports
from systolica.sim.builder import generate


def test_a_component_module_is_an_instance_with_every_port_of_the_component():
    config = TileConfig(2, 2, "int8")
    tile = Tile(config, component_modules={"result": "stand_in"})
    text = rtlil.convert(tile, name="top", emit_src=False)
    cell = re.search(r"cell \\stand_in \\result\n(.*?)\n  end", text, re.S)
    assert cell, "no instance of the stand-in module named result"
    connected = set(re.findall(r"connect \\(\w+)", cell.group(1)))
    want = {name for name, _, _ in verilog_ports(tile_component(config, "result"))}
    assert connected == want | {"clk", "rst"}
    # And the elaborated result path is gone from the top: no PSUM memory left in it.
    assert "memory" not in text


def test_an_unknown_component_is_refused():
    with pytest.raises(ValueError, match=r"component_modules names \['psum'\]; the "
                                         r"components are queue, loader, issue, result"):
        Tile(TileConfig(2, 2, "int8"), component_modules={"psum": "x"})


def test_the_child_writes_the_result_module_and_refuses_bad_arguments():
    child = [sys.executable, "-m", "systolica.sim.builder.result_child"]
    done = subprocess.run([*child, "2", "3", "int8", "8", "512", "4"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"module {generate.RESULT_MODULE}(" in done.stdout
    assert "memory__init_i < 4096" in done.stdout        # PSUM, zeroed by a loop
    assert done.stderr == ""                             # no unused-elaboratable warnings
    bad = subprocess.run([*child, "2", "3", "int8"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert bad.stderr.startswith("usage: python -m systolica.sim.builder.result_child ROWS")


def test_an_unknown_component_name_is_refused():
    with pytest.raises(ValueError, match=r"no tile component 'psum'; the components are "
                                         r"queue, loader, issue, result"):
        tile_component(TileConfig(2, 2, "int8"), "psum")


def test_a_failing_child_is_reported_in_one_message():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit('boom')"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with pytest.raises(RuntimeError, match="result path's Verilog failed .status 1.: boom"):
        generate._finish_result_module(child)


def test_a_stuck_child_times_out_with_a_message():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with pytest.raises(RuntimeError, match="took more than 1 s; stopped it"):
        generate._finish_result_module(child, timeout=1)
    assert child.poll() is not None


def test_a_failing_top_stops_the_child(monkeypatch):
    started = []
    real_start = generate._start_result_module

    def start(config):
        started.append(real_start(config))
        return started[-1]

    def fail(elaboratable, name):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "_start_result_module", start)
    monkeypatch.setattr(generate, "_top_verilog", fail)
    monkeypatch.setattr(generate, "FLAT_LIMIT_PES", 4)      # split a 2 x 2 tile
    with pytest.raises(KeyboardInterrupt):
        generate.generate_verilog(TileConfig(2, 2, "int8"))
    assert started and started[0].poll() is not None       # killed, not left running
