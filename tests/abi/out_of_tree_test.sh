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
"$cli" plugins check "$work/plugin-template/build/libcotune-space-ddp.so"
lib=$(find "$work/c-plugin/build" -name 'libcotune-predictor-c-linear.so' -print -quit)
"$cli" plugins check "$lib"
echo "out-of-tree plugins built against $work/prefix and loaded"
