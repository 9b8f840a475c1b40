# Checks that no public header makes a generic x86-64 build (no -march) parse <immintrin.h>: it declares every x86
# extension and costs more to parse than <Eigen/Core> adds (docs/design.md, run-time dispatch). The run-time dispatched
# kernels use the vector types of kernels/detail/simd_x86.hpp instead. The one allowed include is inside
# `#if defined(__AVX__)` in kernels/stream_store.hpp, where Eigen's own packets have already included it.
# Run by ctest as `cmake -DINCLUDE_DIR=<repo>/include/attnscope -P check_intrinsic_headers.cmake`.
cmake_minimum_required(VERSION 3.16)
set(allowed "kernels/stream_store.hpp")
set(violations "")
file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/*.hpp)
foreach(header IN LISTS headers)
  file(STRINGS ${INCLUDE_DIR}/${header} lines REGEX "^[ \t]*#[ \t]*include[ \t]*<(immintrin|x86intrin|[a-z0-9]+intrin)\\.h>")
  if(lines AND NOT header IN_LIST allowed)
    list(APPEND violations "${header}: ${lines}")
  endif()
endforeach()
if(violations)
  list(JOIN violations "\n  " message)
  message(FATAL_ERROR "headers that include x86 intrinsic headers (use kernels/detail/simd_x86.hpp):\n  ${message}")
endif()
list(LENGTH headers count)
message(STATUS "no x86 intrinsic header in ${count} headers (allowed: ${allowed})")
