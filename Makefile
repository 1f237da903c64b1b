# `make run` and `make test` do all the set-up: a virtual environment in .venv, then the work.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint compile bench clean

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

run: install
	$(BIN)/ragsweep run --docs examples/docs --testset examples/testset.json

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/pytest

compile: install
	$(BIN)/python pipelines/sweep_pipeline.py

clean:
	rm -rf $(VENV) runs build *.egg-info .pytest_cache .ruff_cache

bench: install
	$(BIN)/python benchmarks/bench_sweep.py
