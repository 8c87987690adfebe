#!/usr/bin/env bash
# One short GPU session for the RoPE kernels (a few minutes on an H100/H200):
#
#     bash benchmarks/gpu_check.sh [OUT_DIR]        # default: $OUT if set, else ./gpu_results
#
# 1. the RoPE tests on CUDA (float16/bfloat16 numerics included; Triton compiled, not interpreted)
# 2. a CUDA determinism check: repeated calls in two separate processes must hash bit-identically
# 3. benchmarks/bench_rope.py cuda: fwd and fwd+bwd time and % of peak HBM bandwidth vs the eager reference,
#    torch.compile of it, our PyTorch path and Liger-Kernel (if importable).
# Liger on a machine without network: beforehand run `pip download liger-kernel --no-deps -d .whl` and carry
# `.whl`; the wheel is pure Python and is unpacked onto PYTHONPATH here (nothing is installed).
# Everything lands in OUT_DIR: env.txt, pytest_rope.log/.xml, bench_rope_determinism_*.{json,md},
# bench_rope_cuda.{json,md}, summary.txt. Commit bench_rope_cuda.{json,md} under benchmarks/results/.
# Exit status: 0 when every step passed, else the number of failed steps.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-${OUT:-$REPO/gpu_results}}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
cd "$REPO"
unset TRITON_INTERPRET                      # real CUDA kernels, not the CPU interpreter
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
SUMMARY="$OUT_DIR/summary.txt"
: > "$SUMMARY"
FAILED=0

step() {  # step NAME TIMEOUT_S CMD...: run with a time limit, log, record PASS/FAIL
    local name="$1" limit="$2"; shift 2
    local t0=$SECONDS
    echo "=== $name (limit ${limit}s): $*" | tee -a "$OUT_DIR/steps.log"
    timeout --kill-after=10 "$limit" "$@" >> "$OUT_DIR/steps.log" 2>&1
    local rc=$?
    local verdict=PASS; [ $rc -ne 0 ] && { verdict="FAIL (exit $rc)"; FAILED=$((FAILED + 1)); }
    echo "$name: $verdict in $((SECONDS - t0))s" | tee -a "$SUMMARY"
    return 0
}

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    git rev-parse HEAD 2>/dev/null
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv 2>&1
    python -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'triton', triton.__version__, 'device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
} > "$OUT_DIR/env.txt" 2>&1
cat "$OUT_DIR/env.txt"
if ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "no CUDA device visible: nothing to check" | tee -a "$SUMMARY"
    exit 1
fi

LIGER_WHEEL="$(ls "$REPO"/.whl/liger_kernel-*.whl 2>/dev/null | tail -n 1)"
if [ -n "$LIGER_WHEEL" ]; then
    LIGER_DIR="$(mktemp -d)"
    python -m zipfile -e "$LIGER_WHEEL" "$LIGER_DIR" && export PYTHONPATH="$PYTHONPATH:$LIGER_DIR"
    echo "liger: $(basename "$LIGER_WHEEL") unpacked onto PYTHONPATH" | tee -a "$SUMMARY"
else
    echo "liger: no .whl/liger_kernel-*.whl (bench tries an installed liger_kernel)" | tee -a "$SUMMARY"
fi

# 1. kernel tests on CUDA
step "pytest tests/test_rope_*.py on CUDA" 300 \
    python -m pytest -q -p no:cacheprovider tests/test_rope_common.py tests/test_rope_numerics.py \
        tests/test_rope_layouts.py tests/test_rope_training.py \
        --junitxml "$OUT_DIR/pytest_rope.xml"
grep -E "passed|failed|error" "$OUT_DIR/steps.log" | tail -n 1 | tee -a "$SUMMARY"

# 2. determinism: two processes, each comparing 5 repeated calls; then across processes
step "determinism process A" 90 python benchmarks/bench_rope.py determinism --out "$OUT_DIR" --tag a
step "determinism process B" 90 python benchmarks/bench_rope.py determinism --out "$OUT_DIR" --tag b
step "determinism across processes" 30 python - "$OUT_DIR" <<'EOF'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/bench_rope_determinism_{t}.json"))["cases"] for t in "ab")
same = a == b and all(len(v) == 1 for v in a.values())
print("bitwise identical across processes:", same)
sys.exit(0 if same else 1)
EOF

# 3. benchmark
step "bench_rope.py cuda" 300 python benchmarks/bench_rope.py cuda --out "$OUT_DIR"

echo "failed steps: $FAILED" | tee -a "$SUMMARY"
exit "$FAILED"
