#!/bin/bash
# pp_hash.sh [REPO]: one hash of what nvcc's front end sees of the library's
# translation units (cuda/fzgpu.cu, cuda/ipc.cu), for checking on a machine
# without nvcc that a change to cuda/ is a pure move of code between files
# (or a change of comments): run it before and after; equal hashes mean the
# same tokens in the same order. g++ preprocesses each unit three times
# (host, __CUDA_ARCH__ 800 and 900) with cuda_runtime.h stubbed; comments,
# line markers, blank lines and runs of whitespace are dropped.
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
touch "$stub/cuda_runtime.h"
cd "$repo/cuda"
for arch in none 800 900; do
  D=()
  [ "$arch" != none ] && D=(-D__CUDA_ARCH__=$arch)
  for tu in fzgpu.cu ipc.cu; do
    g++ -E -P -x c++ -std=c++17 -I"$stub" -D__CUDACC__ "${D[@]}" "$tu" |
      sed -e 's/[[:space:]]\+/ /g' -e 's/^ //' -e 's/ $//' | grep -v '^$'
  done
done | md5sum | cut -d' ' -f1
