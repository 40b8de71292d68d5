"""The host <-> cocotb protocol, defined once: the environment variables the host sets for a
simulator run, the cocotb test modules it runs, and the file schemas both sides read.

A simulator run is a separate process: the host (:mod:`systolica.sim`) starts it through
:func:`systolica.sim.builder.runner.run_tests` with a cocotb test module of
:mod:`systolica.tb.cases` and a few environment variables, and reads back what the module
wrote. Both sides take every name from here. Only the standard library and numpy are
imported, numpy only inside the file functions (the bulk harness's cocotb module imports
nothing but cocotb and this module).

Environment variables (all optional unless a module says otherwise):

========================== ================================================================
``SYSTOLICA_TILE_CONFIG``   every run: the tile's configuration (:func:`tile_config_env`)
``SYSTOLICA_MAX_CYCLES``    bulk harness: clock cycles before the run is declared stuck
``SYSTOLICA_BULK_TIMING``   bulk harness: its timing file (:func:`write_timing`)
``SYSTOLICA_PROGRESS``      bulk harness: its progress file (:func:`write_progress`)
``SYSTOLICA_PROGRESS_CYCLES`` bulk harness: cycles between progress reports (default 1024)
``SYSTOLICA_FREE_RUN_CYCLES`` bulk harness: free-run this many cycles instead (``make bench``)
``SYSTOLICA_PROGRAM``       program runner: the program file (:func:`write_program`)
``SYSTOLICA_RESULTS``       program runner: the results file it writes (:func:`write_results`)
``SYSTOLICA_STATS``         per-cycle TB: file it appends ``{"macs": n}`` JSON lines to
``SYSTOLICA_BULK_MACS``     regression: BF16 MACs the bulk test checks (default one matmul)
``SYSTOLICA_COVERAGE``      per-cycle TB: folder for functional-coverage dumps
``SYSTOLICA_CORRUPT_GOLDEN`` regression: ``1`` makes the golden model expect one wrong word
                            (error injection, :mod:`systolica.tb.fault_injection`; tests only)
========================== ================================================================
"""

# ---- environment variables ---------------------------------------------------------------
TILE_CONFIG = "SYSTOLICA_TILE_CONFIG"
MAX_CYCLES = "SYSTOLICA_MAX_CYCLES"
BULK_TIMING = "SYSTOLICA_BULK_TIMING"
PROGRESS = "SYSTOLICA_PROGRESS"
PROGRESS_CYCLES = "SYSTOLICA_PROGRESS_CYCLES"
FREE_RUN_CYCLES = "SYSTOLICA_FREE_RUN_CYCLES"
PROGRAM = "SYSTOLICA_PROGRAM"
RESULTS = "SYSTOLICA_RESULTS"
STATS = "SYSTOLICA_STATS"
BULK_MACS = "SYSTOLICA_BULK_MACS"
COVERAGE = "SYSTOLICA_COVERAGE"
CORRUPT_GOLDEN = "SYSTOLICA_CORRUPT_GOLDEN"



def tile_config_env(config):
    """The value of :data:`TILE_CONFIG` for a ``TileConfig`` (str, JSON): its size, PSUM,
    operand types (golden short names), double-row and MX flags, as plain values (the
    testbench reads them with :func:`read_tile_config` and imports no configuration
    class)."""
    import json

    return json.dumps({"rows": config.rows, "cols": config.cols,
                       "banks": config.psum_banks, "entries": config.psum_entries,
                       "dtypes": list(config.dtypes), "double_row": config.double_row,
                       "mx": config.mx})


def read_tile_config(environ):
    """The dict :func:`tile_config_env` wrote into ``environ`` (a mapping), or None when
    the run was started without it."""
    import json

    text = environ.get(TILE_CONFIG)
    return json.loads(text) if text else None


#: How the bulk harness's message for a run past its cycle budget begins (the cocotb side
#: raises it, the runner finds it in the log).
STUCK = "tile stuck:"


# ---- cocotb test modules -----------------------------------------------------------------
#: The regression's cocotb tests on the per-cycle TB.
TILE_TESTS = "systolica.tb.cases.tile"
#: Runs one command program from a file on the per-cycle TB (:func:`write_program`).
PROGRAM_RUNNER = "systolica.tb.cases.program"
#: Clocks the bulk-stimulus harness (:mod:`systolica.tb.bulk`); testcases ``run_bulk`` and
#: ``free_run``.
BULK_RUNNER = "systolica.tb.cases.bulk"

