#pragma once
// Itemised storage of one table or shard in a memory tier (core/memory_tier.hpp),
// each item split into device memory (HBM) and host DRAM, the way FBGEMM's
// table-batched embedding (TBE) lays a table out:
//  - weights: rows x cols x dtype bytes. hbm: in HBM. host: in host DRAM.
//    uvm_caching: the table in host DRAM and, in HBM, the cache's copies of
//    ceil(load_factor x rows) rows at the weights' dtype.
//  - optimizer state (core/table_spec.hpp's block_bytes: SGD none, row-wise
//    Adagrad one fp32 per row, Adam two fp32 per weight): next to the weights
//    in hbm and host; in host DRAM for uvm_caching, which FBGEMM does not cache
//    (its momentum buffers are placed with cacheable = false).
//  - cache state (uvm_caching only, HBM): per cache slot the cached row's
//    int64 index (FBGEMM's lxu_cache_state) and, for LRU, an int64 last-use
//    time step (lxu_state); per table row an int32 map from the linear cache
//    index to its table (cache_index_table_map) and, for LFU, an int64 use
//    count (lxu_state). Not charged: the prefetch pipeline's per-slot locking
//    counter, the per-table cumulative sizes, and FBGEMM rounding the slots up
//    to whole 32-way sets (at most 31 slots more).
//  - the pipeline's buffers of a batch, always in HBM (the kernel runs on the
//    device whatever the tier): indices (batch x pooling factor x the shard's
//    share of rows, rounded up) and offsets (batch + 1) at index_bytes each,
//    times pipeline_batches; the pooled fp32 outputs and their fp32 gradients,
//    batch x cols x 4 bytes each. `batch` is the batch the shard looks up, the
//    global batch under model parallelism, as in cost/analytic.hpp.

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// FBGEMM's two cache replacement policies, which keep different state.
enum class cache_policy : std::uint8_t { lru, lfu };

constexpr std::string_view to_string(cache_policy p) noexcept {
  return p == cache_policy::lfu ? "lfu" : "lru";
}

struct storage_options {
  // Bytes of one index and one offset: 8 (int64) or 4 (int32).
  std::int32_t index_bytes = 8;
  // Batches whose indices and offsets are in HBM at once; a pipelined trainer
  // that copies the next batches' inputs ahead keeps more than one.
  std::int32_t pipeline_batches = 1;
  cache_policy policy = cache_policy::lru;
};

struct memory_split {
  std::uint64_t hbm_bytes = 0;
  std::uint64_t host_bytes = 0;

  friend bool operator==(const memory_split&, const memory_split&) = default;
};

struct storage_items {
  memory_split weights{};
  memory_split optimizer_state{};
  memory_split cache_state{};
  memory_split indices{};
  memory_split offsets{};
  memory_split pooled_outputs{};
  memory_split output_gradients{};

  // The items with their names, in the order above.
  std::array<std::pair<std::string_view, memory_split>, 7> items() const {
    return {{{"weights", weights},
             {"optimizer state", optimizer_state},
             {"cache state", cache_state},
             {"indices", indices},
             {"offsets", offsets},
             {"pooled outputs", pooled_outputs},
             {"output gradients", output_gradients}}};
  }

  memory_split total() const {
    memory_split sum;
    for (const auto& [name, m] : items()) {
      sum.hbm_bytes = checked_add(sum.hbm_bytes, m.hbm_bytes, "storage hbm bytes");
      sum.host_bytes = checked_add(sum.host_bytes, m.host_bytes, "storage host bytes");
    }
    return sum;
  }

  friend bool operator==(const storage_items&, const storage_items&) = default;
};

namespace detail {

inline void validate(const storage_options& o) {
  if (o.index_bytes != 4 && o.index_bytes != 8) {
    detail::fail("storage.index_bytes", o.index_bytes, "4 (int32) or 8 (int64)");
  }
  if (o.pipeline_batches < 1) {
    detail::fail("storage.pipeline_batches", o.pipeline_batches, "a positive number of batches");
  }
  if (o.policy != cache_policy::lru && o.policy != cache_policy::lfu) {
    detail::fail("storage.policy", static_cast<int>(o.policy), "lru or lfu");
  }
}

}  // namespace detail

// HBM bytes of one cache slot's state: the cached row's index and, for LRU,
// its time step.
constexpr std::uint64_t cache_slot_state_bytes(cache_policy p) noexcept {
  return p == cache_policy::lru ? 16 : 8;
}

