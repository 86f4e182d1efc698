#pragma once
// The packed networks' kernels this machine can run, automatic first: the
// tests run every one of them and compare their results bit for bit.
#include <vector>

#include "embplan/nn/simd_kernel.hpp"

namespace embplan::test {

inline std::vector<embplan::nn::simd_kernel> runnable_kernels() {
  using embplan::nn::simd_kernel;
  std::vector<simd_kernel> out;
  for (const auto k :
       {simd_kernel::automatic, simd_kernel::scalar, simd_kernel::avx2, simd_kernel::avx512}) {
    if (embplan::nn::simd_kernel_supported(k)) out.push_back(k);
  }
  return out;
}

}  // namespace embplan::test
