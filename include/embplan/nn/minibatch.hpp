#pragma once
// Mini-batch iteration with a seeded shuffle (NeuroShard's IndexLoader: shuffle
// the sample indices each epoch, then cut consecutive batches of batch_size; the
// last batch may be smaller). Epoch e's order depends only on (seed, e), so a
// resumed run sees the same batches.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

class minibatches {
 public:
  minibatches(std::size_t samples, std::size_t batch_size, std::uint64_t seed, bool shuffle = true)
      : batch_size_(batch_size), seed_(seed), shuffle_(shuffle), order_(samples) {
    if (batch_size == 0) embplan::detail::fail("minibatches.batch_size", 0, "a positive integer");
    set_epoch(0);
  }

  // Orders the samples for epoch e: a Fisher-Yates shuffle driven by
  // rng(derive_seed(seed, e)), or 0..n-1 without shuffling.
  void set_epoch(std::uint64_t epoch) {
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    if (!shuffle_) return;
    rng gen(derive_seed(seed_, epoch));
    for (std::size_t i = order_.size(); i > 1; --i)
      std::swap(order_[i - 1], order_[static_cast<std::size_t>(gen.below(i))]);
  }

  std::size_t samples() const noexcept { return order_.size(); }
  std::size_t batch_size() const noexcept { return batch_size_; }
  std::size_t size() const noexcept { return (order_.size() + batch_size_ - 1) / batch_size_; }

  // The sample indices of batch b of the current epoch.
  std::span<const std::size_t> operator[](std::size_t b) const {
    if (b >= size()) embplan::detail::fail("minibatches.batch", b, "a batch index below size()");
    const std::size_t begin = b * batch_size_;
    const std::size_t end = std::min(begin + batch_size_, order_.size());
    return std::span<const std::size_t>(order_).subspan(begin, end - begin);
  }

  // The whole order of the current epoch.
  std::span<const std::size_t> order() const noexcept { return order_; }

 private:
  std::size_t batch_size_;
  std::uint64_t seed_;
  bool shuffle_;
  std::vector<std::size_t> order_;
};

}  // namespace embplan::inline EMBPLAN_ABI::nn
