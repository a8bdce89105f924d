# `make run`: set up, fetch the built-in models, start the daemon, show a real completion through it.
# `make test`: the suite. `make test-fast`: the tests on tiny models only (no real pair, no editors).
# `make lint`: ruff (pyproject.toml's [tool.ruff]); CI runs it before the tests.
PYTHON ?= python3
# torch: the CUDA build where nvidia-smi finds a GPU, else the CPU pin (models/gpu.py decides and
# says why); `make setup TORCH_CUDA=cpu` or `TORCH_CUDA=cu128` overrides it.
TORCH_CUDA ?=
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.specd-installed

PLAN   := $(VENV)/.torch-plan

.PHONY: run test test-fast lint setup models clean FORCE

# pip's arguments for torch, rewritten only when they change (a GPU appears, TORCH_CUDA is given):
# then the stamp is stale and setup installs the other build into the same .venv
$(PLAN): FORCE
	@mkdir -p $(VENV)
	@plan=$$($(PYTHON) models/gpu.py pip-args $(TORCH_CUDA) 2>$(PLAN).why) || { cat $(PLAN).why; exit 1; }; \
	if [ ! -f $@ ] || [ "$$(cat $@)" != "$$plan" ]; then cat $(PLAN).why; echo "$$plan" > $@; fi

# the kernels' sources too: a checkout with new C code rebuilds the library it loads
$(STAMP): pyproject.toml constraints.txt setup.py $(wildcard decoding/kernels/*.c decoding/kernels/*.h) $(PLAN)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch pinned (2.13.0): a CUDA build named by its tag where a GPU is, since a CPU file offered
	# anywhere satisfies a bare pin; an unpinned one pulls whatever is newest
	$(BIN)/pip install --quiet -c constraints.txt $$(cat $(PLAN))
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

models: setup
	$(BIN)/specd models pull

run: models
	$(BIN)/specd start
	$(BIN)/specd complete --file examples/fib.py --at 5:1

test: models
	$(BIN)/python -m pytest -q -rs

test-fast: setup
	$(BIN)/python -m pytest -q -rs -m "not real"

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) *.egg-info
