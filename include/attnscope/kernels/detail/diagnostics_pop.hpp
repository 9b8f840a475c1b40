// attnscope/kernels/detail/diagnostics_pop.hpp — restores the warnings silenced by diagnostics_push.hpp (no include
// guard).
// NOLINT(llvm-header-guard)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
