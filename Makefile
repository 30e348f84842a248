# The two commands: `make demo` runs the platform's demo, `make test` runs every test.
# Everything else is here for day-to-day work. See README.md.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CHECKOV := .platform/checkov-venv

.PHONY: demo test install up down status logs lint unit clean

demo: install  ## start the platform, send traffic, print merged answers
	$(BIN)/python -m platformctl demo

# The parallel part; then the few tests that stop a shared service, alone; then the tests that
# bring up a cluster of their own, on two workers: the Spark standalone cluster's two tests
# on one, the Cassandra ring's and the Kafka brokers' on the other (alone, they left a core
# idle while nodes started or a kill was waited out). Two workers in the parallel part: one
# left a quarter of two cores idle while its tests waited (53 min -> 39 min for the
# parallel part). Three keep both cores busy and gain nothing (parallel part 28:22 against
# 27:37 with two; its tests' time 5,012 s against 3,269 s): more only pays with more cores
# (`make test TEST_WORKERS=4`). A part that selects none of the tests PYTEST_ARGS names ends
# with pytest's 5 (no tests ran): it had nothing to do; all three ending so is a failure.
TEST_WORKERS ?= 2
DURATIONS    := --durations=30 --durations-min=1
PYTEST_ARGS  ?=

test: install  ## every test, against the real local Kafka, Cassandra, Spark, Delta and Airflow
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not exclusive and not cluster" --keep-platform $(DURATIONS) $(PYTEST_ARGS); \
	  parallel=$$?; \
	  $(BIN)/python -m pytest -m exclusive --keep-platform $(DURATIONS) $(PYTEST_ARGS); \
	  alone=$$?; \
	  $(BIN)/python -m pytest -n 2 --dist loadgroup -m cluster $(DURATIONS) $(PYTEST_ARGS); \
	  clusters=$$?; \
	  if [ $$parallel$$alone$$clusters = 555 ]; then exit 5; fi; \
	  [ $$parallel -ne 5 ] || parallel=0; [ $$alone -ne 5 ] || alone=0; [ $$clusters -ne 5 ] || clusters=0; \
	  exit $$(( parallel ? parallel : alone ? alone : clusters ))

unit: install  ## only the tests that need no service (Spark runs in-process)
	$(BIN)/python -m pytest -n 2 --dist loadgroup -m "not integration"

install: $(STAMP) $(CHECKOV)/.installed  ## Python env, JVM jars from Maven Central, Airflow's own env (no-op when done)
	$(BIN)/python -m platformctl install

$(CHECKOV)/.installed: requirements/checkov.lock $(STAMP)  ## checkov's own env (infra/terraform tests)
	$(PYTHON) -m venv $(CHECKOV)
	$(BIN)/uv pip sync -q --compile-bytecode --python $(CHECKOV)/bin/python requirements/checkov.lock
	touch $@

$(STAMP): requirements/main.lock pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==0.13.9
	$(BIN)/uv pip sync -q --compile-bytecode --python $(BIN)/python requirements/main.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

up down status: $(STAMP)
	$(BIN)/python -m platformctl $@

logs: $(STAMP)
	$(BIN)/python -m platformctl logs

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean: ## stop services and delete all local state (jars, data, logs, venvs)
	-$(BIN)/python -m platformctl down
	rm -rf .platform $(VENV)
