"""Unit tier: the NKI engine model (systolica.nki.engines, systolica.nki.costs).

Expected values come from AWS's published formulas and figures (quoted beside each), not from
the code under test; every dependency rule has a control case that must not wait.
"""

import json

import pytest

from systolica.nki import _synthetic as syn
from systolica.nki.costs import (
    ASSUMED,
    dma_efficiency,
    dma_plan,
    elementwise_seconds,
    engine_seconds,
    golden_matmul_interval,
    load_target,
    matmul_seconds,
    published_matmul_cycles,
)
from systolica.nki.engines import schedule
from systolica.nki.instructions import Access, Instruction

# Published clocks (Trainium/Inferentia2 and Trainium2 Architecture Guides for NKI).
TRN1 = {"tensor": 2.8e9, "vector": 1.12e9, "scalar": 1.4e9, "gpsimd": 1.4e9}
TRN2 = {"tensor": 2.4e9, "vector": 0.96e9, "scalar": 1.2e9, "gpsimd": 1.2e9}
# NKI DMA bandwidth guide: "semaphore-to-start latency (~1300 ns cross-engine)"; BW / engine
# 17 B/ns (TRN1), 23 B/ns (TRN2).
DMA_START = 1.3e-6
DMA_ENGINE = {"trn1": 17e9, "trn2": 23e9}


def op(b, engine, opcode, reads=(), writes=(), n=512, in_dtype="float32", out_dtype="float32",
       **params):
    return b.add(engine, opcode, reads, writes, 128, n, in_dtype, out_dtype, 128 * n * 4, params)


def sb(buffer, p0=0, p1=128, s0=0, s1=2048):
    return Access("sbuf", buffer, (p0, p1), (s0, s1))


def ps(buffer, s0=0, s1=2048):
    return Access("psum", buffer, (0, 128), (s0, s1))


def load(b, dst, nbytes=1 << 20, descriptors=128):
    return b.dma(syn.hbm(b.alloc(), 0, nbytes), dst, nbytes, descriptors)


def starts(profile):
    return [p.start for p in profile.instructions]


# ----- presets -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, clocks", [("trn1", TRN1), ("trn2", TRN2)])
def test_targets_read_the_published_clocks_from_the_presets(name, clocks):
    t = load_target(name)
    assert t.clocks_hz == clocks
    assert (t.dma_engines, t.dma_engine_bandwidth, t.lanes) == (16, DMA_ENGINE[name], 128)


def test_an_unknown_target_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"^target must be one of trn1, trn2, trn3 .*not 'a100'$"):
        schedule([], "a100")


# ----- dependency rules --------------------------------------------------------------------------

@pytest.mark.parametrize("overlap", [True, False])
def test_read_after_write_waits_for_the_producer(overlap):
    b = syn.Builder()
    x = b.alloc()
    load(b, sb(x, 0, 64))
    op(b, "vector", "tensor_scalar", reads=[sb(x, 0, 64) if overlap else sb(x, 64, 128)],
       writes=[sb(b.alloc())])
    p = schedule(b.instructions, "trn2")
    producer, consumer = p.instructions
    if overlap:
        assert consumer.start == producer.ready > 0
        assert p.critical_path == [0, 1]
    else:
        assert consumer.start == 0.0


@pytest.mark.parametrize("overlap", [True, False])
def test_write_after_read_waits_for_the_reader(overlap):
    b = syn.Builder()
    x = b.alloc()
    op(b, "vector", "tensor_scalar", reads=[sb(x, s1=4096)], writes=[sb(b.alloc())], n=8192)
    load(b, sb(x, s0=0 if overlap else 4096, s1=4096 if overlap else 8192), 1 << 19)
    reader, writer = schedule(b.instructions, "trn2").instructions
    # tensor_scalar: max(MIN_II, N) = 8192 VectorE cycles at 0.96 GHz.
    assert reader.end == pytest.approx(8192 / 0.96e9)
    assert writer.start == pytest.approx((reader.end if overlap else 0.0) + DMA_START)


