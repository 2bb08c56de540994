#!/usr/bin/env bash
# On the GPU machine, from the repository root: capture the worked example of "Profile your own
# attention" (snippets/window.py, three functions) into docs/captures through the very command a
# reader runs, and pack the new files as $OUT/own-captures.tgz with the log.
set -uo pipefail
out=${OUT:-/tmp/own-out}; mkdir -p "$out"
cd "$(dirname "$0")/.."
exec > >(tee -a "$out/gpu-own.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
for fn in naive sdpa flex; do
  echo "== $(date -u +%H:%M:%S) window.py:$fn"
  python3 -m attnprof capture "snippets/window.py:$fn" --out docs/captures
  echo "exit $?"
  tar czf "$out/own-captures.tgz" docs/captures/window.*  # after each: a timeout keeps what ran
done
echo "== $(date -u +%H:%M:%S) done"
