"""Unit tier: the environment ``sim.builder.toolchain.prepare_environment`` sets up for a
Verilator build (PATH, VERILATOR_ROOT, the PCH make flag, the compiler cache)."""

import os
import shutil
import subprocess

import pytest

from systolica.sim.builder import toolchain


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("OBJCACHE", "MAKEFLAGS", "CCACHE_SLOPPINESS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _which_without_ccache(real):
    return lambda tool, *a, **k: None if tool == "ccache" else real(tool, *a, **k)


def _which_with_ccache(real):
    return lambda tool, *a, **k: "/usr/bin/ccache" if tool == "ccache" else real(tool, *a, **k)


def test_verilator_compiles_go_through_ccache_when_it_is_installed(clean_env):
    clean_env.setattr(toolchain.shutil, "which", _which_with_ccache(shutil.which))
    toolchain.prepare_environment("verilator")
    assert os.environ["OBJCACHE"] == "ccache"
    assert "CFG_CXXFLAGS_PCH_I=-include" in os.environ["MAKEFLAGS"]
    assert os.environ["PATH"].split(os.pathsep)[0].endswith("bin")


def test_no_ccache_means_no_objcache(clean_env):
    clean_env.setattr(toolchain.shutil, "which", _which_without_ccache(shutil.which))
    toolchain.prepare_environment("verilator")
    assert "OBJCACHE" not in os.environ


def test_an_objcache_the_user_set_is_kept_even_empty(clean_env):
    clean_env.setenv("OBJCACHE", "")
    toolchain.prepare_environment("verilator")
    assert os.environ["OBJCACHE"] == ""


def test_icarus_leaves_the_compiler_cache_alone(clean_env):
    toolchain.prepare_environment("icarus")
    assert "OBJCACHE" not in os.environ


def _which_with_clang(real, clang):
    return lambda tool, *a, **k: (("/usr/bin/clang++" if clang else None) if tool == "clang++"
                                  else real(tool, *a, **k))


def test_clang_compiles_the_model_when_it_is_installed(clean_env):
    clean_env.delenv("CXX", raising=False)
    clean_env.setattr(toolchain.shutil, "which", _which_with_clang(shutil.which, True))
    toolchain.prepare_environment("verilator")
    assert toolchain.cxx_compiler() == "clang++"
    assert "CXX=clang++ LINK=clang++ LOADLIBES=-latomic" in os.environ["MAKEFLAGS"]


def test_clang_pch_files_do_not_record_header_times(clean_env, tmp_path):
    # A PCH that ccache hands back from an earlier checkout of the same folder carried the
    # old header's mtime, and clang refused it (a CI run, 2026-12-03). make must see the
    # whole flag, space included, in the variable Verilator's makefiles add to every compile.
    clean_env.delenv("CXX", raising=False)
    clean_env.setattr(toolchain.shutil, "which", _which_with_clang(shutil.which, True))
    toolchain.prepare_environment("verilator")
    (tmp_path / "Makefile").write_text("all:\n\t@echo '$(USER_CPPFLAGS)|$(CXX)'\n")
    out = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "-Xclang -fno-pch-timestamp|clang++"


def test_ccache_caches_compiles_that_use_a_pch(clean_env):
    clean_env.setattr(toolchain.shutil, "which", _which_with_ccache(shutil.which))
    toolchain.prepare_environment("verilator")
    assert os.environ["CCACHE_SLOPPINESS"] == "pch_defines,time_macros"
    clean_env.delenv("OBJCACHE")
    clean_env.setenv("CCACHE_SLOPPINESS", "include_file_mtime")     # the user's is kept
    toolchain.prepare_environment("verilator")
    assert os.environ["CCACHE_SLOPPINESS"] == "include_file_mtime"


def test_without_clang_make_keeps_its_own_compiler(clean_env):
    clean_env.delenv("CXX", raising=False)
    clean_env.setattr(toolchain.shutil, "which", _which_with_clang(shutil.which, False))
    toolchain.prepare_environment("verilator")
    assert toolchain.cxx_compiler() == "g++"
    assert "CXX=" not in os.environ["MAKEFLAGS"]


def test_cxx_g_plus_plus_keeps_gcc_even_with_clang_installed(clean_env):
    clean_env.setenv("CXX", "g++")
    clean_env.setattr(toolchain.shutil, "which", _which_with_clang(shutil.which, True))
    toolchain.prepare_environment("verilator")
    assert toolchain.cxx_compiler() == "g++"
    assert "CXX=" not in os.environ["MAKEFLAGS"]


def test_a_pch_compile_names_its_own_build_folder_in_every_make(clean_env, tmp_path):
    # ccache does not hash the working folder: a PCH compiled in one build folder (which
    # records that folder's header paths) was handed to another, and clang failed once the
    # first was gone (a CI run, 2026-12-04). The PCH compile's flags name the folder make
    # runs in, in Verilator's own make and in the makes it starts (hierarchical blocks).
    toolchain.prepare_environment("verilator")
    sub = tmp_path / "Vblock"
    sub.mkdir()
    (sub / "Makefile").write_text("all:\n\t@echo 'sub|$(CFG_CXXFLAGS_PCH)'\n")
    (tmp_path / "Makefile").write_text(
        "all:\n\t@echo 'top|$(CFG_CXXFLAGS_PCH)'\n\t@$(MAKE) -s -C Vblock\n")
    out = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == [f"top|-x c++-header -I{tmp_path}", f"sub|-x c++-header -I{sub}"]