@pytest.mark.parametrize("same_bank", [True, False])
def test_write_after_write_waits_for_the_earlier_writer(same_bank):
    b = syn.Builder()
    acc = b.alloc()
    op(b, "vector", "tensor_copy", reads=[sb(b.alloc())], writes=[ps(acc)], n=4096)
    op(b, "scalar", "activation", reads=[sb(b.alloc())],
       writes=[ps(acc) if same_bank else ps(acc, 2048, 4096)], n=64, func="exp")
    first, second = schedule(b.instructions, "trn2").instructions
    assert second.start == (first.ready if same_bank else 0.0)


def test_a_read_never_waits_for_an_earlier_read():
    b = syn.Builder()
    x = b.alloc()
    op(b, "vector", "tensor_scalar", reads=[sb(x)], writes=[sb(b.alloc())], n=8192)
    op(b, "scalar", "activation", reads=[sb(x)], writes=[sb(b.alloc())], n=64)
    assert starts(schedule(b.instructions, "trn2")) == [0.0, 0.0]


# ----- engines and loops -------------------------------------------------------------------------

def test_engines_run_concurrently_and_each_in_program_order():
    b = syn.Builder()
    for engine in ("vector", "scalar", "vector"):
        op(b, engine, "tensor_scalar" if engine == "vector" else "activation",
           reads=[sb(b.alloc())], writes=[sb(b.alloc())], n=1024)
    v1, s1, v2 = schedule(b.instructions, "trn1").instructions
    assert v1.start == s1.start == 0.0                 # independent engines overlap
    assert v2.start == v1.end == pytest.approx(1024 / 1.12e9)   # same engine: in order
    assert s1.end == pytest.approx(1024 / 1.4e9)


@pytest.mark.parametrize("kind", ["affine", "sequential"])
def test_affine_iterations_overlap_and_sequential_ones_do_not(kind):
    b = syn.Builder()
    with b.loop(kind) as iterations:
        for _ in iterations(2):
            x = b.alloc()
            load(b, sb(x, s1=2048), nbytes=2048, descriptors=1)     # one queue each
            op(b, "vector", "tensor_scalar", reads=[sb(x)], writes=[sb(b.alloc())], n=2048)
    load0, vec0, load1, _ = schedule(b.instructions, "trn2").instructions
    if kind == "affine":
        assert load1.start == DMA_START and load1.queues != load0.queues
    else:
        assert load1.start == pytest.approx(vec0.ready + DMA_START)
        assert vec0.ready > load0.ready


def test_a_store_waiting_for_its_data_does_not_hold_back_a_later_ready_load():
    """DMAs are triggered from several engines' instruction streams (nki.isa.dma_copy:
    hwdge from the Sync or Scalar engine, swdge from GpSimd), so a store whose data is not
    ready leaves the queues to loads that are (earliest fit); the queues still never run two
    transfers at once, and loads start in program order."""
    b = syn.Builder()
    x, y = b.alloc(), b.alloc()
    op(b, "vector", "tensor_scalar", reads=[sb(b.alloc())], writes=[sb(x)], n=8192)
    b.dma(sb(x), syn.hbm(b.alloc(), 0, 1 << 20), 1 << 20, 128)          # store: waits
    load(b, sb(y))                                                      # independent load
    vec, store, later = schedule(b.instructions, "trn2").instructions
    assert store.start == pytest.approx(vec.end + DMA_START)
    assert later.start == pytest.approx(DMA_START) and later.end < store.start
    b2 = syn.Builder()
    z = b2.alloc()
    load(b2, sb(b2.alloc()))
    load(b2, sb(z))                                                     # same queues, in turn
    first, second = schedule(b2.instructions, "trn2").instructions
    assert second.start == pytest.approx(first.end)


