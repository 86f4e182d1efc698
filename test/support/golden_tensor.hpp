#pragma once
// A golden file's tensor as a [rows, cols] matrix: the last dimension is the
// columns, the leading ones fold into rows, and a 1-D tensor of n values is
// [n, 1] (one value per row: a per-step or per-slot figure).
#include <Eigen/Core>

#include <string>

#include "embplan/io/safetensors.hpp"
#include "embplan/nn/tensor.hpp"

namespace embplan::test {

inline embplan::nn::matrix golden_rows(const embplan::io::safetensors_file& f,
                                       const std::string& name) {
  const auto& t = f.tensors.at(name);
  const Eigen::Index cols = t.shape.size() < 2 ? 1 : static_cast<Eigen::Index>(t.shape.back());
  const Eigen::Index rows = cols == 0 ? 0 : static_cast<Eigen::Index>(t.values.size()) / cols;
  return Eigen::Map<const embplan::nn::matrix>(t.values.data(), rows, cols);
}

}  // namespace embplan::test
