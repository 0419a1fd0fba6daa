# Two commands from a fresh clone:  `make run` (the main job)  and  `make test` (the suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test bench clean-lake

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

## Set up and evaluate the bundled sample on the embedded defaults, print the comparison.
run: $(VENV)/.installed
	$(BIN)/raglake run

## Set up (with the dev extras) and run the test suite.
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

## Benchmarks: speed and memory, printed as ratios against a baseline measured in the same run.
bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/retrieval.py

clean-lake:
	rm -rf data/lake
