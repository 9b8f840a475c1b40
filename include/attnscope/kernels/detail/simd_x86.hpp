// attnscope/kernels/detail/simd_x86.hpp — the x86 vector types and the few instructions the run-time dispatched
// kernels use (kernels/runtime_dispatch.hpp, kernels/detail/gemm_micro.hpp, kernels/detail/dequantize_avx2.hpp),
// written with the compiler's vector extensions and builtins instead of <immintrin.h>.
//
// Why: a translation unit compiled for plain x86-64 (no -mavx2) still runs these kernels on an AVX2 or AVX-512 CPU,
// through functions marked __attribute__((target(...))). With intrinsics that needs <immintrin.h>, which declares
// every x86 extension there is (AVX-512 FP16, AMX, …) and costs more to parse than <Eigen/Core> itself adds to it
// (docs/performance.md, header costs). GCC and Clang compile the vector extensions to the same instructions: + − ×
// ÷, comparisons, shifts and bitwise operations on the types below are the lane-wise IEEE / integer operations, and
// the few instructions with no operator (fused multiply-add, max, movemask, non-temporal stores, half-precision
// conversion) come from builtins that both compilers name alike, the ones their own intrinsic headers call.
//
// Rules the kernels follow with these types, so that they give the bits the intrinsic code gave:
// - one product per expression when a sum follows it (Clang fuses a·b + c written in one expression; GCC with
//   -ffp-contract=fast fuses across statements too, exactly as it did through its intrinsics, which are the same
//   vector operations) — use fma() where the fusion is wanted and pin() (dequantize_avx2.hpp) where it must not be;
// - lane-wise max through lanewise_max() (maxps: the second operand where either is NaN), not a ? : on a comparison.
//
#pragma once

#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ATTNSCOPE_SIMD_X86 1
#endif

#if defined(ATTNSCOPE_SIMD_X86)
// Which x86 builtins Clang has (its __has_builtin answers for them; GCC's does not outside a function targeting the
// extension, and GCC has kept these names since they first appeared): newer Clang versions moved some of its
// intrinsic headers to generic builtins.
#if defined(__clang__) && defined(__has_builtin)
#define ATTNSCOPE_SIMD_CLANG_HAS(name) __has_builtin(name)
#else
#define ATTNSCOPE_SIMD_CLANG_HAS(name) 0
#endif