def test_a_dependent_vector_instruction_pays_the_static_overhead():
    """Architecture guide, Vector Engine cost model: back-to-back dependent instructions add
    a static overhead of 100 engine cycles."""
    b = syn.Builder()
    x, y, z = b.alloc(), b.alloc(), b.alloc()
    op(b, "vector", "tensor_scalar", reads=[sb(x)], writes=[sb(y)], n=1024)
    op(b, "vector", "tensor_scalar", reads=[sb(y)], writes=[sb(z)], n=1024)
    op(b, "vector", "tensor_scalar", reads=[sb(x)], writes=[sb(b.alloc())], n=1024)
    a, dependent, independent = schedule(b.instructions, "trn1").instructions
    assert dependent.end - dependent.start == pytest.approx((1024 + 100) / 1.12e9)
    assert independent.end - independent.start == pytest.approx(1024 / 1.12e9)


@pytest.mark.parametrize("target, serial", [("trn1", True), ("trn2", False)])
def test_vector_and_gpsimd_share_the_sbuf_port_on_neuroncore_v2_only(target, serial):
    b = syn.Builder()
    op(b, "vector", "tensor_scalar", reads=[sb(b.alloc())], writes=[sb(b.alloc())], n=4096)
    op(b, "gpsimd", "iota", writes=[sb(b.alloc())], n=512)
    vector, gpsimd = schedule(b.instructions, target).instructions
    assert gpsimd.start == (vector.end if serial else 0.0)


# ----- costs against the published formulas ------------------------------------------------------

@pytest.mark.parametrize("opcode, engine, n, dtypes, params, cycles", [
    # nki.isa docstrings, "Estimated instruction cost" (MIN_II = 64, GPSIMD_START = 150)
    ("activation", "scalar", 1000, ("float32", "float32"), {}, 1000),
    ("activation", "scalar", 10, ("float32", "float32"), {}, 64),
    ("activation", "scalar", 1000, ("float32", "float32"), {"reduce_op": "add"}, 1064),
    ("tensor_tensor", "vector", 1000, ("float32", "float32"), {"op": "add"}, 2000),
    ("tensor_tensor", "vector", 1000, ("bfloat16", "bfloat16"), {"op": "add"}, 1000),
    ("tensor_tensor", "vector", 1000, ("bfloat16", "bfloat16"), {"op": "divide"}, 2000),
    ("tensor_reduce", "vector", 1000, ("bfloat16", "bfloat16"), {"op": "add"}, 500),
    ("tensor_reduce", "vector", 1000, ("float32", "float32"), {"op": "add"}, 1000),
    ("reciprocal", "vector", 1000, ("float32", "float32"), {}, 8000),
    ("memset", "vector", 1000, ("bfloat16", "bfloat16"), {"value": 0}, 500),
    ("iota", "gpsimd", 1000, ("int32", "int32"), {}, 1150),
    ("affine_select", "gpsimd", 1000, ("float32", "float32"), {}, 1150),
    ("tensor_scalar_reduce", "vector", 1000, ("float32", "float32"), {}, 1064),
    ("bn_aggr", "vector", 300, ("float32", "float32"), {}, 1300),
])
def test_engine_costs_follow_the_published_formulas(opcode, engine, n, dtypes, params, cycles):
    seconds = elementwise_seconds(engine, n, "trn1", opcode=opcode, in_dtype=dtypes[0],
                                  out_dtype=dtypes[1], params=params)
    assert seconds == pytest.approx(cycles / TRN1[engine])


def test_tensor_tensor_with_one_psum_input_runs_at_n():
    b = syn.Builder()
    op(b, "vector", "tensor_tensor", reads=[ps(b.alloc()), sb(b.alloc())],
       writes=[sb(b.alloc())], n=1000, op="divide")
    (p,) = schedule(b.instructions, "trn2").instructions
    assert p.end == pytest.approx(1000 / 0.96e9)


@pytest.mark.parametrize("m, n, dtype, cycles", [
    # nki.isa.nc_matmul: max(min(64, N_stationary), N_moving), 4x for float32
    (128, 512, "bfloat16", 512), (128, 16, "bfloat16", 64), (32, 16, "bfloat16", 32),
    (128, 512, "float32", 2048),
])
def test_published_matmul_formula(m, n, dtype, cycles):
    ins = syn.matmul_stream([(128, m, n)], dtype)[0]
    assert published_matmul_cycles(ins) == cycles


