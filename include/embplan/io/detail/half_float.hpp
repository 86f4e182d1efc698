#pragma once
// IEEE 754 binary16 ("F16") and bfloat16 ("BF16") <-> float32, bit-exact and
// host-independent. float -> 16 bits rounds to nearest, ties to even, as
// PyTorch's `.half()` / `.bfloat16()` do; subnormals, infinities and NaN are
// kept (a NaN stays a quiet NaN, its top payload bits kept).

#include <bit>
#include <cstdint>

#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io::detail {

inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {  // inf (mantissa 0) or NaN (payload kept)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias 15 -> 127
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);  // +-0
  // Subnormal: mantissa x 2^-24, exactly representable as a normal float.
  // Normalise: shift until the implicit bit (bit 10) is set.
  std::uint32_t m = mantissa;
  std::uint32_t e = 113;  // biased float exponent of 2^-14
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((m & 0x3ffu) << 13));
}

inline std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN
    if (magnitude == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 = halfway between 65504 (largest half, odd mantissa) and 65536: ties
  // to even round it, and everything above, to infinity.
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  const std::uint32_t exponent = magnitude >> 23;
  if (magnitude < 0x38800000u) {  // below 2^-14: a half subnormal or zero
    if (exponent < 102) return static_cast<std::uint16_t>(sign);  // < 2^-25 rounds to 0
    // value / 2^-24 = significand x 2^(exponent - 126), a right shift by 14..24.
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;
    std::uint32_t q = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (q & 1u) != 0)) ++q;  // may carry into 2^-14
    return static_cast<std::uint16_t>(sign | q);
  }
  // Normal: rebias 127 -> 15, keep 10 mantissa bits, round the 13 dropped ones.
  std::uint32_t q = ((exponent - 112u) << 10) | ((magnitude >> 13) & 0x3ffu);
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (q & 1u) != 0)) ++q;  // a carry bumps the exponent
  return static_cast<std::uint16_t>(sign | q);
}

inline float bfloat16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bfloat16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate, force quiet
    return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  }
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);  // ties to even
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

}  // namespace embplan::inline EMBPLAN_ABI::io::detail
