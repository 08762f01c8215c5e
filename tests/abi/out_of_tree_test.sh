#!/usr/bin/env bash
# Installs the SDK from the build tree into a temporary prefix, builds examples/plugin-template and
# examples/c-plugin against that prefix alone (no source tree include paths), and loads both with
# `cotune plugins check`.
set -euo pipefail
build=$1 src=$2 cli=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/cotune/cotune.h"
test -f "$work/prefix/lib/cmake/cotune/cotuneConfig.cmake"
# What the docs point at: local search, the support library, the changelog and the examples.
for f in include/cotune/local_search.hpp include/cotune/support/trial_files.hpp lib/libcotune_support.a \
         share/cotune/CHANGELOG.md share/cotune/examples/plugin-template/CMakeLists.txt \
         share/cotune/examples/c-plugin/linear_predictor.c; do
  test -f "$work/prefix/$f" || { echo "not installed: $f" >&2; exit 1; }
done
# cotune::support links from the installed package alone.
mkdir -p "$work/support-user"
cat > "$work/support-user/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(support_user CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(cotune REQUIRED)
add_executable(support_user main.cpp)
target_link_libraries(support_user PRIVATE cotune::support)
CMAKE
cat > "$work/support-user/main.cpp" <<'CPP'
#include <cotune/local_search.hpp>
#include <cotune/support/command_template.hpp>
#include <cotune/support/state_blob.hpp>
int main() {
  const std::string blob = cotune::support::wrap_state("x", 1, "payload");
  uint32_t version = 0;
  if (cotune::support::unwrap_state(blob, "x", 1, 1, &version) != "payload" || version != 1) return 1;
  const cotune::support::CommandTemplate t({"run", "--tp={tp}"}, "command");
  return t.expand({{"tp", "8"}}).at(1) == "--tp=8" ? 0 : 1;
}
CPP
cmake -S "$work/support-user" -B "$work/support-user/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
      > "$work/support-user.configure.log"
cmake --build "$work/support-user/build" > "$work/support-user.build.log"
"$work/support-user/build/support_user"
for example in plugin-template c-plugin; do
  cp -r "$src/examples/$example" "$work/$example"
  cmake -S "$work/$example" -B "$work/$example/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$work/$example.configure.log"
  cmake --build "$work/$example/build" > "$work/$example.build.log"
done
# Nothing but the SDK may have been on the include path.
if grep -rq -e "$src/core" -e "boost" -e "dlib" "$work/plugin-template/build/compile_commands.json" 2>/dev/null; then
  echo "the out-of-tree build saw host headers" >&2; exit 1
fi
out=$("$cli" plugins check "$work/plugin-template/build/libcotune-space-ddp.so")
echo "$out"
grep -q "table schema: 7 columns, 3 of them the configuration's" <<<"$out" || exit 1
grep -q "table_read of an empty row answered an error object: column global_batch: missing (required)" <<<"$out" || exit 1
# On a workload: its sampled configurations are valid and read back from their JSON.
echo '{"global_batch": 256, "params_billion": 1.3, "activation_gib_per_sample": 0.8, "gpu_memory_gib": 80}' > "$work/ddp-workload.json"
out=$("$cli" plugins check "$work/plugin-template/build/libcotune-space-ddp.so" --workload "$work/ddp-workload.json")
grep -q "every sampled configuration is valid and reads back from its JSON" <<<"$out" || { echo "$out" >&2; exit 1; }
lib=$(find "$work/c-plugin/build" -name 'libcotune-predictor-c-linear.so' -print -quit)
"$cli" plugins check "$lib"
# The template's table schema: its runs import, export and re-import through the same commands as
# the built-in spaces', and a predictor is evaluated on them.
export COTUNE_PLUGIN_PATH="$work/plugin-template/build"
cat > "$work/ddp-runs.csv" <<'CSV'
global_batch,params_billion,activation_gib_per_sample,gpu_memory_gib,gpus,micro_batch,checkpointing,step_time_s
256,1.3,0.8,80,8,4,false,1.00
256,1.3,0.8,80,8,8,true,1.10
256,1.3,0.8,80,4,8,false,1.90
256,1.3,0.8,80,2,16,true,4.20
256,1.3,0.8,80,1,32,true,8.50
256,1.3,0.8,80,4,4,false,2.00
256,1.3,0.8,80,2,8,false,3.90
256,1.3,0.8,80,8,2,false,1.05
256,1.3,0.8,80,3,4,false,9.99
CSV
out=$("$cli" import "$work/ddp-runs.csv" --space ddp --store "$work/ddp.db" 2>&1) && {
  echo "the row with 3 GPUs should have been rejected" >&2; exit 1; }
grep -q "8 imported, 0 already in the store, 1 rejected" <<<"$out" || { echo "$out" >&2; exit 1; }
grep -q "line 10: rejected: the ddp space cannot read the configuration" <<<"$out" || { echo "$out" >&2; exit 1; }
"$cli" export-history --space ddp --all --store "$work/ddp.db" -o "$work/ddp-export.csv" 2>"$work/export.log"
head -1 "$work/ddp-export.csv" | grep -q "^global_batch,params_billion,activation_gib_per_sample,gpu_memory_gib,gpus,micro_batch,checkpointing,status" ||
  { head -2 "$work/ddp-export.csv" >&2; exit 1; }
test "$(wc -l < "$work/ddp-export.csv")" -eq 9
out=$("$cli" import "$work/ddp-export.csv" --space ddp --store "$work/ddp.db")
grep -q "0 imported, 8 already in the store, 0 rejected" <<<"$out" || { echo "$out" >&2; exit 1; }
"$cli" predictor eval --space ddp --data "$work/ddp-export.csv" --target step_time_s --minimize --predictor krr \
  --prior none --repeats 2 --train-frac 0.5 > "$work/eval.txt"
grep -q "kendall_tau" "$work/eval.txt" || { cat "$work/eval.txt" >&2; exit 1; }
# It does not lower to step traces, so the performance model has nothing to time: said, not crashed.
if "$cli" simulate --batch "$work/ddp-runs.csv" --space ddp > "$work/sim.txt" 2>&1; then exit 1; fi
grep -q "does not lower configurations to step traces" "$work/sim.txt" || { cat "$work/sim.txt" >&2; exit 1; }
unset COTUNE_PLUGIN_PATH
# The bare-compiler recipe of docs/PLUGIN_GUIDE.md: the prefix and a compiler, no CMake.
P="$work/prefix"
cc -std=c99 -O2 -fPIC -fvisibility=hidden -I"$P/include" -shared -o "$work/libcotune-predictor-bare.so" \
   "$src/examples/c-plugin/linear_predictor.c" \
   -Wl,--version-script="$P/lib/cmake/cotune/cotune_plugin.map" -Wl,--no-undefined -Wl,--exclude-libs,ALL -lm
c++ -std=c++17 -O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -I"$P/include" -shared \
   -o "$work/libcotune-space-bare.so" "$src/examples/plugin-template/ddp_space.cpp" \
   -Wl,--version-script="$P/lib/cmake/cotune/cotune_plugin.map" -Wl,--no-undefined -Wl,--exclude-libs,ALL
"$cli" plugins check "$work/libcotune-predictor-bare.so"
"$cli" plugins check "$work/libcotune-space-bare.so"
echo "out-of-tree plugins built against $work/prefix and loaded"
