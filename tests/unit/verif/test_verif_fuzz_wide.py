"""The fuzzer's TF32/FP32 commands (issue 25): what a program on a tile generated with
``fp32`` draws, what a tile without it gets, and the default run's type sets; the golden
model only (the RTL runs in tests/regression/verif/test_verif_fuzz.py)."""

import subprocess
import sys

import numpy as np

from systolica.golden import Command
from systolica.hdl.config import TileConfig
from systolica.tb.bulk import BulkProgram
from systolica.verif import coverage, fuzz

WIDE = {"tf32", "fp32"}


def _records(types, seed=11, count=600, share=None):
    """Program 0 of ``seed`` drawn as the fuzzer draws it for a 4 x 4 tile of ``types``,
    modelled (no simulator): its items and the model's records."""
    config = TileConfig(4, 4, types)
    if share is None:
        share = fuzz.WIDE_SHARE if config.wide else fuzz.UNBUILT_WIDE_SHARE
    rng, noise = np.random.default_rng([seed, 0]), np.random.default_rng([seed, 0, 1])
    items = fuzz.random_program(rng, 4, 4, count, noise=noise,
                                wide=np.random.default_rng([seed, 0, 2]), wide_share=share)
    program = BulkProgram(config, noise=noise)
    fuzz._submit(program, items)
    return items, program.model.records


def _wide(command):
    return command.op == "matmul" and bool({command.dtype, command.mtype} & WIDE)


def test_a_program_on_an_fp32_tile_draws_every_tf32_fp32_command_kind():
    items, records = _records("all+fp32")
    legal = [r for r in records if r.error is None and _wide(r.command)]
    pairs = {(r.command.dtype, r.command.mtype) for r in legal if not r.command.is_transpose}
    assert pairs == {("tf32", "tf32"), ("fp32", "fp32"), ("tf32", "fp32"), ("fp32", "tf32")}
    matmuls = [r.command for r in legal if not r.command.is_transpose]
    for flag in ("accumulate", "ftz"):
        assert {getattr(c, flag) for c in matmuls} == {False, True}, flag
    assert any(c.tile_size is not None for c in matmuls)
    assert {r.command.dtype for r in legal if r.command.is_transpose} == WIDE
    refused = {r.error for r in records if _wide(r.command) and r.command.is_transpose
               and r.error is not None}
    assert {"TRANSPOSE_ACCUMULATE", "TRANSPOSE_FTZ"} <= refused
    # a TF32/FP32 operand with an 8/16-bit partner, either side: TYPE_NOT_BUILT
    mixed = [r for r in records if _wide(r.command)
             and (r.command.dtype in WIDE) != (r.command.mtype in WIDE)]
    assert mixed and {r.error for r in mixed} == {"TYPE_NOT_BUILT"}
    assert {r.command.dtype in WIDE for r in mixed} == {False, True}
    # every operand class of each type, as the type reads the words
    operands = {name: [] for name in WIDE}
    for item in items:
        if not isinstance(item, Command) and item[0].dtype.itemsize == 4 and not (
                len(item) > 7 and item[7]):
            for array in item[:2]:
                name = "fp32" if array.dtype == np.float32 else "tf32"
                operands[name].append(array.view(np.uint32).ravel())
    for name, words in operands.items():
        assert coverage.wide_classes(np.concatenate(words), name) == list(
            coverage.WIDE_CLASSES), name
    # READs whose ignored type fields hold the 32-bit codes, the transpose bit set or not
    reads = [r.command for r in records if r.op == "read" and r.command.dtype in WIDE]
    assert all(r.error is None for r in records if r.op == "read" and r.command.dtype in WIDE)
    assert {c.is_transpose for c in reads} == {False, True}
    # the 8/16-bit commands still run on the 32-bit-lane tile
    assert {r.command.dtype for r in records if r.error is None} >= {"int8", "bf16", "e4m3"}


def test_a_tile_without_fp32_rejects_every_tf32_fp32_command():
    _, records = _records("all", share=0.3)
    wide = [r for r in records if _wide(r.command)]
    assert len(wide) > 20
    assert {r.error for r in wide} == {"TYPE_NOT_BUILT"}
    assert {(r.command.dtype, r.command.mtype) for r in wide} >= {("tf32", "tf32"),
                                                                    ("fp32", "fp32")}


def test_the_wide_draws_leave_the_other_commands_as_they_were():
    """The third generator only replaces items: without it (share 0) the program has the
    same length and every item it does not replace is the same."""
    with_wide, _ = _records("all+fp32")
    without, _ = _records("all+fp32", share=0.0)
    assert len(with_wide) == len(without)
    same = replaced = 0
    for a, b in zip(with_wide, without, strict=True):
        if isinstance(a, Command) or isinstance(b, Command):
            same += a == b
            continue
        if a[0].dtype.itemsize == 4 and b[0].dtype.itemsize != 4:
            replaced += 1
            continue
        assert all(np.array_equal(x.view(np.uint8), y.view(np.uint8)) for x, y in
                   zip(a[:2], b[:2], strict=True)) and a[2:] == b[2:]
        same += 1
    assert replaced > 20 and same > 300


def test_the_default_run_takes_every_size_without_then_with_fp32():
    got = [fuzz.program_config(p, fuzz.SIZES, fuzz.TYPES) for p in range(7)]
    assert [(c.rows, c.cols, c.types_name) for c in got] == [
        (4, 4, "all"), (3, 4, "all"), (5, 3, "all"),
        (4, 4, "all+fp32"), (3, 4, "all+fp32"), (5, 3, "all+fp32"), (4, 4, "all")]
    assert [c.wide for c in got] == [False] * 3 + [True] * 3 + [False]
    assert fuzz.replay_command(1, 4, 100).endswith("--types all/all+fp32 --keep")
    text = subprocess.run([sys.executable, "-m", "systolica", "fuzz", "--help"],
                          capture_output=True, text=True, check=True).stdout
    assert "default all/all+fp32" in " ".join(text.split())