@pytest.mark.parametrize("k, n, expected", [(128, 512, 512), (128, 128, 128), (64, 512, 512)])
def test_the_tile_interval_matches_aws_where_moving_dominates(k, n, expected):
    """For N_moving >= K the tile's steady state (load in the background) equals AWS's
    interval; the tile loads stationary one row per cycle, AWS's LoadStationary is faster."""
    assert golden_matmul_interval(128, 128, k, n) == expected


def test_back_to_back_matmuls_reach_the_published_peak():
    """100 x (128 x 128 x 512) BF16 at 512 cycles each plus one 256-cycle drain: MFU
    51200 / 51456; AWS: 92 TFLOPS BF16 per NeuronCore-v2 = 128 * 128 * 2 * 2.8 GHz."""
    p = schedule(syn.matmul_stream([(128, 128, 512)] * 100), "trn1")
    assert p.seconds == pytest.approx((100 * 512 + 256) / 2.8e9)
    assert p.mfu == pytest.approx(51200 / 51456)
    assert p.engine_busy["tensor"] == pytest.approx(51200 / 51456)
    flops = 100 * 128 * 128 * 512 * 2 / p.seconds
    assert flops == pytest.approx(92e12, rel=0.01)


def test_matmuls_accumulating_into_one_psum_bank_issue_back_to_back():
    """K accumulation: 8 matmuls into one bank keep TensorE busy (8 x 512 cycles) and drain
    once (the pipeline keeps PSUM writes in order); a VectorE read waits for the drain."""
    b = syn.Builder()
    acc = b.alloc()
    for _ in range(8):
        b.matmul(sb(b.alloc(), s1=256), sb(b.alloc(), s1=1024), ps(acc), 128, 128, 512)
    op(b, "vector", "tensor_copy", reads=[ps(acc)], writes=[sb(b.alloc())], n=512)
    p = schedule(b.instructions, "trn1")
    *matmuls, copy = p.instructions
    assert matmuls[-1].end == pytest.approx(8 * 512 / 2.8e9)
    assert copy.start == pytest.approx((8 * 512 + 256) / 2.8e9)


def test_fp32_matmuls_cost_four_times_bf16():
    bf16 = schedule(syn.matmul_stream([(128, 128, 512)] * 10), "trn2")
    fp32 = schedule(syn.matmul_stream([(128, 128, 512)] * 10, "float32"), "trn2")
    drain = 256 / 2.4e9
    assert (fp32.seconds - drain) == pytest.approx(4 * (bf16.seconds - drain))


def test_the_arch_guide_dma_example_uses_16_engines_with_8_buffers_each():
    """Architecture guide, Data movement: a 128 x 512 FP32 load is best done as 16 DMA
    transfers (one per engine) of 8 DMA buffers each."""
    ins = syn.dma_load(128, 512 * 4)[0]
    plan = dma_plan(ins, load_target("trn1"))
    assert plan.queues == 16
    overhead = ASSUMED["dma_descriptor_overhead"].value
    assert plan.queue_seconds == pytest.approx(8 * (2048 / 17e9 + overhead))
    assert plan.hbm_bytes == 128 * 512 * 4


def test_small_dma_chunks_are_less_efficient_than_4_kib_ones():
    t = load_target("trn2")
    assert dma_efficiency(512, t) < dma_efficiency(4096, t) < 1.0


@pytest.mark.parametrize("target, bound", [("trn1", 16 * 17e9), ("trn2", 362.5e9)])
def test_many_loads_are_bound_by_dma_or_the_hbm_share(target, bound):
    """trn1: 16 DMA engines x 17 B/ns = 272 GB/s, below 820 GiB/s / 2 cores; trn2: 2.9 TB/s
    over 8 NeuronCore-v3 = 362.5 GB/s per core, below 16 x 23 B/ns = 368 GB/s. 64 KiB per
    partition: the descriptor overhead is 0.1-0.4 %."""
    p = schedule(syn.dma_load(128, 64 * 1024, count=8), target)
    moved = 8 * 128 * 64 * 1024
    assert p.hbm_bytes == moved
    assert p.seconds - DMA_START == pytest.approx(moved / bound, rel=5e-3)


