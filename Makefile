# The test tiers, one name each (the same commands the README and CI use).
.PHONY: fast test lint
fast:   ## the fast tier (tests marked slow left out); its target and last measurement: docs/install.md
	python -m pytest -q -m "not slow"
test:   ## the full suite, as CI runs it (45:23 on 2 cores, 2026-12-07; docs/install.md)
	python -m pytest -q
lint:
	ruff check .
