#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang + ASan/UBSan and runs each for a bounded time from
# the committed seed corpus. Any crash, sanitizer report or leak fails; the input that did it is
# written to BUILD_DIR/crash-* (replay: BUILD_DIR/fuzz_TARGET BUILD_DIR/crash-...).
#   tests/fuzz/smoke.sh SOURCE_DIR BUILD_DIR [SECONDS_PER_TARGET]
set -euo pipefail
src=$1 out=$2 secs=${3:-15}
cmake -S "$src/tests/fuzz" -B "$out" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$out" -j2
for t in decode config keyfile kserve; do
  work="$out/corpus-$t"
  mkdir -p "$work"
  echo "== fuzz_$t for ${secs}s"
  "$out/fuzz_$t" -seed=1 -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$out/" "$work" "$src/tests/fuzz/corpus/$t" || {
    echo "fuzz_$t failed; the input is in $out/crash-* (or leak-*/timeout-*)"
    exit 1
  }
done
