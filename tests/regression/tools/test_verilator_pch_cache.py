"""Verilator builds through ccache: a precompiled header never crosses build folders.

A PCH records the absolute paths of the headers it was compiled from. ccache does not hash
the working folder, so it handed the PCH of one build folder to another folder that
verilated the same headers; once the first folder was gone, clang refused every compile
that used it (CI, 2026-12-04). Reproduced here with a small design split into many files
(so Verilator's makefile compiles a PCH), built in one folder, that folder deleted, and a
design with the same headers built in a second folder, with a fresh cache.
"""

import os
import shutil
import subprocess

from systolica.sim.builder import toolchain

_DESIGN = """module top(input clk, input [7:0] a, output reg [7:0] q);
  sub s(.clk(clk), .a(a));
  always @(posedge clk) q <= a + {step};
endmodule
module sub(input clk, input [7:0] a);
  reg [7:0] r; always @(posedge clk) r <= a;
endmodule
"""

_MAIN = '#include "Vtop.h"\nint main() { Vtop top; top.eval(); return 0; }\n'


def _build(folder, step, env):
    folder.mkdir()
    (folder / "top.v").write_text(_DESIGN.format(step=step))
    (folder / "main.cpp").write_text(_MAIN)
    return subprocess.run(
        ["verilator", "--cc", "--exe", "--build", "-j", "1", "--output-split", "1",
         "--output-split-cfuncs", "1", "top.v", "main.cpp"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def test_a_pch_from_a_deleted_build_folder_is_not_reused(tmp_path, monkeypatch):
    assert shutil.which("ccache"), "this test needs ccache (apt-get install ccache)"
    for name in ("OBJCACHE", "MAKEFLAGS", "CCACHE_SLOPPINESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    toolchain.prepare_environment("verilator")
    env = dict(os.environ)
    first = _build(tmp_path / "first", 1, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert list((tmp_path / "first" / "obj_dir").glob("*.gch")), "no PCH was compiled"
    shutil.rmtree(tmp_path / "first")
    # Same headers, other eval code: the PCH compile would hit the cache, the compiles
    # that use it would not.
    second = _build(tmp_path / "second", 2, env)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "referenced by AST file" not in second.stdout + second.stderr
