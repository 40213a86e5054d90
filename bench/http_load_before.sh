#!/usr/bin/env bash
# Builds armhive-bench-http-serve from an older revision for bench/http_load.py --before:
#   bench/http_load_before.sh REV [DIR]    (prints the binary's path)
# PRESET=release builds it optimised (default dev), to compare with build/release's server.
# The older tree gets this tree's bench/http_serve.cc (it uses only HttpServer's stable
# surface) and the CMake lines that build it; DIR (default /tmp/armhive-http-before) is a git
# worktree, removed with `git worktree remove DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: http_load_before.sh REV [DIR]}
dir=${2:-/tmp/armhive-http-before}
[[ -d $dir ]] || git worktree add --detach "$dir" "$rev" >/dev/null
cp bench/http_serve.cc "$dir/bench/"
if ! grep -q armhive-bench-http-serve "$dir/bench/CMakeLists.txt"; then
  sed -n '/^# The API under load/,$p' bench/CMakeLists.txt >>"$dir/bench/CMakeLists.txt"
fi
cd "$dir"
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
preset=${PRESET:-dev}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j2 --target armhive-bench-http-serve >/dev/null
echo "$dir/build/$preset/bench/armhive-bench-http-serve"
