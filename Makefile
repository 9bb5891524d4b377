# Two entry points, both self-contained from a fresh clone:
#   make demo   set up .venv and run the main job
#   make test   set up .venv and run every test (ruff, the layout check, lit, pytest on one
#               worker per core)
#   make bench  set up .venv and run the benchmarks against PyTorch on CPU (bench/run.py;
#               about 25 minutes without inductor, measured); QUICK=1 runs the smoke
#               form (bench/run.py --quick)
#   make bench-async  Sync against Async data loading on a slow dataset (bench/async_data.py)
#   make bench-distributed  training over 1, 2 and 4 processes (torchrun) and the simulated
#               scaling over IPU-M2000s (bench/distributed.py)
#   make op-coverage  set up .venv, run the full op parity sweep (test/ops/coverage.py) and
#               rewrite README's op coverage table from it
#   make fidelity  set up .venv, compile published IPU configurations on the machine model
#               (bench/fidelity/run.py) and rewrite FIDELITY.md's tables; QUICK=1 compiles
#               cut-down ones and only prints
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench setup op-coverage

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,demo,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/train_digits.py

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) test/check_layout.py
	$(VENV)/bin/lit -sv test
	$(PY) -m pytest -n auto --dist worksteal

bench: $(STAMP)
	$(PY) bench/run.py $(if $(QUICK),--quick)

.PHONY: bench-async
bench-async: $(STAMP)
	$(PY) bench/async_data.py

.PHONY: bench-distributed
bench-distributed: $(STAMP)
	$(PY) bench/distributed.py

.PHONY: fidelity
fidelity: $(STAMP)
	$(PY) bench/fidelity/run.py $(if $(QUICK),--quick)

op-coverage: $(STAMP)
	$(PY) test/ops/coverage.py --readme
