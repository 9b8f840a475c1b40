#!/usr/bin/env bash
# Runs the hostile-input corpus (tests/tools/hostile/, test cases tagged [hostile] in tests/tools/test_cli_hostile.cpp)
# against the `attnscope` command built with AddressSanitizer + UndefinedBehaviorSanitizer. Any sanitizer report
# fails the run: the sanitizers exit with codes 86 / 87 (never the command's own 1 or 2) and the test also rejects
# their messages on stderr. Prints the test's tally of inputs and command runs.
# Usage: scripts/sanitize.sh [CATCH_FILTER]     (default "[hostile]"; e.g. "[hostile],merge*" adds the merge tests)
# SANITIZER=valgrind runs the ordinary build's command under valgrind's memcheck instead (no second build: invalid
# reads and writes, uses of uninitialised values; not undefined behaviour), exit code 86 on an error.
# Environment: SANITIZE_BUILD_DIR (<repo>/build-sanitize), BUILD_DIR (<repo>/build: the ordinary build whose
# test_tools runs the cases), SANITIZE_JOBS (2), CXX (the compiler; GCC or Clang).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANITIZE_BUILD_DIR:-$root/build-sanitize}
tests_build=${BUILD_DIR:-$root/build}
filter=${1:-[hostile]}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"

if [ "${SANITIZER:-asan}" = valgrind ]; then
  command -v valgrind >/dev/null || { echo "sanitize.sh: valgrind not found" >&2; exit 1; }
  cmake --build "$tests_build" --target attnscope_cli test_tools -j"${SANITIZE_JOBS:-2}"
  wrapper=$tests_build/attnscope-valgrind.sh
  printf '#!/bin/sh\nexec valgrind -q --error-exitcode=86 --track-origins=yes %s "$@"\n' \
    "$tests_build/tools/attnscope" >"$wrapper"
  chmod +x "$wrapper"
  export ATTNSCOPE_CLI=$wrapper
  echo "sanitize.sh: running $tests_build/tests/test_tools \"$filter\" under valgrind" >&2
  "$tests_build/tests/test_tools" "$filter" 2>&1 | tee "$tests_build/valgrind.hostile.log" | tail -n 30
  status=${PIPESTATUS[0]}
  grep -h "hostile corpus:" "$tests_build/valgrind.hostile.log" || true
  exit "$status"
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DATTNSCOPE_BUILD_TOOLS=ON -DATTNSCOPE_BUILD_TESTS=OFF -DATTNSCOPE_BUILD_EXAMPLES=OFF -DATTNSCOPE_BUILD_PYTHON=OFF \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
cmake --build "$build" --target attnscope_cli -j"${SANITIZE_JOBS:-2}"
cmake --build "$tests_build" --target test_tools -j"${SANITIZE_JOBS:-2}"

export ATTNSCOPE_CLI=$build/tools/attnscope
export ASAN_OPTIONS=detect_leaks=1:exitcode=86:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87
echo "sanitize.sh: running $tests_build/tests/test_tools \"$filter\" against $ATTNSCOPE_CLI" >&2
"$tests_build/tests/test_tools" "$filter" 2>&1 | tee "$build.hostile.log" | tail -n 30
status=${PIPESTATUS[0]}
grep -h "hostile corpus:" "$build.hostile.log" || true
if grep -q -E "AddressSanitizer|LeakSanitizer|runtime error:" "$build.hostile.log"; then
  echo "sanitize.sh: sanitizer findings (see $build.hostile.log)" >&2
  exit 1
fi
exit "$status"