// HBM bytes of one cache slot: the cached row at the weights' dtype and its state.
inline std::uint64_t cache_slot_bytes(std::int32_t cols, dtype t, cache_policy p) {
  if (cols <= 0) embplan::detail::fail("cols", cols, "a positive number of columns");
  return block_bytes(1, static_cast<std::uint64_t>(cols), t) + cache_slot_state_bytes(p);
}

// HBM bytes of a uvm_caching shard's cache state that do not depend on the
// slots: the int32 table map and, for LFU, the int64 count, per table row.
inline std::uint64_t cache_row_state_bytes(std::int64_t rows, cache_policy p) {
  if (rows <= 0) embplan::detail::fail("rows", rows, "a positive number of rows");
  return checked_mul(static_cast<std::uint64_t>(rows), p == cache_policy::lfu ? 12 : 4,
                     "cache state bytes");
}

// A shard of `rows` x `cols` of table `spec` (rows <= spec.rows, cols <= spec.dim)
// that looks up `batch_size` bags per batch, placed `where`.
inline storage_items shard_storage(const table_spec& spec, std::int64_t rows, std::int32_t cols,
                                   std::int64_t batch_size, optimizer opt,
                                   const tier_placement& where, const storage_options& o = {}) {
  validate(spec);
  validate(where);
  detail::validate(o);
  if (rows <= 0 || rows > spec.rows) {
    detail::fail("rows", rows,
                 "a shard's rows in [1, table rows = " + std::to_string(spec.rows) + "]");
  }
  if (cols <= 0 || cols > spec.dim) {
    detail::fail("cols", cols,
                 "a shard's columns in [1, table dim = " + std::to_string(spec.dim) + "]");
  }
  if (batch_size <= 0) embplan::detail::fail("batch_size", batch_size, "a positive batch size");
  const auto n = static_cast<std::uint64_t>(rows);
  const auto d = static_cast<std::uint64_t>(cols);
  const auto b = static_cast<std::uint64_t>(batch_size);
  const std::uint64_t weights = block_bytes(n, d, spec.weight_dtype);
  const std::uint64_t state = block_bytes(n, d, spec.weight_dtype, opt) - weights;

  storage_items out;
  switch (where.tier) {
    case memory_tier::hbm:
      out.weights.hbm_bytes = weights;
      out.optimizer_state.hbm_bytes = state;
      break;
    case memory_tier::uvm_caching: {
      const std::uint64_t slots = device_rows(where, rows);
      out.weights.host_bytes = weights;
      out.weights.hbm_bytes = block_bytes(slots, d, spec.weight_dtype);
      out.optimizer_state.host_bytes = state;
      out.cache_state.hbm_bytes =
          checked_add(checked_mul(slots, cache_slot_state_bytes(o.policy), "cache state bytes"),
                      cache_row_state_bytes(rows, o.policy), "cache state bytes");
      break;
    }
    case memory_tier::host:
      out.weights.host_bytes = weights;
      out.optimizer_state.host_bytes = state;
      break;
  }
  const auto index_bytes = static_cast<std::uint64_t>(o.index_bytes);
  const auto batches = static_cast<std::uint64_t>(o.pipeline_batches);
  const double lookups = std::ceil(static_cast<double>(batch_size) * spec.pooling_factor *
                                   static_cast<double>(rows) / static_cast<double>(spec.rows));
  if (!(lookups < 1.8e19)) {
    detail::fail("batch_size", batch_size,
                 "batch x pooling factor lookups below 2^64 (pooling factor " +
                     std::to_string(spec.pooling_factor) + ")");
  }
  out.indices.hbm_bytes =
      checked_mul(checked_mul(static_cast<std::uint64_t>(lookups), index_bytes, "indices bytes"),
                  batches, "indices bytes");
  out.offsets.hbm_bytes =
      checked_mul(checked_mul(b + 1, index_bytes, "offsets bytes"), batches, "offsets bytes");
  out.pooled_outputs.hbm_bytes = checked_mul(checked_mul(b, d, "output bytes"), 4, "output bytes");
  out.output_gradients.hbm_bytes = out.pooled_outputs.hbm_bytes;
  return out;
}

// The whole table as one shard.
inline storage_items table_storage(const table_spec& spec, std::int64_t batch_size, optimizer opt,
                                   const tier_placement& where, const storage_options& o = {}) {
  return shard_storage(spec, spec.rows, spec.dim, batch_size, opt, where, o);
}

}  // namespace embplan::inline EMBPLAN_ABI
