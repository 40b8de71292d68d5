"""Unit tier: the generated Verilog follows the HDL sources (the fingerprint that decides
whether a build folder's Verilog is regenerated)."""

import shutil

import pytest

from systolica.sim.builder import generate


def test_fingerprint_covers_the_hdl_package(tmp_path, monkeypatch):
    copy = tmp_path / "hdl"
    shutil.copytree(generate._HDL_DIR, copy)
    assert (copy / "tile.py").is_file() and (copy / "pe.py").is_file()
    monkeypatch.setattr(generate, "_HDL_DIR", copy)
    before = generate.hdl_fingerprint()
    (copy / "pe.py").write_text((copy / "pe.py").read_text() + "\n# edited\n")
    assert generate.hdl_fingerprint() != before


def test_fingerprint_refuses_a_folder_without_hdl_sources(tmp_path, monkeypatch):
    monkeypatch.setattr(generate, "_HDL_DIR", tmp_path)
    with pytest.raises(RuntimeError, match="no HDL sources"):
        generate.hdl_fingerprint()
