# Everything runs in a local virtual environment (.venv), created on first use; the package
# is reinstalled (editable, with the test extra) only when pyproject.toml changes.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.tensorc-installed
DEV_INSTALLED := $(VENV)/.tensorc-dev-installed
# The model `make demo` compiles; any name in models.MODELS (mlp, lenet5, resnet, yolo, ...).
MODEL ?= resnet
# `make fuzz`: how long the campaign runs, with how many worker processes; where the models
# that break the contract are saved
FUZZ_SECONDS ?= 600
FUZZ_WORKERS ?= 2
FUZZ_OUT ?= fuzz-failures

.PHONY: all demo test fuzz bench lint clean distclean

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	@touch $@

$(DEV_INSTALLED): pyproject.toml constraints.txt $(INSTALLED)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $@

## demo: compile a bundled model (MODEL=resnet), run it, check it against onnxruntime, time both
demo: $(INSTALLED)
	$(PY) -m models.demo $(MODEL)

## test: run the test suite on 2 workers
test: $(INSTALLED)
	$(PY) -m pytest -n 2 -q

## fuzz: mutate the seed models for FUZZ_SECONDS, print the counts per outcome, save failures
fuzz: $(INSTALLED)
	cd tests && ../$(PY) -m fuzz.campaign --seconds $(FUZZ_SECONDS) --workers $(FUZZ_WORKERS) \
		--out ../$(FUZZ_OUT)

## bench: latency of every bundled model beside onnxruntime, at 1 and 2 threads
bench: $(INSTALLED)
	$(PY) -m benchmarks.latency

## lint: ruff
lint: $(DEV_INSTALLED)
	$(PY) -m ruff check .

clean:
	rm -rf build/ dist/ *.egg-info .pytest_cache .ruff_cache $(FUZZ_OUT)
	rm -f $(filter-out models/mlp.onnx models/lenet5.onnx,$(wildcard models/*.onnx))
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +
	find . -path ./$(VENV) -prune -o -name '*.tcz' -type f -exec rm -f {} +

distclean: clean
	rm -rf $(VENV)
