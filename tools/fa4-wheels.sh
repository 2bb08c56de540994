#!/usr/bin/env bash
# On a machine with pip and the network: fetch FlashAttention-4's wheels (and `kernels`) for a
# python 3.12 x86-64 GPU machine into DIR, and split the one large wheel into parts of at most
# PART bytes, for transfers that have a size limit. tools/gpu-fa4.sh puts them back together.
#   tools/fa4-wheels.sh DIR [PART]
set -euo pipefail
dir=${1:?usage: tools/fa4-wheels.sh DIR [PART_BYTES]}; part=${2:-50000000}
mkdir -p "$dir"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$dir" \
  flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
  nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 quack-kernels==0.6.5 \
  apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5 einops==0.8.2 cuda-pathfinder==1.9.1 kernels==0.17.2 \
  sageattention==1.0.6  # not a dependency: the sweep puts SageAttention beside FlashAttention-4
cd "$dir"
big=$(ls nvidia_cutlass_dsl_libs_cu13-*.whl)
sha256sum "$big" > SHA256SUMS
split -b "$part" -d "$big" cu13.part && rm "$big"
ls -l
