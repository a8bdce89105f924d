# `make run`: set up, fetch the built-in models, start the daemon, show a real completion through it.
# `make test`: the suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.specd-installed

.PHONY: run test setup models clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch pinned: it takes the CPU build on this machine's disk; an unpinned one pulls CUDA
	$(BIN)/pip install --quiet -c constraints.txt torch==2.13.0
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

clean:
	rm -rf $(VENV) *.egg-info
