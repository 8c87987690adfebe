#!/usr/bin/env bash
# The GPU proof in one device session (<= 7 min on an H200); a thin wrapper around benchmarks/gpu_check.py:
#
#     bash benchmarks/gpu_check.sh [--out DIR] [--smoke] [--only STEP,...]
#
# Results (JSON + Markdown, device name, versions) land in DIR (default $OUT, else benchmarks/results) as they
# are measured; see the docstring of benchmarks/gpu_check.py for the steps and their time limits.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" && exec timeout --kill-after=10 450 python benchmarks/gpu_check.py "$@"
