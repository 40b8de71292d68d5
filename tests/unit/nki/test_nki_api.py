"""Unit tier: kernel files written for AWS's toolchain run unedited after
``systolica.nki.install()``: one against NKI 0.6's API, one in the older ``neuronxcc.nki``
style; plus the launch and decorator calls (SPMD grids, simulate_kernel in place,
benchmark)."""

import importlib.util
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from systolica import nki as systolica_nki

SAMPLES = Path(__file__).parent / "nki_samples"
NAMES = ("nki", "nki.language", "nki.isa", "nki.typing", "neuronxcc", "neuronxcc.nki",
         "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.typing")
BF16 = ml_dtypes.bfloat16


@pytest.fixture
def installed():
    """install() for one test, then the module table as it was."""
    saved = {n: sys.modules.get(n) for n in NAMES}
    front = systolica_nki.install()
    yield front
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def _load(name):
    spec = importlib.util.spec_from_file_location(f"nki_sample_{name}", SAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_install_registers_every_module_name(installed):
    import neuronxcc.nki.typing

    import nki.isa
    import nki.language
    assert nki.language is systolica_nki.language and nki.isa is systolica_nki.isa
    assert all(name in sys.modules for name in NAMES)
    assert neuronxcc.nki.typing.tensor is systolica_nki.language.ndarray.__globals__["Tensor"]


def test_an_nki_0_6_kernel_runs_unedited_on_an_spmd_grid(installed):
    sample = _load("nki06_style")
    rng = np.random.default_rng(0)
    x_t = rng.standard_normal((256, 128)).astype(BF16)
    w = rng.standard_normal((256, 64)).astype(BF16)
    bias = rng.standard_normal((1, 64)).astype(np.float32)
    out = installed.simulate(sample.dense_gelu[2])(x_t, w, bias)
    h = x_t.astype(np.float64).T @ w.astype(np.float64) + bias
    ref = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    assert out.shape == (128, 64) and np.max(np.abs(out - ref)) < 1e-3
    # the two programs wrote different halves: program 1 computed rows 64..127
    assert np.max(np.abs(out[64:] - ref[64:])) < 1e-3


def test_an_older_neuronxcc_kernel_runs_unedited_and_writes_its_output(installed):
    sample = _load("neuronxcc_style")
    rng = np.random.default_rng(1)
    d = 64
    q, k = (rng.standard_normal((d, 128)).astype(BF16) for _ in range(2))
    v = rng.standard_normal((128, d)).astype(BF16)
    out = np.zeros((128, d), np.float32)
    assert installed.simulate_kernel(sample.tile_attention, q, k, v, out) is None
    s = q.astype(np.float64).T @ k.astype(np.float64) / np.sqrt(d)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v.astype(np.float64)
    assert np.max(np.abs(out - ref)) < 2e-2 and np.abs(out).max() > 0.1


def test_benchmark_prints_the_profile_and_keeps_the_result(capsys):
    @systolica_nki.benchmark(warmup=1, iters=2)
    def kernel(x):
        t = systolica_nki.language.load(x)
        out = systolica_nki.language.ndarray(x.shape, x.dtype, buffer="shared_hbm")
        systolica_nki.language.store(out, value=systolica_nki.language.exp(t))
        return out
    x = np.zeros((4, 8), np.float32)
    assert np.array_equal(kernel(x), np.ones((4, 8), np.float32))
    assert "activation" in capsys.readouterr().out
    assert kernel.benchmark_result.nc_latency.get_latency_percentile(50) >= 0


def test_instructions_carry_engines_loops_and_source_lines():
    from systolica.nki.kernels import matmul
    a = np.ones((256, 128), BF16)
    b = np.ones((256, 512), BF16)
    ins = systolica_nki.run(matmul.matmul_tiled, a, b).instructions
    mm = [i for i in ins if i.opcode == "nc_matmul"]
    assert len(mm) == 2 and {i.engine for i in mm} == {"tensor"}
    assert [i.loops[-1][1] for i in mm] == [0, 1] and mm[0].loops[-1][2] == "affine"
    assert mm[0].source.startswith("matmul.py:")
    assert mm[0].params["accumulate"] is False and mm[1].params["accumulate"] is True
    assert mm[1].reads[-1].memory == "psum"       # accumulating reads the PSUM tile
    dma = [i for i in ins if i.opcode == "dma_copy"]
    assert dma[0].params["src"] == "hbm" and dma[0].params["descriptors"] == 128
    assert [i.index for i in ins] == list(range(len(ins)))


def test_reshape_and_broadcast_are_views_of_the_same_buffer():
    nl = systolica_nki.language

    def kernel(x, row):
        flat = x.reshape((128, 8))                # [2, 64, 8] HBM -> [128, 8]
        t = nl.load(flat)
        r = nl.load(nl.broadcast_to(row, (128, 8)))
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(t, r))
        return out, flat
    x = np.arange(2 * 64 * 8, dtype=np.float32).reshape(2, 64, 8)
    row = np.arange(8, dtype=np.float32).reshape(1, 8)
    result = systolica_nki.run(kernel, x, row)
    out, flat = result.outputs
    assert np.array_equal(out, x.reshape(128, 8) + row) and flat.shape == (128, 8)
    loads = [i for i in result.instructions if i.opcode == "dma_copy"][:2]
    assert loads[0].reads[0].span == (0, x.nbytes)       # the whole of x's buffer


def test_index_expressions_take_the_axis_of_their_position_and_bn_stats_aggregates():
    nl, nisa = systolica_nki.language, systolica_nki.isa

    def kernel(x):
        rows, width = x.shape
        i_p, i_f, i_one = nl.mgrid[0:128, 0:width, 0:1]
        j_f, j_s = nl.mgrid[0:256, 0:6]             # j_f used on the free axis below
        out = nl.ndarray((rows, 2), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x[i_p, i_f], mask=i_p < rows)   # rows < 128: the rest masked off
        stats = nl.ndarray((128, 12), nl.float32)
        for j in nl.affine_range(width // 256):
            stats[i_p, j * 6 + j_s] = nisa.bn_stats(t[i_p, j * 256 + j_f])
        mean_var = nisa.bn_aggr(stats)
        nl.store(out[i_p, nl.arange(2)[None, :]], value=mean_var, mask=i_p < rows)
        assert t[i_one, i_f].shape == (1, width)
        return out
    x = np.random.default_rng(0).standard_normal((100, 512)).astype(np.float32)
    out = systolica_nki.simulate(kernel)(x)
    assert np.max(np.abs(out[:, 0] - x.mean(1))) < 1e-5
    assert np.max(np.abs(out[:, 1] - x.var(1))) < 1e-4


def test_access_patterns_and_results_written_into_psum_by_vectore():
    nl, nisa = systolica_nki.language, systolica_nki.isa

    def kernel(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        pairs = t.ap([[8, 4], [2, 4], [1, 2]])      # [4 partitions, 4 pairs, 2]
        s = nl.sum(pairs, axis=[2])                  # VectorE, into a new SBUF tile
        acc = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        acc[...] = nl.multiply(s, 2.0)               # VectorE writes PSUM itself
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=acc)
        return out
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    result = systolica_nki.run(kernel, x)
    assert np.array_equal(result.outputs, 2 * x.reshape(4, 4, 2).sum(2))
    mul = [i for i in result.instructions if i.opcode == "tensor_scalar"]
    assert mul[0].writes[0].memory == "psum"
    assert not [i for i in result.instructions if i.opcode == "tensor_copy"]
