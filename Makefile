# The two commands of the README:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test lint unit fuzz bench bench-site clean

# System packages (sshd for the test cluster), then a virtual environment with the package
# (editable), the test tools, and the optional extras the tests drive for real: Ray, torch
# (pinned: the CPU build), py-spy, pyarrow, the MCP SDK and DeepSpeed. The engine itself needs none
# of them.
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/system-packages.sh
	bash scripts/system-packages.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,ray,torch,stack,data,site,bench,mcp]'
	# DeepSpeed (the `deepspeed` extra; scenario batch_size_mismatch): its source build imports
	# the torch above, so no build isolation, and no compiled ops (DeepSpeed builds them on use).
	$(BIN)/pip install --quiet wheel
	DS_BUILD_OPS=0 $(BIN)/pip install --quiet --no-build-isolation 'deepspeed==0.19.8'
	touch $@

# Start real faulty training jobs from scenarios/, diagnose each with `runbook run`, clean up.
demo: setup
	$(BIN)/python -m scenarios.demo

# Everything CI runs: style, the runbook library's own lint and tests, then pytest.
test: setup lint unit

lint:
	$(BIN)/ruff check engine tests scenarios bench
	$(BIN)/runbook lint --strict
	$(BIN)/runbook test --coverage runbooks

# pytest exit 5 means "no tests ran": that is a failure, never a pass. Two workers (four where
# there are four cores or more), a test file each at a time (its module fixtures stay whole): most
# tests wait on processes and daemons, so two cores run the suite in about two thirds of the time.
# The slowest tests are listed at the end, to see where CI's time goes.
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); if [ $$n -ge 4 ]; then echo 4; else echo 2; fi)
unit:
	@$(BIN)/pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadfile --durations=15; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# The property tests of tests/fuzz with a hundred times more random examples (about half an hour);
# `make test` runs them with few, fixed ones. A failure prints the blob that replays it.
fuzz: setup
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -q -p no:cacheprovider tests/fuzz

# The quick run of every benchmark (start-up, the engine at 10,000 simulated nodes, SSH fan-out
# at 32 hosts, Ray at 4 nodes, a site of 100 + 100 pages, a library of 1,000 runbooks), then one
# table of figures and goals (about 15 minutes on 2 cores). bench/README.md has the full runs.
bench: setup
	$(BIN)/python bench/all.py

# The site build against MkDocs on 500 generated runbooks + 500 articles (about 10 minutes).
bench-site: setup
	$(BIN)/python bench/site/run.py

clean:
	rm -rf $(VENV) build *.egg-info engine/*.egg-info
