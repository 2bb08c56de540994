#!/usr/bin/env bash
# On the GPU machine, from the repository root: put the split wheel together, install
# FlashAttention-4, `kernels` and their dependencies into /tmp/site, then take the fa4 captures and
# re-run the measurement runs that include it. Results go to this GPU's set under docs/captures/ (and, as a tarball,
# to $OUT when that is set).
#   tools/gpu-fa4.sh WHEELS_DIR [MORE_PART_DIRS...]   (WHEELS_DIR holds SHA256SUMS and the wheels)
#   RUNS=ceilings,fastest,verify,sweep tools/gpu-fa4.sh ...   (which runs, in this order)
#   SKIP_CAPTURES=1 tools/gpu-fa4.sh ...   (the runs only)
set -uo pipefail
wheels=$(realpath "${1:?usage: tools/gpu-fa4.sh WHEELS_DIR [MORE_PART_DIRS...]}"); shift
out=${OUT:-/tmp/fa4-out}; mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
log=$out/gpu-fa4.log
exec > >(tee -a "$log") 2>&1
step() { echo "== $(date -u +%H:%M:%S) $*"; }
pack() { (cd "$here" && tar czf "$out/captures.tgz" docs/captures); }  # after every step: a timeout keeps what ran

step "assemble the split wheel"
mkdir -p /tmp/fa4whl
name=$(awk '{print $2}' "$wheels/SHA256SUMS")
parts=$(for d in "$wheels" "$@"; do ls -d "$d"/cu13.part*; done | awk -F/ '{print $NF, $0}' | sort | cut -d' ' -f2)
echo "parts:" $parts
cat $parts > "/tmp/fa4whl/$name"
(cd /tmp/fa4whl && sha256sum -c "$wheels/SHA256SUMS") || { echo "the parts do not make the wheel"; exit 3; }

step "install into /tmp/site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  ${PIP_EXTRA:-} "/tmp/fa4whl/$name" "$wheels"/*.whl || exit 4
# pip --target leaves .pth files unread: add the folder nvidia_cutlass_dsl_packages.pth would add
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -n "${DRY_RUN:-}" ] && { echo "dry run: installed"; ls /tmp/site; exit 0; }
cd "$here"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import torch, flash_attn.cute, kernels; print('torch', torch.__version__, 'kernels', kernels.__version__)"

if [ -z "${SKIP_CAPTURES:-}" ]; then
step "captures"
python3 -m attnprof capture fa4; pack
python3 -m attnprof capture fa4 --shape 1,16,8192,128; pack

step "the post's hub call, and why it fails here"
python3 - <<'PY'
from huggingface_hub import HfApi
try:
    HfApi().get_organization_overview("kernels-community")
    print("hub reachable")
except Exception as e:
    print(f"the trust check's request: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
PY

step "FlashAttention-4's backward on this GPU"
python3 -m tools.fa4_backward
fi

for run in $(echo "${RUNS:-ceilings,fastest,verify,sweep}" | tr , ' '); do
  step "run $run"
  python3 -m attnprof sweep --only "$run"; pack
done
step done
