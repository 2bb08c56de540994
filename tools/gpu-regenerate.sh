#!/usr/bin/env bash
# Regenerate the site's records on a GPU machine without a package index (the wheels:
# tools/fa4-wheels.sh, and `pip download` of the docs extra for the build). From the repository root:
#   tools/gpu-regenerate.sh [all [DIR...]]   the default, in ONE call: install the providers from the
#                                            wheels in DIR (its SHA256SUMS; more part folders after), or from /tmp/fa4a where
#                                            an earlier `stage` kept them, then `regenerate --all` (every
#                                            record but the two-GPU ones), timed; its log is $OUT/regenerate.log
# Over several calls of a remote runner that keeps /tmp while the machine stays up:
#   tools/gpu-regenerate.sh stage DIR        keep DIR (part of the split wheel, the small wheels) in /tmp/fa4a
#   tools/gpu-regenerate.sh install DIR      join the wheel's parts, install the providers into /tmp/site
#   tools/gpu-regenerate.sh docs DIR         install the documentation stack (wheels in DIR) into /tmp/docsite
#   tools/gpu-regenerate.sh restore          put back what earlier calls regenerated (kept in /tmp/regen)
#   tools/gpu-regenerate.sh regenerate ARGS  python -m attnprof regenerate ARGS, timed; keeps the result
#   tools/gpu-regenerate.sh build            mkdocs build --strict (the hook retakes what is stale), timed
#   tools/gpu-regenerate.sh zensical         regenerate, then zensical build --clean --strict (no hook), timed
# Each step tars docs/captures (every set; this GPU's is docs/captures/<its short name>) into $OUT.
set -uo pipefail
out=${OUT:-/tmp/regen-out}; mkdir -p "$out" /tmp/regen
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:/tmp/docsite PYTHONUNBUFFERED=1
export JUPYTER_PATH=/tmp/docsite/share/jupyter  # nbconvert's templates, where pip --target puts them
keep() { cp -r docs/captures/. /tmp/regen/; tar czf "$out/captures.tgz" docs/captures; }
case "${1:-}" in
  stage) mkdir -p /tmp/fa4a && cp "$2"/* /tmp/fa4a/ && ls /tmp/fa4a ;;
  install) DRY_RUN=1 tools/gpu-fa4.sh /tmp/fa4a "$2" ;;
  docs) python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/docsite "$2"/*.whl ;;
  restore) cp -r /tmp/regen/. docs/captures/ 2>/dev/null; true ;;
  regenerate) shift; start=$(date +%s)
    python3 -m attnprof regenerate "$@" 2>&1 | tee -a "$out/regenerate.log"
    echo "regenerate $*: $(( $(date +%s) - start )) s of wall time" | tee -a "$out/regenerate.log"; keep ;;
  build) start=$(date +%s)
    ATTNPROF_RECAPTURE=auto python3 -m mkdocs build --strict -d /tmp/site-build 2>&1 | tee -a "$out/build.log"
    echo "mkdocs build --strict: exit ${PIPESTATUS[0]}, $(( $(date +%s) - start )) s of wall time" | tee -a "$out/build.log"
    keep ;;
  zensical) start=$(date +%s)
    python3 -m attnprof regenerate 2>&1 | tee -a "$out/regenerate.log"
    status=${PIPESTATUS[0]}
    [ "$status" = 0 ] && { python3 -m zensical build --clean --strict 2>&1 | tee -a "$out/build.log"; status=${PIPESTATUS[0]}; }
    echo "regenerate && zensical build --clean --strict: exit $status, $(( $(date +%s) - start )) s of wall time" | tee -a "$out/build.log"
    keep; exit "$status" ;;
  ""|all) shift || true; start=$(date +%s)
    # cold caches, as a reader's first run has them: an earlier call's compiled kernels would speed this one's first calls
    rm -rf "${TMPDIR:-/tmp}/attnprof-flash-attn4-cache" "${TMPDIR:-/tmp}"/torchinductor_* ~/.triton
    dirs=("$@"); [ ${#dirs[@]} -gt 0 ] || dirs=(/tmp/fa4a)
    if [ -n "${SKIP_INSTALL:-}" ]; then echo "providers: not installed (SKIP_INSTALL)" | tee -a "$out/regenerate.log"
    else DRY_RUN=1 tools/gpu-fa4.sh "${dirs[@]}" 2>&1 | tail -3 | tee -a "$out/regenerate.log"
      echo "providers installed: $(( $(date +%s) - start )) s" | tee -a "$out/regenerate.log"; fi
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$out/regenerate.log"
    # SIGTERM before the call's 10-minute limit (installing included): regenerate then stops its workers,
    # so none outlives the call, and every record written before stays written
    left=$(( ${REGEN_BUDGET_S:-575} - ($(date +%s) - start) ))
    timeout -s TERM "$left" python3 -m attnprof regenerate --all 2>&1 | tee -a "$out/regenerate.log"
    status=${PIPESTATUS[0]}
    echo "regenerate --all: exit $status, $(( $(date +%s) - start )) s of wall time, installing included" \
      | tee -a "$out/regenerate.log"
    # the workers' logs, kept where anything failed or hung (the stacks a stopped process wrote)
    for d in "${TMPDIR:-/tmp}"/attnprof-regenerate-*; do [ -d "$d" ] && tar czf "$out/$(basename "$d").tgz" --exclude="*-caches" -C "$(dirname "$d")" "$(basename "$d")"; done
    keep; exit "$status" ;;
  *) echo "usage: tools/gpu-regenerate.sh [all [DIR...]]|stage|install|docs|restore|regenerate|build|zensical ..." >&2; exit 2 ;;
esac