#: Every cocotb test of :data:`TILE_TESTS` and how its lanes are best decoded in a waveform
#: (one of ``"int8"``, ``"bf16"``, ``"fp16"``, ``"e4m3"``, ``"mixed"``). A regression test
#: checks that this names exactly the module's tests.
TILE_TEST_LANES = {
    "test_random_full_size": "int8",
    "test_extremes": "int8",
    "test_identity": "int8",
    "test_one_hot_rows": "int8",
    "test_partial_k_and_m": "int8",
    "test_back_to_back_stationaries": "int8",
    "test_random_idle_and_backpressure": "int8",
    "test_error_injection_is_caught": "int8",
    "test_bf16_random_normal": "bf16",
    "test_bf16_wide_exponent": "bf16",
    "test_bf16_specials_mixed": "bf16",
    "test_bf16_directed_rules": "bf16",
    "test_psum_keeps_nan_inf_and_flushes_under_ftz": "bf16",
    "test_multi_slab_accumulation": "mixed",
    "test_int8_and_bf16_interleaved": "mixed",
    "test_bf16_bulk_random": "bf16",
    "test_stuck_tile_times_out_with_message": "int8",
    "test_psum_banks_offsets_and_read_out": "mixed",
    "test_illegal_commands_are_rejected_with_status": "int8",
    "test_timing_model_follows_random_backpressure": "int8",
    "test_fp16_fp8_mixed_pairs": "fp16",
    "test_fp8_double_row": "e4m3",
    "test_transpose_specials_in_every_position": "mixed",
}


# ---- the timing and progress files (bulk harness -> host) --------------------------------

#: The bulk harness's timing file (``SYSTOLICA_BULK_TIMING``): one line of ``name=value``
#: pairs, named here and read by name. ``cycles``: clock cycles run (after reset);
#: ``seconds`` / ``cpu_seconds``: wall and CPU time of the clock loop in the simulator
#: process; ``rejected`` / ``error``: the tile's final status (rejected-command count and
#: the latest ``ErrorCode`` value), written by ``run_bulk`` only, not by ``free_run``.
TIMING_FIELDS = {"cycles": int, "seconds": float, "cpu_seconds": float, "rejected": int,
                 "error": int}
#: The fields every timing file has (the others are None when :func:`read_timing` reads it).
TIMING_REQUIRED = ("cycles", "seconds", "cpu_seconds")
#: The progress file (``SYSTOLICA_PROGRESS``), the same way: result beats received so far
#: and the clock cycle there.
PROGRESS_FIELDS = {"results": int, "cycle": int}


def write_timing(path, **fields):
    """Write a timing file: ``fields`` are names of :data:`TIMING_FIELDS` (those of
    :data:`TIMING_REQUIRED` at least) with their values. Standard library only (the
    harness's cocotb module calls it).

    Raises
    ------
    ValueError
        If a field name is not in :data:`TIMING_FIELDS` or a required one is missing.
    """
    _write_fields(path, "timing", TIMING_FIELDS, TIMING_REQUIRED, fields)


def read_timing(path):
    """Read a file of :func:`write_timing`: a dict with every name of :data:`TIMING_FIELDS`
    (int or float by the schema; None for a field the file does not hold).

    Raises
    ------
    ValueError
        Naming the file, if a pair is not ``name=value``, a name is unknown, a value does not
        parse, or a required field is missing.
    """
    return _read_fields(path, "timing", TIMING_FIELDS, TIMING_REQUIRED)


def write_progress(path, *, results, cycle):
    """Write a progress file (:data:`PROGRESS_FIELDS`)."""
    _write_fields(path, "progress", PROGRESS_FIELDS, tuple(PROGRESS_FIELDS),
                  {"results": results, "cycle": cycle})


def read_progress(path):
    """Read a file of :func:`write_progress`: ``{"results": int, "cycle": int}``.

    Raises
    ------
    ValueError
        As :func:`read_timing`.
    """
    return _read_fields(path, "progress", PROGRESS_FIELDS, tuple(PROGRESS_FIELDS))


def _check_names(fields, path, what, schema, required):
    unknown = sorted(set(fields) - set(schema))
    missing = [name for name in required if name not in fields]
    if unknown or missing:
        raise ValueError(f"{what} file {path}: "
                         + (f"unknown fields {', '.join(unknown)}" if unknown else
                            f"missing fields {', '.join(missing)}")
                         + f" (fields: {', '.join(schema)})")