def test_the_closed_form_matmul_time_agrees_with_the_schedule():
    p = schedule(syn.matmul_stream([(128, 128, 512)] * 16), "trn2")
    assert matmul_seconds(256, 1024, 512, "trn2") == pytest.approx(p.seconds)


# ----- the profile and its exports ---------------------------------------------------------------

def test_profile_table_json_and_text():
    p = schedule(syn.blocked_matmul(256, 256, 1024), "trn2")
    rows = p.table()
    assert {r["opcode"] for r in rows} == {"nc_matmul", "tensor_copy", "dma_copy"}
    matmuls = next(r for r in rows if r["opcode"] == "nc_matmul")
    assert matmuls["count"] == 2 * 2 * 2 and matmuls["source"] == "blocked_matmul.py:30"
    doc = json.loads(json.dumps(p.to_json()))
    assert set(doc["engine_busy"]) == {"tensor", "vector", "scalar", "gpsimd", "dma"}
    assert doc["seconds"] == p.seconds and len(doc["instructions"]) == len(p.instructions)
    assert "nc_matmul" in str(p)
    assert p.critical_path[-1] == max(range(len(p.instructions)),
                                      key=lambda j: p.instructions[j].ready)


#: Trace Event Format: fields every event of a phase must carry, and their types.
_REQUIRED = {"X": {"name": str, "ph": str, "ts": (int, float), "dur": (int, float),
                   "pid": int, "tid": int},
             "M": {"name": str, "ph": str, "pid": int, "args": dict}}


def _validate_trace(doc):
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    named = set()
    for event in doc["traceEvents"]:
        required = _REQUIRED[event["ph"]]
        for key, kind in required.items():
            assert isinstance(event.get(key), kind), (key, event)
        if event["ph"] == "X":
            assert event["dur"] >= 0 and event["ts"] >= 0
        elif event["name"] == "thread_name":
            named.add(event["tid"])
    return named


def test_the_trace_is_valid_trace_event_json_with_a_track_per_engine_and_queue(tmp_path):
    p = schedule(syn.blocked_matmul(256, 256, 1024), "trn1")
    path = tmp_path / "t.json"
    p.write_trace(path)
    doc = json.loads(path.read_text())
    named = _validate_trace(doc)
    assert len(named) == 4 + 16
    used = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert used <= named and len(used) == 2 + 16       # tensor, vector, every queue


def test_the_trace_check_catches_a_broken_event():
    bad = {"traceEvents": [{"name": "x", "ph": "X", "ts": "0", "dur": 1, "pid": 1, "tid": 1}]}
    with pytest.raises(AssertionError):
        _validate_trace(bad)


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "t.png"
    schedule(syn.blocked_matmul(256, 256, 1024), "trn2").plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


# ----- bad input and speed -----------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    ({"engine": "pe"}, r"engine must be one of tensor, vector, scalar, gpsimd, dma, not 'pe'"),
    ({"index": 3}, r"index is 3; indices must be 0, 1, \.\.\. in program order"),
    ({"reads": (Access("dram", 1, (0, 1), (0, 4)),)},
     r"an access's memory must be one of sbuf, psum, hbm, not 'dram'"),
    ({"reads": (Access("sbuf", 1, (0, 1), (8, 4)),)}, r"span must be a \(start, stop\) pair"),
    ({"loops": ((1, 0, "parallel"),)},
     r"a loop must be \(id, iteration, kind\) with kind one of affine, sequential, static, "
     r"not \(1, 0, 'parallel'\)"),
])
def test_a_malformed_instruction_is_a_one_line_error_naming_it(change, message):
    fields = dict(index=0, engine="vector", opcode="tensor_copy", reads=(), writes=(),
                  partitions=128, elements=8, in_dtype="float32", out_dtype="float32",
                  nbytes=0, source="k.py:7") | change
    with pytest.raises(ValueError, match=r"^instruction 0 \(tensor_copy, k.py:7\): " + message):
        schedule([Instruction(**fields)], "trn2")


