# The test tiers, one name each (the same commands the README and CI use).
.PHONY: fast test lint
fast:   ## the fast tier: every test under about a second on 2 cores (about 2 minutes there)
	python -m pytest -q -m "not slow"
test:   ## the full suite, as CI runs it (about 45 minutes on 2 cores)
	python -m pytest -q
lint:
	ruff check .
