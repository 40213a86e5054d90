#!/usr/bin/env bash
# scripts/check-naming skips files whose key is in its cache; this proves the cache never hides
# a finding. In a scratch repository (this checkout's check-naming and .clang-tidy, a .cc that
# includes a header that includes another, and a .cc on its own) with its own cache directory:
# a bad name in the innermost header, or in a .cc, fails with a warm cache, again on the next
# run, and only the files that changed are parsed.
#   tests/scripts/check_naming_cache_test.sh SOURCE_DIR
set -euo pipefail
src=$(realpath "${1:?usage: check_naming_cache_test.sh SOURCE_DIR}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
repo=$tmp/repo
mkdir -p "$repo/scripts" "$repo/base" "$repo/build"
cp "$src/scripts/check-naming" "$repo/scripts/"
cp "$src/.clang-tidy" "$repo/"
export ARMHIVE_LINT_CACHE=$tmp/cache

good_inner='#pragma once
namespace armhive {
inline int inner_value() { return 1; }
}  // namespace armhive'
echo "$good_inner" >"$repo/base/inner.h"
cat >"$repo/base/outer.h" <<'SRC'
#pragma once
#include "base/inner.h"
namespace armhive {
int outer_value();
}  // namespace armhive
SRC
cat >"$repo/base/outer.cc" <<'SRC'
#include "base/outer.h"
namespace armhive {
int outer_value() { return inner_value() + 1; }
}  // namespace armhive
SRC
good_other='namespace armhive {
int other_value() { return 2; }
}  // namespace armhive'
echo "$good_other" >"$repo/base/other.cc"
python3 - "$repo" <<'PY'
import json, sys
repo = sys.argv[1]
json.dump([{"directory": repo + "/build", "file": f"{repo}/base/{name}.cc",
            "command": f"c++ -I{repo} -std=c++20 -o {name}.o -c {repo}/base/{name}.cc"}
           for name in ("outer", "other")], open(repo + "/build/compile_commands.json", "w"))
PY
git -C "$repo" init -q
git -C "$repo" add -A

failures=0
# expect STATUS PATTERN...: runs check-naming; its exit status must be STATUS and a line of its
# output must match each PATTERN.
expect() {
  local want=$1 rc=0 out pattern ok=1
  shift
  out=$("$repo/scripts/check-naming" "$repo/build" 2>&1) || rc=$?
  [[ $rc -eq $want ]] || ok=0
  for pattern in "$@"; do
    grep -qE "$pattern" <<<"$out" || ok=0
  done
  if [[ $ok -eq 0 ]]; then
    echo "FAIL (step $step): wanted exit $want and lines matching: $*; got exit $rc:" >&2
    echo "$out" >&2
    failures=$((failures + 1))
  else
    echo "ok (step $step): exit $rc"
  fi
}

step="cold cache"; expect 0 'checked 2 of 2 files'
[[ $(find "$ARMHIVE_LINT_CACHE" -type f | wc -l) -eq 2 ]] || { echo "FAIL: want 2 keys" >&2; failures=$((failures + 1)); }
step="warm cache"; expect 0 'checked 0 of 2 files'
sed -i 's/inner_value()/InnerValue()/' "$repo/base/inner.h" "$repo/base/outer.cc"
step="bad name in a header two includes deep"; expect 1 'InnerValue.*readability-identifier-naming' \
  'checked 1 of 2 files'
step="still bad (a failing file left no key)"; expect 1 'InnerValue.*readability-identifier-naming' 'checked 1 of 2 files'
echo "$good_inner" >"$repo/base/inner.h"
sed -i 's/InnerValue()/inner_value()/' "$repo/base/outer.cc"
step="mended: the old key counts again"; expect 0 'checked 0 of 2 files'
sed -i 's/other_value/OtherValue/' "$repo/base/other.cc"
step="bad name in a .cc"; expect 1 'OtherValue.*readability-identifier-naming'
echo "$good_other" >"$repo/base/other.cc"
echo '// a comment' >>"$repo/.clang-tidy"
step="changed .clang-tidy: everything again"; expect 0 'checked 2 of 2 files'

if [[ $failures -gt 0 ]]; then
  echo "$failures step(s) failed" >&2
  exit 1
fi
echo "check-naming's cache: every step as expected"
