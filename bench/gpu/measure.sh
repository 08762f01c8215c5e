#!/bin/bash
# The GPU measurements of docs/benchmarks/cuda.md, on a machine with an NVIDIA GPU and a build
# with the cuda executor: the executor's tests, `cotune calibrate --gpu`, PyTorch's fused attention
# as a reference (when python3 has torch), and a short study that measures each trial's kernels.
#   bench/gpu/measure.sh [BUILD_DIR (build)] [OUT_DIR (gpu-measurements)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd) || exit 2
out=${2:-gpu-measurements}
mkdir -p "$out" && out=$(cd "$out" && pwd)
export COTUNE_PLUGIN_PATH=$build/lib/cotune/plugins

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv || exit 1
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) base=h200 ;; *H100*) base=h100-sxm ;; *B200*) base=b200 ;; *A100*80GB*) base=a100-80gb ;; *A100*) base=a100-40gb ;;
  *) base=${COTUNE_BASE_GPU:?name the catalogue GPU in COTUNE_BASE_GPU} ;;
esac

echo "== the cuda executor's tests"
"$build/bin/test_cuda_plan_test" --gtest_brief=1 2>&1 | tail -2
"$build/bin/test_cuda_executor_test" 2>&1 | tee "$out/cuda_executor_test.txt" | tail -6

echo "== cotune calibrate --gpu --base $base"
"$build/bin/cotune" calibrate --gpu --base "$base" --out "$out/$base-calibrated.json" 2>&1 | tee "$out/calibrate.txt"

if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "== fused attention through PyTorch SDPA (reference)"
  OUT=$out python3 "$here/sdpa_reference.py" 989.5
fi

echo "== a study whose trials are measured on this GPU"
sed "s/\"gpu\": \"h200\"/\"gpu\": \"$base\"/" "$here/llama3-8b-8xh200-cuda.json" > "$out/study.json"
rm -f "$out/cuda-study.db"
"$build/bin/cotune" run "$out/study.json" --store "$out/cuda-study.db" 2>&1 | tail -12
"$build/bin/cotune" show llama3-8b-8xh200-cuda --store "$out/cuda-study.db" --json > "$out/cuda-study.json"
