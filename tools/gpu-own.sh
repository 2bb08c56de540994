#!/usr/bin/env bash
# On the GPU machine, from the repository root: capture the readers' captures of "Profile your own
# attention" into docs/captures through the very command a reader runs: the worked example
# (snippets/window.py, three functions) and "A model's attention" (snippets/layer.py, a transformers
# Llama layer under three attn_implementations; needs transformers: pip install -e '.[layer]').
# WHAT=window or WHAT=layer takes one of them. Packs the new files as $OUT/own-captures.tgz with the log.
set -uo pipefail
out=${OUT:-/tmp/own-out}; mkdir -p "$out"
cd "$(dirname "$0")/.."
exec > >(tee -a "$out/gpu-own.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
what=${WHAT:-window layer}
declare -A functions=([window]="naive sdpa flex" [layer]="eager sdpa flex_attention")
for file in $what; do
  if [ "$file" = layer ] && ! python3 -c "import transformers; print('transformers', transformers.__version__)"; then
    echo "transformers is not installed: pip install -e '.[layer]' to take snippets/layer.py's captures"
    continue
  fi
  for fn in ${functions[$file]}; do
    echo "== $(date -u +%H:%M:%S) $file.py:$fn"
    set_dir=docs/captures/$(python3 -c "from attnprof.model import store; print(store.GPU)")  # this GPU's set
    python3 -m attnprof capture "snippets/$file.py:$fn" --out "$set_dir"
    echo "exit $?"
    tar czf "$out/own-captures.tgz" "$set_dir"/window.* "$set_dir"/layer.* 2>/dev/null  # after each: a timeout keeps what ran
  done
done
echo "== $(date -u +%H:%M:%S) done"