def _write_fields(path, what, schema, required, fields):
    _check_names(fields, path, what, schema, required)
    with open(path, "w") as handle:
        handle.write(" ".join(f"{name}={schema[name](value)!r}"
                              for name, value in fields.items()) + "\n")


def _read_fields(path, what, schema, required):
    with open(path) as handle:
        text = handle.read()
    fields = {}
    for pair in text.split():
        name, sep, value = pair.partition("=")
        if not sep or name not in schema:
            raise ValueError(f"{what} file {path}: {pair!r} is not one of "
                             f"{', '.join(f'{n}=<value>' for n in schema)}")
        try:
            fields[name] = schema[name](value)
        except ValueError:
            raise ValueError(f"{what} file {path}: {name} must be "
                             f"{schema[name].__name__}, not {value!r}") from None
    _check_names(fields, path, what, schema, required)
    return {name: fields.get(name) for name in schema}


# ---- the program file (host -> program runner) -------------------------------------------

def write_program(path, commands, *, idle=0.0, backpressure=0.0):
    """Write a command program for :data:`PROGRAM_RUNNER` to ``path`` (``.npz``).

    ``commands``: dicts, in order; a READ is ``{"bank", "offset", "read": n}``; a matmul is
    ``{"bank", "offset", "stationary", "moving", "stationary_type", "moving_type",
    "accumulate", "ftz", "perf_mode"[, "is_transpose"][, "tile_position", "tile_size"]}``
    with the operands as numpy arrays
    ([K, M] and [K, N], any 1- or 2-byte dtype; stored as their bit patterns), the types as
    short type names (``"int8"``, ``"e4m3"``, ...), ``perf_mode`` None or ``"double_row"``,
    ``is_transpose`` a bool (default False) and the tile two pairs of int (default None, the
    whole array).
    An MX matmul (NeuronCore-v4's ``nc_matmul_mx``, a tile with the ``mx`` type set) is
    ``{"bank", "offset", "mx": True, "stationary", "moving", "stationary_type",
    "moving_type", "stationary_scale", "moving_scale", "accumulate", "dst_dtype",
    "rounding", "seed"[, "tile_position", "tile_size"]}``: the operands as their ``[P, M,
    4]`` and ``[P, N, 4]`` element arrays (float8_e4m3fn, float8_e5m2 or float4_e2m1fn;
    stored as their uint8 codes, not packed into x4 words: the testbench's model packs
    them, one rule for both drivers), the types as the short names of
    ``systolica.golden.mx.MX_TYPES`` (``"e4m3fn"``, ``"e5m2"``, ``"e2m1"``), the scales
    ``[P // 8, M]`` and ``[P // 8, N]`` E8M0 codes (uint8 or float8_e8m0fnu; read back as
    uint8), ``dst_dtype`` ``"fp32"`` or ``"bf16"``, ``rounding`` ``"rne"`` or
    ``"stochastic"`` and ``seed`` an int (0 .. 2^32 - 1).
    ``idle`` and ``backpressure`` are probabilities (0..1).
    """
    import numpy as np

    program = {"count": np.int64(len(commands)), "idle": np.float64(idle),
               "backpressure": np.float64(backpressure)}
    for i, c in enumerate(commands):
        program[f"bank_{i}"] = np.int64(c["bank"])
        program[f"offset_{i}"] = np.int64(c["offset"])
        if "read" in c:
            program[f"read_{i}"] = np.int64(c["read"])
            continue
        for role in ("stationary", "moving"):
            array = c[role]
            program[f"{role}_{i}"] = array.view(f"u{array.dtype.itemsize}")
            program[f"{role}_type_{i}"] = np.str_(c[f"{role}_type"])
        program[f"accumulate_{i}"] = np.bool_(c["accumulate"])
        if c.get("tile_position") is not None:
            program[f"tile_{i}"] = np.array([*c["tile_position"], *c["tile_size"]], np.int64)
        if c.get("mx", False):
            program[f"mx_{i}"] = np.bool_(True)
            for role in ("stationary", "moving"):
                program[f"{role}_scale_{i}"] = np.asarray(c[f"{role}_scale"]).view(np.uint8)
            program[f"dst_dtype_{i}"] = np.str_(c["dst_dtype"])
            program[f"rounding_{i}"] = np.str_(c["rounding"])
            program[f"seed_{i}"] = np.int64(c["seed"])
            continue
        if c.get("perf_mode") is not None:
            program[f"perf_mode_{i}"] = np.str_(c["perf_mode"])
        program[f"ftz_{i}"] = np.bool_(c["ftz"])
        program[f"is_transpose_{i}"] = np.bool_(c.get("is_transpose", False))
    np.savez(path, **program)


