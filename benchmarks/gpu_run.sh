#!/usr/bin/env bash
# The GPU session's checks in one lease of the device machine (docs/gpu.md): soundness campaigns
# on CUDA (rigorous, a posteriori, TF32 matmuls) in the background, gpu_checks.py in front.
# Usage: bash benchmarks/gpu_run.sh OUT_DIR CAMPAIGN_SECONDS CHECKS_BUDGET
set -u
out=${1:?out dir}; seconds=${2:-200}; budget=${3:-150}
export PYTHONPATH=$PWD FPCHECK_CACHE_DIR=/tmp/fpcheck-cache PYTHONUNBUFFERED=1
mkdir -p "$out/logs"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import pytest_fpcheck, numba, hypothesis, mpmath, ml_dtypes, transformers, triton, torch; print('imports ok', torch.__version__, triton.__version__, transformers.__version__)" || exit 1
campaign() { python3 benchmarks/soundness_campaign.py --device cuda --programs 1000000 --seconds "$seconds" "$@"; }
for s in 1 2 3 4; do campaign --seed "$s" > "$out/logs/rigorous$s.log" 2>&1 & done
for s in 5 6; do campaign --seed "$s" --mode a_posteriori > "$out/logs/a_posteriori$s.log" 2>&1 & done
for s in 7 8; do campaign --seed "$s" --matmul-precision high > "$out/logs/tf32_$s.log" 2>&1 & done
timeout $((seconds + 60)) python3 benchmarks/gpu_checks.py --out "$out/logs/checks.jsonl" \
  --triton-out "$out/triton.npz" --budget "$budget" > "$out/logs/checks.log" 2>&1
echo "checks exit $?"
wait
tar czf "$out/logs.tgz" -C "$out" logs
grep -h "^checked\|VIOLATION\|Error" "$out"/logs/*.log | cut -c1-300 | head -40
grep -v '"section": "zoo"' "$out/logs/checks.jsonl" | cut -c1-400
grep '"section": "zoo"' "$out/logs/checks.jsonl" | grep -c '"error"'
rm -rf "$out/logs"