namespace attnscope::kernels::detail::x86 {

// Vector types: lane type × lane count. The *_unaligned types read and write memory of any alignment and any type
// (may_alias), as _mm256_loadu_ps does.
typedef float f32x2 __attribute__((vector_size(8)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x16 __attribute__((vector_size(64)));
typedef std::int32_t i32x8 __attribute__((vector_size(32)));
typedef std::uint32_t u32x8 __attribute__((vector_size(32)));
typedef std::int16_t i16x8 __attribute__((vector_size(16)));
typedef std::uint16_t u16x8 __attribute__((vector_size(16)));
typedef std::uint16_t u16x16 __attribute__((vector_size(32)));
typedef char c8x16 __attribute__((vector_size(16)));  // GCC's own byte vector type, for its builtins
typedef signed char i8x8 __attribute__((vector_size(8)));
typedef unsigned char u8x8 __attribute__((vector_size(8)));
typedef signed char i8x16 __attribute__((vector_size(16)));
typedef unsigned char u8x16 __attribute__((vector_size(16)));
typedef unsigned char u8x32 __attribute__((vector_size(32)));

typedef float f32x8_aliased __attribute__((vector_size(32), may_alias));  // 32-byte aligned memory of any type
typedef float f32x2_unaligned __attribute__((vector_size(8), aligned(1), may_alias));
typedef float f32x4_unaligned __attribute__((vector_size(16), aligned(1), may_alias));
typedef float f32x8_unaligned __attribute__((vector_size(32), aligned(1), may_alias));
typedef float f32x16_unaligned __attribute__((vector_size(64), aligned(1), may_alias));
typedef std::uint16_t u16x8_unaligned __attribute__((vector_size(16), aligned(1), may_alias));
typedef unsigned char u8x16_unaligned __attribute__((vector_size(16), aligned(1), may_alias));
typedef unsigned char u8x32_unaligned __attribute__((vector_size(32), aligned(1), may_alias));

// Each helper carries the smallest target that holds its instructions, so that it inlines into every kernel whose
// target includes that one (AVX2 + FMA, AVX2 + F16C, AVX-512F).
#define ATTNSCOPE_SIMD_AVX __attribute__((target("avx"), always_inline)) inline
#define ATTNSCOPE_SIMD_AVX2 __attribute__((target("avx2"), always_inline)) inline
#define ATTNSCOPE_SIMD_FMA __attribute__((target("fma"), always_inline)) inline
#define ATTNSCOPE_SIMD_F16C __attribute__((target("f16c"), always_inline)) inline
#define ATTNSCOPE_SIMD_AVX512 __attribute__((target("avx512f"), always_inline)) inline

/// Lane-wise reinterpretation of a vector's bits as another vector type of the same size.
template <class To, class From>
ATTNSCOPE_SIMD_AVX To bits_as(From value) {
  static_assert(sizeof(To) == sizeof(From), "bits_as: vectors of different sizes");
  return (To)value;
}

// ---- loads, stores, broadcasts

/// Eight floats from `from` (any alignment).
ATTNSCOPE_SIMD_AVX f32x8 load8(const float* from) { return *reinterpret_cast<const f32x8_unaligned*>(from); }
/// Eight floats from `from`, which must be 32-byte aligned.
ATTNSCOPE_SIMD_AVX f32x8 load8_aligned(const float* from) { return *reinterpret_cast<const f32x8_aliased*>(from); }
/// Stores eight floats to `to` (any alignment).
ATTNSCOPE_SIMD_AVX void store8(float* to, f32x8 value) { *reinterpret_cast<f32x8_unaligned*>(to) = value; }
/// Stores eight floats to `to`, which must be 32-byte aligned.
ATTNSCOPE_SIMD_AVX void store8_aligned(float* to, f32x8 value) { *reinterpret_cast<f32x8_aliased*>(to) = value; }
/// Stores the first four lanes of `value` to `to` (any alignment).
ATTNSCOPE_SIMD_AVX void store4(float* to, f32x8 value) {
  *reinterpret_cast<f32x4_unaligned*>(to) = f32x4{value[0], value[1], value[2], value[3]};
}
/// Stores lanes 4 and 5 of `value` to to[0], to[1] (any alignment).
ATTNSCOPE_SIMD_AVX void store_lanes_4_5(float* to, f32x8 value) {
  *reinterpret_cast<f32x2_unaligned*>(to) = f32x2{value[4], value[5]};
}
/// `value` in all eight lanes.
ATTNSCOPE_SIMD_AVX f32x8 broadcast8(float value) {
  return f32x8{value, value, value, value, value, value, value, value};
}
/// The 32 bytes from `from` (any alignment).
ATTNSCOPE_SIMD_AVX u8x32 load_bytes32(const unsigned char* from) {
  return *reinterpret_cast<const u8x32_unaligned*>(from);
}
/// The 16 bytes from `from` (any alignment).
ATTNSCOPE_SIMD_AVX u8x16 load_bytes16(const unsigned char* from) {
  return *reinterpret_cast<const u8x16_unaligned*>(from);
}
/// Non-temporal store of eight floats to `to`, which must be 32-byte aligned (vmovntps; the caller fences).
ATTNSCOPE_SIMD_AVX void stream8(float* to, f32x8 value) {
#if defined(__clang__)
  __builtin_nontemporal_store(value, reinterpret_cast<f32x8_aliased*>(to));
#else
  __builtin_ia32_movntps256(to, value);
#endif
}

/// Asks the cache for the line holding `address` (prefetcht0).
ATTNSCOPE_SIMD_AVX void prefetch_line(const void* address) { __builtin_prefetch(address, 0, 3); }

// ---- arithmetic without an operator

/// a·b + c with one rounding (vfmadd).
ATTNSCOPE_SIMD_FMA f32x8 fma(f32x8 a, f32x8 b, f32x8 c) {
#if defined(__clang__) && !ATTNSCOPE_SIMD_CLANG_HAS(__builtin_ia32_vfmaddps256)
  return __builtin_elementwise_fma(a, b, c);
#else
  return __builtin_ia32_vfmaddps256(a, b, c);
#endif
}
/// Lane-wise maximum, as maxps: b where a or b is NaN, and b where both are zeros of either sign.
ATTNSCOPE_SIMD_AVX f32x8 lanewise_max(f32x8 a, f32x8 b) { return __builtin_ia32_maxps256(a, b); }
/// A bit per lane: bit i set where lane i of `mask` has its sign bit set (vmovmskps).
ATTNSCOPE_SIMD_AVX int movemask(i32x8 mask) { return __builtin_ia32_movmskps256(bits_as<f32x8>(mask)); }

/// The sum of the eight lanes, in the order ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
ATTNSCOPE_SIMD_AVX float sum_lanes(f32x8 v) {
  const f32x4 half = f32x4{v[0], v[1], v[2], v[3]} + f32x4{v[4], v[5], v[6], v[7]};
  return (half[0] + half[2]) + (half[1] + half[3]);
}
/// The largest of the eight lanes (finite lanes), reduced in the order of sum_lanes.
ATTNSCOPE_SIMD_AVX float max_lanes(f32x8 v) {
  const f32x4 lower{v[0], v[1], v[2], v[3]}, upper{v[4], v[5], v[6], v[7]};
  const f32x4 half = __builtin_ia32_maxps(lower, upper);
  // as maxps / maxss: the first operand where it is larger, else the second
  const float even = half[0] > half[2] ? half[0] : half[2], odd = half[1] > half[3] ? half[1] : half[3];
  return even > odd ? even : odd;
}

// ---- lane permutations (the 8 × 8 transpose of the GEMM's packing)

#if defined(__clang__)
#define ATTNSCOPE_SIMD_SHUFFLE(type, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define ATTNSCOPE_SIMD_SHUFFLE(type, a, b, ...) __builtin_shuffle(a, b, type{__VA_ARGS__})
#endif

/// Per 128-bit half, the low two lanes of a and b interleaved: a0 b0 a1 b1 | a4 b4 a5 b5 (vunpcklps).
ATTNSCOPE_SIMD_AVX f32x8 unpack_low(f32x8 a, f32x8 b) { return ATTNSCOPE_SIMD_SHUFFLE(i32x8, a, b, 0, 8, 1, 9, 4, 12, 5, 13); }
/// Per 128-bit half, the high two lanes of a and b interleaved: a2 b2 a3 b3 | a6 b6 a7 b7 (vunpckhps).
ATTNSCOPE_SIMD_AVX f32x8 unpack_high(f32x8 a, f32x8 b) {
  return ATTNSCOPE_SIMD_SHUFFLE(i32x8, a, b, 2, 10, 3, 11, 6, 14, 7, 15);
}
/// Per 128-bit half, lanes 0–1 of a then lanes 0–1 of b: a0 a1 b0 b1 | a4 a5 b4 b5 (vshufps 0x44).
ATTNSCOPE_SIMD_AVX f32x8 pairs_low(f32x8 a, f32x8 b) { return ATTNSCOPE_SIMD_SHUFFLE(i32x8, a, b, 0, 1, 8, 9, 4, 5, 12, 13); }
/// Per 128-bit half, lanes 2–3 of a then lanes 2–3 of b: a2 a3 b2 b3 | a6 a7 b6 b7 (vshufps 0xEE).
ATTNSCOPE_SIMD_AVX f32x8 pairs_high(f32x8 a, f32x8 b) {
  return ATTNSCOPE_SIMD_SHUFFLE(i32x8, a, b, 2, 3, 10, 11, 6, 7, 14, 15);
}
/// The low 128-bit halves of a and b: a0 … a3 b0 … b3 (vperm2f128 0x20).
ATTNSCOPE_SIMD_AVX f32x8 halves_low(f32x8 a, f32x8 b) { return ATTNSCOPE_SIMD_SHUFFLE(i32x8, a, b, 0, 1, 2, 3, 8, 9, 10, 11); }
/// The high 128-bit halves of a and b: a4 … a7 b4 … b7 (vperm2f128 0x31).
ATTNSCOPE_SIMD_AVX f32x8 halves_high(f32x8 a, f32x8 b) {
  return ATTNSCOPE_SIMD_SHUFFLE(i32x8, a, b, 4, 5, 6, 7, 12, 13, 14, 15);
}

#undef ATTNSCOPE_SIMD_SHUFFLE

// ---- byte and 16-bit lanes (the dequantizers)
//
// Extracting or joining 128-bit halves and widening bytes to 32-bit lanes: with Clang and GCC ≥ 12 through
// __builtin_shufflevector (which may change the lane count), otherwise through memory (correct, slower). GCC 12 turns
// __builtin_convertvector into two 128-bit widenings and a lane insert, so with GCC the widenings are its vpmovzx /
// vpmovsx builtins.
#if defined(__clang__) || __GNUC__ >= 12
#define ATTNSCOPE_SIMD_SHUFFLEVECTOR 1
#endif

/// Bytes [16·Half, 16·Half + 16) of `bytes`.
template <int Half>
ATTNSCOPE_SIMD_AVX2 u8x16 half_of(u8x32 bytes) {
  static_assert(Half == 0 || Half == 1, "half_of: half 0 or 1");
#if defined(ATTNSCOPE_SIMD_SHUFFLEVECTOR)
  constexpr int o = 16 * Half;
  return __builtin_shufflevector(bytes, bytes, o, o + 1, o + 2, o + 3, o + 4, o + 5, o + 6, o + 7, o + 8, o + 9, o + 10,
                                 o + 11, o + 12, o + 13, o + 14, o + 15);
#else
  u8x16 out;
  __builtin_memcpy(&out, reinterpret_cast<const unsigned char*>(&bytes) + 16 * Half, 16);
  return out;
#endif
}

/// The 32 bytes `low` (bytes 0–15) then `high` (16–31).
ATTNSCOPE_SIMD_AVX2 u8x32 join(u8x16 low, u8x16 high) {
#if defined(ATTNSCOPE_SIMD_SHUFFLEVECTOR)
  return __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
#else
  u8x32 out;
  __builtin_memcpy(reinterpret_cast<unsigned char*>(&out), &low, 16);
  __builtin_memcpy(reinterpret_cast<unsigned char*>(&out) + 16, &high, 16);
  return out;
#endif
}

/// Bytes [8·Part, 8·Part + 8) of `bytes` as eight 32-bit integers: as int8 when Signed, else as uint8 (vpmovsxbd /
/// vpmovzxbd).
template <bool Signed, int Part>
ATTNSCOPE_SIMD_AVX2 i32x8 widen_bytes(u8x16 bytes) {
  static_assert(Part == 0 || Part == 1, "widen_bytes: part 0 or 1");
#if defined(ATTNSCOPE_SIMD_SHUFFLEVECTOR)
  constexpr int o = 8 * Part;
  const u8x16 moved = __builtin_shufflevector(bytes, bytes, o, o + 1, o + 2, o + 3, o + 4, o + 5, o + 6, o + 7, 8 - o,
                                              9 - o, 10 - o, 11 - o, 12 - o, 13 - o, 14 - o, 15 - o);
#else
  u8x16 moved = bytes;
  if (Part == 1) __builtin_memcpy(&moved, reinterpret_cast<const unsigned char*>(&bytes) + 8, 8);
#endif
#if defined(__clang__)
  const u8x8 low = __builtin_shufflevector(moved, moved, 0, 1, 2, 3, 4, 5, 6, 7);
  if constexpr (Signed) return __builtin_convertvector((i8x8)low, i32x8);
  else return __builtin_convertvector(low, i32x8);
#else
  if constexpr (Signed) return (i32x8)__builtin_ia32_pmovsxbd256((c8x16)moved);
  else return (i32x8)__builtin_ia32_pmovzxbd256((c8x16)moved);
#endif
}

/// Byte i of the result is byte i / 8 of the 32-bit word that each 128-bit half of `words` holds in its bytes 0–3
/// (a permutation within halves: vpshufb).
ATTNSCOPE_SIMD_AVX2 u8x32 spread_word_bytes(u8x32 words) {
#if defined(__clang__)
  return __builtin_shufflevector(words, words, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 18, 18, 18, 18, 18, 18,
                                 18, 18, 19, 19, 19, 19, 19, 19, 19, 19);
#else
  return __builtin_shuffle(words, u8x32{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 18, 18, 18, 18, 18, 18, 18, 18,
                                        19, 19, 19, 19, 19, 19, 19, 19});
#endif
}

/// Eight 16-bit lanes as eight 32-bit lanes, zero-extended (vpmovzxwd).
ATTNSCOPE_SIMD_AVX2 u32x8 widen_u16(u16x8 value) {
#if defined(__clang__)
  return __builtin_convertvector(value, u32x8);
#else
  return (u32x8)__builtin_ia32_pmovzxwd256((i16x8)value);
#endif
}

// ---- integer dot products (the integer-dot GEMM of kernels/integer_dot.hpp)

typedef char c8x32 __attribute__((vector_size(32)));  // GCC's and Clang's own byte vector type, for their builtins
typedef std::int16_t i16x16 __attribute__((vector_size(32)));
typedef short s16x16 __attribute__((vector_size(32)));  // the builtins' 16-bit lane type

/// Sixteen 16-bit lanes: lane m = u[2m]·s[2m] + u[2m+1]·s[2m+1] with u read as unsigned bytes and s as signed
/// bytes, saturated to [−32768, 32767] (vpmaddubsw).
ATTNSCOPE_SIMD_AVX2 i16x16 multiply_add_bytes(u8x32 unsigned_bytes, u8x32 signed_bytes) {
  return (i16x16)__builtin_ia32_pmaddubsw256((c8x32)unsigned_bytes, (c8x32)signed_bytes);
}
/// Eight 32-bit lanes: lane l = a[2l]·b[2l] + a[2l+1]·b[2l+1] of signed 16-bit lanes (vpmaddwd).
ATTNSCOPE_SIMD_AVX2 i32x8 multiply_add_pairs(i16x16 a, i16x16 b) {
  return (i32x8)__builtin_ia32_pmaddwd256((s16x16)a, (s16x16)b);
}
/// Byte lanes of `value` (signed) negated where `sign` is negative, zeroed where it is zero, kept where positive
/// (vpsignb; −128 stays −128).
ATTNSCOPE_SIMD_AVX2 u8x32 sign_bytes(u8x32 value, u8x32 sign) {
  return (u8x32)__builtin_ia32_psignb256((c8x32)value, (c8x32)sign);
}
/// `value` in all sixteen 16-bit lanes.
ATTNSCOPE_SIMD_AVX2 i16x16 broadcast16_i16(std::int16_t value) {
  return i16x16{value, value, value, value, value, value, value, value,
                value, value, value, value, value, value, value, value};
}
/// Eight 32-bit integers as float32, rounded to nearest (vcvtdq2ps).
ATTNSCOPE_SIMD_AVX2 f32x8 int_to_float8(i32x8 value) { return __builtin_convertvector(value, f32x8); }

typedef std::int32_t i32x4 __attribute__((vector_size(16)));
typedef short s16x8 __attribute__((vector_size(16)));  // the builtins' 16-bit lane type

/// Four 32-bit lanes: lane l = a[2l]·b[2l] + a[2l+1]·b[2l+1] of signed 16-bit lanes (vpmaddwd, 128 bits).
ATTNSCOPE_SIMD_AVX2 i32x4 multiply_add_pairs(i16x8 a, i16x8 b) {
  return (i32x4)__builtin_ia32_pmaddwd128((s16x8)a, (s16x8)b);
}
/// Four 32-bit integers as float32, rounded to nearest (vcvtdq2ps, 128 bits).
ATTNSCOPE_SIMD_AVX2 f32x4 int_to_float4(i32x4 value) { return __builtin_convertvector(value, f32x4); }
/// a·b + c with one rounding, four lanes (vfmadd, 128 bits).
ATTNSCOPE_SIMD_FMA f32x4 fma(f32x4 a, f32x4 b, f32x4 c) {
#if defined(__clang__) && !ATTNSCOPE_SIMD_CLANG_HAS(__builtin_ia32_vfmaddps)
  return __builtin_elementwise_fma(a, b, c);
#else
  return __builtin_ia32_vfmaddps(a, b, c);
#endif
}
/// Sixteen signed bytes as sixteen 16-bit lanes, sign-extended (vpmovsxbw).
ATTNSCOPE_SIMD_AVX2 i16x16 widen_signed_bytes16(u8x16 bytes) {
#if defined(__clang__)
  return __builtin_convertvector((i8x16)bytes, i16x16);
#else
  return (i16x16)__builtin_ia32_pmovsxbw256((c8x16)bytes);
#endif
}

// ---- AVX-512F

/// Sixteen floats from `from` (any alignment).
ATTNSCOPE_SIMD_AVX512 f32x16 load16(const float* from) { return *reinterpret_cast<const f32x16_unaligned*>(from); }
/// Stores sixteen floats to `to` (any alignment).
ATTNSCOPE_SIMD_AVX512 void store16(float* to, f32x16 value) { *reinterpret_cast<f32x16_unaligned*>(to) = value; }
/// `value` in all sixteen lanes.
ATTNSCOPE_SIMD_AVX512 f32x16 broadcast16(float value) {
  return f32x16{value, value, value, value, value, value, value, value,
                value, value, value, value, value, value, value, value};
}
/// a·b + c with one rounding (vfmadd, current rounding direction).
ATTNSCOPE_SIMD_AVX512 f32x16 fma(f32x16 a, f32x16 b, f32x16 c) {
  return __builtin_ia32_vfmaddps512_mask(a, b, c, static_cast<unsigned short>(0xFFFF), 4);
}
/// A bit per lane: bit i set where lane i of `value` is NaN (vcmpunordps into a mask register).
ATTNSCOPE_SIMD_AVX512 unsigned nan_lanes(f32x16 value) {
  return __builtin_ia32_cmpps512_mask(value, value, 3 /* unordered, quiet */, static_cast<unsigned short>(0xFFFF), 4);
}

// ---- F16C

/// Eight IEEE binary16 values from `from` (any alignment) as float32, exactly (vcvtph2ps).
ATTNSCOPE_SIMD_F16C f32x8 widen_halves8(const unsigned char* from) {
  const u16x8 raw = *reinterpret_cast<const u16x8_unaligned*>(from);
  return __builtin_ia32_vcvtph2ps256((i16x8)raw);
}
/// One IEEE binary16 value as float32, exactly (vcvtph2ps).
ATTNSCOPE_SIMD_F16C float widen_half(std::uint16_t bits) {
  const i16x8 raw{static_cast<std::int16_t>(bits), 0, 0, 0, 0, 0, 0, 0};
  return __builtin_ia32_vcvtph2ps(raw)[0];
}

}  // namespace attnscope::kernels::detail::x86

#undef ATTNSCOPE_SIMD_CLANG_HAS
#undef ATTNSCOPE_SIMD_SHUFFLEVECTOR
#undef ATTNSCOPE_SIMD_AVX
#undef ATTNSCOPE_SIMD_AVX2
#undef ATTNSCOPE_SIMD_FMA
#undef ATTNSCOPE_SIMD_F16C
#undef ATTNSCOPE_SIMD_AVX512
#endif