def read_program(path):
    """Read a file of :func:`write_program`: ``(commands, idle, backpressure)``, the commands
    as the dicts it was given (operands as unsigned bit patterns: view them as their type;
    every matmul has ``"mx"``, False for one that is not MX)."""
    import numpy as np

    with np.load(path) as program:
        commands = []
        for i in range(int(program["count"])):
            c = {"bank": int(program[f"bank_{i}"]), "offset": int(program[f"offset_{i}"])}
            if f"read_{i}" in program:
                c["read"] = int(program[f"read_{i}"])
            else:
                for role in ("stationary", "moving"):
                    c[role] = program[f"{role}_{i}"]
                    c[f"{role}_type"] = str(program[f"{role}_type_{i}"])
                c["accumulate"] = bool(program[f"accumulate_{i}"])
                tile = program[f"tile_{i}"].tolist() if f"tile_{i}" in program else None
                c["tile_position"] = None if tile is None else tuple(tile[:2])
                c["tile_size"] = None if tile is None else tuple(tile[2:])
                c["mx"] = f"mx_{i}" in program
                if c["mx"]:
                    for role in ("stationary", "moving"):
                        c[f"{role}_scale"] = program[f"{role}_scale_{i}"]
                    c["dst_dtype"] = str(program[f"dst_dtype_{i}"])
                    c["rounding"] = str(program[f"rounding_{i}"])
                    c["seed"] = int(program[f"seed_{i}"])
                else:
                    c["perf_mode"] = (str(program[f"perf_mode_{i}"])
                                      if f"perf_mode_{i}" in program else None)
                    c["ftz"] = bool(program[f"ftz_{i}"])
                    c["is_transpose"] = bool(program[f"is_transpose_{i}"])
            commands.append(c)
        idle = float(program["idle"]) if "idle" in program else 0.0
        backpressure = float(program["backpressure"]) if "backpressure" in program else 0.0
    return commands, idle, backpressure


# ---- the results file (program runner -> host) -------------------------------------------

def write_results(path, *, psums, issues, results, accept, cycles, seconds, mismatches,
                  expected_beats, observed_beats):
    """Write what :data:`PROGRAM_RUNNER` observed to ``path`` (``.npz``).

    ``psums``: {command index: PSUM array} for the commands whose results all arrived
    (int32 or float32); ``issues`` / ``results``: per command, the cycles of its moving
    beats / result beats (lists of int); ``accept``: per command its accept cycle (-1 if
    never accepted); ``cycles``: first cycle after reset to the last result, inclusive;
    ``seconds``: wall time of the clock loop; the scoreboard's ``mismatches``,
    ``expected_beats`` and ``observed_beats``.
    """
    import numpy as np

    out = {f"psum_{i}": psum for i, psum in psums.items()}
    for i, (beats, result_beats) in enumerate(zip(issues, results, strict=True)):
        out[f"issues_{i}"] = np.array(beats, dtype=np.int64)
        out[f"results_{i}"] = np.array(result_beats, dtype=np.int64)
    out.update(accept=np.array(accept, dtype=np.int64), cycles=np.int64(cycles),
               seconds=np.float64(seconds), mismatches=np.int64(mismatches),
               expected_beats=np.int64(expected_beats),
               observed_beats=np.int64(observed_beats))
    np.savez(path, **out)


def read_results(path, count):
    """Read a file of :func:`write_results` for a program of ``count`` commands: a dict with
    ``psums`` (list, None where a command's results did not all arrive), ``issues``,
    ``results``, ``accept`` (lists of tuples / ints) and the scalar fields as Python
    numbers."""
    import numpy as np

    with np.load(path) as out:
        return {
            "psums": [out[f"psum_{i}"] if f"psum_{i}" in out else None for i in range(count)],
            "issues": [tuple(int(v) for v in out[f"issues_{i}"]) for i in range(count)],
            "results": [tuple(int(v) for v in out[f"results_{i}"]) for i in range(count)],
            "accept": [int(v) for v in out["accept"]],
            "cycles": int(out["cycles"]), "seconds": float(out["seconds"]),
            "mismatches": int(out["mismatches"]),
            "expected_beats": int(out["expected_beats"]),
            "observed_beats": int(out["observed_beats"]),
        }
