"""A failed simulator build's error quotes the build log (a CI log shows why without the
build folder) and names a compiler that was killed or a full disk; a hierarchical Verilator
build runs its own make serially."""

from systolica.sim.builder.errors import BuildError, build_failure


def test_the_error_quotes_the_logs_error_lines_and_names_the_log(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("make: Entering directory\n" + "clang++ -c a.cpp\n" * 40
                   + "Vtop.cpp:12:3: error: unknown type name 'VlWide'\n"
                   + "make: *** [Vtop.mk:40: Vtop.o] Error 1\nmake: Leaving directory\n")
    error = build_failure("verilator", "tile.v", log, "Command failed with return code: 2")
    assert isinstance(error, BuildError)
    text = str(error)
    assert text.splitlines()[0].startswith("verilator build of tile.v failed (Command failed")
    assert str(log) in text.splitlines()[0]
    assert "  Vtop.cpp:12:3: error: unknown type name 'VlWide'" in text.splitlines()
    assert "clang++ -c a.cpp" not in text          # only the marked lines
    assert "killed" not in text and "disk" not in text


def test_a_killed_compiler_is_named_as_out_of_memory(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("clang++ -c Vtop__1.cpp\nclang: error: unable to execute command: Killed\n"
                   "make: *** [Vtop.mk:40: Vtop__1.o] Error 254\n")
    text = str(build_failure("verilator", "tile.v", log, "rc 2"))
    assert "(a compiler was killed, most likely out of memory)" in text.splitlines()[0]
    assert "  clang: error: unable to execute command: Killed" in text


def test_a_full_disk_is_named(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("ccache: error: Failed to create temporary file: No space left on device\n")
    assert "(the disk is full)" in str(build_failure("verilator", "t.v", log, "rc 2"))


def test_a_log_without_error_lines_gives_its_last_lines_and_a_missing_log_none(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    text = str(build_failure("icarus", "t.v", log, "rc 1", lines=3))
    assert text.splitlines()[1:] == ["  line 27", "  line 28", "  line 29"]
    text = str(build_failure("icarus", "t.v", tmp_path / "none.log", "rc 1"))
    assert text == f"icarus build of t.v failed (rc 1); see {tmp_path / 'none.log'}"


def test_a_hierarchical_build_runs_its_own_make_serially_and_compiles_in_parallel(monkeypatch):
    from systolica.sim.builder import runner

    assert runner.hierarchical_makeflags(3) == r"MAKE=make\ -j3"
    monkeypatch.setenv("MAKEFLAGS", "CXX=clang++")
    with runner._runner_environment(runner.hierarchical_makeflags(2)):
        assert runner.os.environ["MAKEFLAGS"] == r"CXX=clang++ MAKE=make\ -j2"
    assert runner.os.environ["MAKEFLAGS"] == "CXX=clang++"
    monkeypatch.delenv("MAKEFLAGS")
    with runner._runner_environment(runner.hierarchical_makeflags(2)):
        assert runner.os.environ["MAKEFLAGS"] == r"MAKE=make\ -j2"
    assert "MAKEFLAGS" not in runner.os.environ
