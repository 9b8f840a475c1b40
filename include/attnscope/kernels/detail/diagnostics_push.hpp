// attnscope/kernels/detail/diagnostics_push.hpp — silences two harmless GCC warnings inside the kernel headers
// (paired with diagnostics_pop.hpp; no include guard on purpose):
//  - -Wignored-attributes: Eigen packets are vector types with alignment attributes; using them as template
//    arguments (Accumulator<P>) drops the attributes, which is harmless (Eigen disables the same warning);
//  - -W(maybe-)uninitialized: GCC 12 false positive on the AVX-512 intrinsics' _mm512_undefined_* (GCC bug 105593).
// NOLINT(llvm-header-guard)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