def test_thousands_of_instructions_are_all_placed_in_engine_order():
    """A blocked matmul's 2,272 instructions (its speed, 0.10 s of CPU here, is make bench's
    NKI row, not a timed test): every one placed once, each engine's in program order."""
    trace = syn.blocked_matmul(2048, 4096, 2048)
    assert len(trace) > 2000
    placed = schedule(trace, "trn2").instructions
    assert sorted(p.index for p in placed) == list(range(len(trace)))
    for engine in ("tensor", "vector"):
        mine = sorted((p for p in placed if p.engine == engine), key=lambda p: p.index)
        assert mine and all(a.start <= b.start and a.end <= b.start + 1e-15
                            for a, b in zip(mine, mine[1:], strict=False))


def test_numpy_integers_in_ranges_are_accepted():
    import numpy as np

    access = Access("sbuf", 1, (np.int64(0), np.int64(128)), (0, np.int64(256)))
    ins = Instruction(0, "vector", "tensor_copy", (access,), (), 128, np.int64(32), "float32",
                      "float32", 0)
    # tensor_copy of 32 elements: max(MIN_II = 64, 32) VectorE cycles at 1.12 GHz (trn1).
    assert schedule([ins], "trn1").seconds == pytest.approx(64 / 1.12e9)


def test_engine_seconds_bound_the_schedule_and_match_it_without_stalls():
    stream = syn.matmul_stream([(128, 128, 512)] * 20)
    work = engine_seconds(stream, "trn2")
    assert work["tensor"] == pytest.approx(20 * 512 / 2.4e9)
    assert work["dma"] == work["hbm"] == work["vector"] == 0.0
    trace = syn.blocked_matmul(512, 512, 1024)
    p = schedule(trace, "trn2")
    assert max(engine_seconds(trace, "trn2").values()) <= p.seconds


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_the_matmul_tutorial_steps_get_faster_in_the_tutorials_order(target):
    """AWS's matmul tutorial: tiled > hoisted loads > blocked free dimensions > blocked all
    dimensions in latency (its benchmark table, trn1.32xlarge)."""
    seconds = [schedule(syn.tutorial_matmul(step, 2048, 1024, 1024), target).seconds
               for step in syn.TUTORIAL_STEPS]
    assert seconds == sorted(seconds, reverse=True) and len(set(seconds)) == 4


def test_fp8_double_row_doubles_the_macs_per_cycle():
    """K = 256 in double-row mode at the BF16 interval: twice the MACs; NeuronCore-v3
    publishes 158 cFP8 TFLOPS against 79 BF16."""
    p = schedule(syn.matmul_stream([(256, 128, 512)] * 100, "float8_e4m3", "double_row"),
                 "trn2")
    assert p.seconds == pytest.approx((100 * 512 + 256) / 2.4e9)
    assert p.mfu == pytest.approx(2 * 51200 / 51456)


@pytest.mark.parametrize("p, f, published, tile", [(128, 128, 128, 128), (32, 128, 64, 32)])
def test_tensor_engine_transposes(p, f, published, tile):
    """nki.isa.nc_transpose on TensorE: max(P, min(64, F)) cycles back to back; the tile
    streams a P x P identity past the data, max(P, P) cycles."""
    b = syn.Builder()
    b.add("tensor", "nc_transpose", (sb(b.alloc(), 0, p),), (ps(b.alloc()),), p, f,
          "bfloat16", "bfloat16", p * f * 2)
    (ins,) = b.instructions
    assert published_matmul_cycles(ins) == published
    (placed,) = schedule(b.instructions, "trn1").instructions
    assert placed.end == pytest.approx(tile / 2.8e9)


def _tiled_pair(position1, size, start=0):
    """Two independent K = 64, M = 64, N = 512 BF16 matmuls, the first in the tile at
    (``start``, ``start``) and the second at ``position1``, both of ``size``; into different
    PSUM banks."""
    b = syn.Builder()
    src, out = b.alloc(), b.alloc()
    for j, position in enumerate(((start, start), position1)):
        b.matmul(sb(src, 0, 64), sb(src, 0, 64, 2048, 3072), ps(out, j * 2048, j * 2048 + 2048),
                 64, 64, 512, tile_position=position, tile_size=size)
    return b.instructions


@pytest.mark.parametrize("position1, size, together", [
    ((64, 64), (64, 64), True),        # diagonal tiles: no PE row or column shared
    ((64, 0), (64, 64), False),        # same PE columns
    ((0, 64), (64, 64), False),        # same PE rows
    ((64, 0), (64, 128), False),       # row tiles of full width share every column
])
def test_matmuls_in_tiles_sharing_no_lane_run_at_the_same_time(position1, size, together):
    """The rule of golden.timing.tiled_schedule (docs/numerics.md choice 9): two matmuls run
    at the same time only if their tiles share no PE row and no PE column. Each streams its
    512 moving columns (512 TensorE cycles at 2.8 GHz on trn1, tiled or not), so the pair
    takes 512 cycles together or 1,024 one after the other, plus the 256-cycle drain."""
    p = schedule(_tiled_pair(position1, size), "trn1")
    first, second = p.instructions
    assert first.end - first.start == pytest.approx(512 / 2.8e9)
    assert second.start == pytest.approx(0.0 if together else 512 / 2.8e9)
    assert p.seconds == pytest.approx(((512 if together else 1024) + 256) / 2.8e9)
    # TensorE is busy while either runs; the unscheduled sum counts what the pair needs
    assert p.busy_cycles["tensor"] == pytest.approx(512 if together else 1024)
    sizes = {(64, 64): 512, (64, 128): 1024}
    assert engine_seconds(_tiled_pair(position1, size), "trn1")["tensor"] == pytest.approx(
        sizes[size] / 2.8e9)


def test_a_tiled_matmul_still_waits_for_its_data_and_issues_in_order():
    """Disjoint tiles do not let a TensorE instruction start before the previous one."""
    b = syn.Builder()
    src, out = b.alloc(), b.alloc()
    ready = load(b, sb(src, 64, 128))
    b.matmul(sb(src, 64, 128), sb(src, 64, 128, 2048, 3072), ps(out, 0, 2048), 64, 64, 512,
             tile_position=(64, 64), tile_size=(64, 64))
    b.matmul(sb(b.alloc(), 0, 64), sb(b.alloc(), 0, 64), ps(out, 2048, 4096), 64, 64, 512,
             tile_position=(0, 0), tile_size=(64, 64))
    p = schedule(b.instructions, "trn1")
    assert p.instructions[1].start >= p.instructions[ready].end
    assert p.instructions[2].start == pytest.approx(p.instructions[1].start)


def _overlap(a, b):
    return any(x.start < y.end and y.start < x.end for x in a for y in b)


def test_flash_attention_keeps_engines_busy_at_once():
    """A flash-style attention stream: ScalarE's exp and VectorE's reductions and copies run
    while TensorE works, DMA under both; letting sequential iterations overlap (dependencies
    only) is faster than the barrier."""
    trace = syn.flash_attention(256, 1024)
    loose = schedule(trace, "trn2", sequential="dependencies")
    by_engine = {e: [p for p in loose.instructions if p.engine == e]
                 for e in ("tensor", "vector", "scalar", "dma")}
    assert _overlap(by_engine["scalar"], by_engine["tensor"])
    assert _overlap(by_engine["vector"], by_engine["tensor"])
    assert _overlap(by_engine["dma"], by_engine["vector"])
    assert loose.seconds < schedule(trace, "trn2").seconds
    assert {r["opcode"] for r in loose.table()} >= {"nc_matmul", "nc_transpose", "activation",
                                                    "tensor_reduce", "dma_copy"}
