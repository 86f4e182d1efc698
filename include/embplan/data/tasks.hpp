#pragma once
// The papers' task protocols: sharding tasks drawn from a table pool by seed.
//   - neuroshard (NeuroShard §4 "Datasets", App. D Table 5, tools/gen_tasks.py):
//     T uniform in [2.5 D, 15 D], tables drawn WITH replacement, each dim
//     uniform in {max_dim, max_dim/2, ..., 4}, 4 GB per GPU, a task whose
//     fp32 size exceeds D x memory - 1 GiB redrawn whole (T included, unlike
//     gen_tasks.py, which would not terminate with the published hash sizes);
//     100 tasks.
//   - dreamshard (DreamShard §4.1): the pool split into two disjoint halves
//     by a seeded shuffle; tasks DLRM-T (D) of T tables drawn WITHOUT
//     replacement from one half; dim 16 for every table; T = 12.5 D by
//     default; 50 tasks per half.
//   - autoshard (AutoShard §5.1, App. A.3): T = 10 D tables drawn WITHOUT
//     replacement; dims uniform in {4, 8, 16, 32} capped by max_dim; fp16
//     weights; 100 tasks.
// For dreamshard and autoshard, a draw larger than the cluster's total memory
// is redrawn too. Invariant: task i depends only on (options, i), so asking
// for more tasks keeps the first ones.
// unseen_share (AutoShard §5.5 "transfer to unseen tables"): of a task's T
// tables, round(share x T) come from the test half of the split and the rest
// from the train half, shuffled together.
// Design notes: docs/design/task-protocols.md.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/data/split.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data {

enum class protocol : std::uint8_t { neuroshard, dreamshard, autoshard };

constexpr std::string_view to_string(protocol p) noexcept {
  switch (p) {
    case protocol::neuroshard:
      return "neuroshard";
    case protocol::dreamshard:
      return "dreamshard";
    case protocol::autoshard:
      return "autoshard";
  }
  return "neuroshard";
}

inline protocol parse_protocol(std::string_view s) {
  if (s == "neuroshard") return protocol::neuroshard;
  if (s == "dreamshard") return protocol::dreamshard;
  if (s == "autoshard") return protocol::autoshard;
  embplan::detail::fail("protocol", s, "one of \"neuroshard\", \"dreamshard\", \"autoshard\"");
}

// Which part of the pool a task draws from: DreamShard trains on one half of
// the tables and tests on the other (§4.1).
enum class pool_half : std::uint8_t {
  protocol_default,  // train for dreamshard, whole for the others
  whole,
  train,
  test
};

constexpr std::string_view to_string(pool_half h) noexcept {
  switch (h) {
    case pool_half::protocol_default:
      return "default";
    case pool_half::whole:
      return "whole";
    case pool_half::train:
      return "train";
    case pool_half::test:
      return "test";
  }
  return "default";
}

// `field` names the value in the error (a CLI passes its flag).
inline pool_half parse_pool_half(std::string_view s, std::string_view field = "pool_half") {
  if (s == "default") return pool_half::protocol_default;
  if (s == "whole") return pool_half::whole;
  if (s == "train") return pool_half::train;
  if (s == "test") return pool_half::test;
  embplan::detail::fail(field, s, "one of \"default\", \"whole\", \"train\", \"test\"");
}

struct task_options {
  protocol proto = protocol::neuroshard;
  std::size_t devices = 4;
  std::int32_t max_dim = 128;          // a power of two in [4, 1024]
  std::optional<std::size_t> count{};  // unset: 100 (neuroshard, autoshard), 50 (dreamshard)
  std::uint64_t seed = 0;
  std::size_t min_tables = 0;  // 0 = protocol default
  std::size_t max_tables = 0;  // 0 = protocol default
  std::uint64_t device_memory_bytes = 4 * gib;
  std::int64_t batch_size = 65536;  // the pool's statistics are for this batch
  pool_half half = pool_half::protocol_default;
  // Seed of the train/test split, apart from `seed` so that train and test
  // tasks drawn with different seeds still come from disjoint halves.
  std::uint64_t split_seed = 0;
  // In [0, 1]: this share of each task's tables from the test half of the
  // `split_seed` split, the rest from its train half (AutoShard §5.5). Needs
  // `half` left at protocol_default. Unset: the tables come from `half`.
  std::optional<double> unseen_share{};
};

// What a protocol resolves to for given options (defaults filled in).
struct protocol_settings {
  std::size_t min_tables = 0;
  std::size_t max_tables = 0;
  std::size_t count = 0;
  std::vector<std::int32_t> dims;  // drawn uniformly per table
  pool_half half = pool_half::whole;
  bool with_replacement = false;
  std::uint64_t max_total_bytes = 0;  // a draw above this is redrawn
  std::optional<dtype> weight_dtype;  // unset: keep the pool's
};

// Validates the options (not the pool) and fills in the protocol's defaults.
inline protocol_settings resolve_protocol(const task_options& o) {
  using embplan::detail::fail;
  if (o.devices == 0) fail("devices", o.devices, "at least one device");
  if (o.count && *o.count == 0) fail("count", *o.count, "at least one task");
  if (o.max_dim < 4 || o.max_dim > 1024 || (o.max_dim & (o.max_dim - 1)) != 0) {
    fail("max_dim", o.max_dim, "a power of two in [4, 1024]");
  }
  if (o.device_memory_bytes == 0) fail("device_memory_bytes", 0, "a positive size");
  if (o.batch_size <= 0) fail("batch_size", o.batch_size, "a positive integer");
  if (o.unseen_share) {
    const double share = *o.unseen_share;
    if (!(share >= 0.0 && share <= 1.0)) fail("unseen_share", share, "a share in [0, 1]");
    if (o.half != pool_half::protocol_default) {
      fail("unseen_share", share,
           "half left at \"default\", not \"" + std::string(to_string(o.half)) +
               "\" (unseen_share draws from both halves of the pool)");
    }
  }
  if (o.min_tables != 0 && o.max_tables != 0 && o.min_tables > o.max_tables) {
    fail("min_tables", o.min_tables,
         "at most max_tables = " + std::to_string(o.max_tables) + " tables");
  }

  const std::size_t d = o.devices;
  const std::uint64_t cluster_bytes = checked_mul(d, o.device_memory_bytes, "device_memory_bytes");
  protocol_settings s;
  std::size_t default_min = 0;
  std::size_t default_max = 0;
  switch (o.proto) {
    case protocol::neuroshard:
      // NeuroShard App. D Table 5: 10-60 tables for 4 GPUs, 20-120 for 8.
      default_min = (5 * d + 1) / 2;
      default_max = 15 * d;
      s.count = 100;
      for (std::int32_t dim = o.max_dim; dim >= 4; dim /= 2)
        s.dims.push_back(dim);
      s.half = pool_half::whole;
      s.with_replacement = true;  // gen_tasks.py: np.random.randint(len(table_configs), size=T)
      // gen_tasks.py --max_mem 15 ("4 * 4 - 1") for 4 GPUs of 4 GB.
      s.max_total_bytes = cluster_bytes > gib ? cluster_bytes - gib : 0;
      break;
    case protocol::dreamshard:
      default_min = default_max = (25 * d + 1) / 2;
      s.count = 50;
      s.dims = {16};
      s.half = pool_half::train;
      s.max_total_bytes = cluster_bytes;
      break;
    case protocol::autoshard:
      default_min = default_max = 10 * d;  // AutoShard §5.1: devices = tables / 10
      s.count = 100;
      for (std::int32_t dim = 4; dim <= std::min(o.max_dim, 32); dim *= 2)
        s.dims.push_back(dim);
      s.half = pool_half::whole;
      s.max_total_bytes = cluster_bytes;
      s.weight_dtype = dtype::fp16;  // AutoShard App. A.3: "fp16 precision"
      break;
  }
  if (o.count) s.count = *o.count;
  if (o.half != pool_half::protocol_default) s.half = o.half;
  if (o.unseen_share) s.half = pool_half::whole;  // both halves
  s.min_tables = o.min_tables != 0   ? o.min_tables
                 : o.max_tables != 0 ? std::min(default_min, o.max_tables)
                                     : default_min;
  s.max_tables = o.max_tables != 0 ? o.max_tables : std::max(default_max, s.min_tables);
  return s;
}

namespace detail {

inline constexpr std::uint64_t split_stream = 0x73706c6974;  // "split"

// DreamShard tools/gen_tasks.py: shuffle the table indices, the first half
// (rounded down) trains, the rest tests. Each half in pool order.
inline std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_indices(
    std::size_t n, std::uint64_t seed) {
  auto parts = seeded_split(n, {.train_fraction = 0.5,
                                .validation_fraction = 0.0,
                                .seed = seed,
                                .stream = split_stream,
                                .order = split_order::ascending});
  return {std::move(parts.train), std::move(parts.test)};
}

// Of a task's `tables` tables, how many unseen_share draws from the test
// half: round(share x tables), half away from zero.
inline std::size_t unseen_tables(double share, std::size_t tables) {
  return static_cast<std::size_t>(std::round(share * static_cast<double>(tables)));
}

// A share as short as it reads back: 0.25, 1.
inline std::string share_text(double share) {
  char text[32];
  return {text, std::to_chars(text, text + sizeof text, share).ptr};
}

inline std::string task_name(protocol p, std::size_t devices, std::int32_t dim, pool_half half,
                             std::optional<double> unseen_share, std::size_t index,
                             std::size_t count) {
  std::string number = std::to_string(index);
  const std::size_t width = std::max<std::size_t>(3, std::to_string(count - 1).size());
  if (number.size() < width) number.insert(0, width - number.size(), '0');
  std::string name(to_string(p));
  name += '-' + std::to_string(devices) + "dev-" + std::to_string(dim) + "dim-";
  if (half == pool_half::train || half == pool_half::test) {
    name += to_string(half);
    name += '-';
  }
  if (unseen_share) name += "unseen" + share_text(*unseen_share) + '-';
  return name + number;
}

inline constexpr int max_redraws = 10'000;

}  // namespace detail

// The two disjoint halves of a pool (DreamShard §4.1): .first trains, .second
// tests; together they are the pool. Same seed, same split.
inline std::pair<std::vector<table_spec>, std::vector<table_spec>> split_pool(
    std::span<const table_spec> pool, std::uint64_t seed) {
  const auto [train_idx, test_idx] = detail::split_indices(pool.size(), seed);
  std::pair<std::vector<table_spec>, std::vector<table_spec>> out;
  out.first.reserve(train_idx.size());
  out.second.reserve(test_idx.size());
  for (auto i : train_idx)
    out.first.push_back(pool[i]);
  for (auto i : test_idx)
    out.second.push_back(pool[i]);
  return out;
}

// Which half of a pool of `pool_size` tables, split with `seed` as
// split_pool does, holds every table of `tables` (pool indices): train or
// test, else whole (tables from both halves, or none). What a learned cost
// model records of its training data, so that it is judged on the other half.
inline pool_half half_holding(std::span<const std::size_t> tables, std::size_t pool_size,
                              std::uint64_t seed) {
  for (std::size_t i = 0; i < tables.size(); ++i) {
    if (tables[i] >= pool_size) {
      embplan::detail::fail(embplan::detail::path("tables", i), tables[i],
                            "a pool index below " + std::to_string(pool_size));
    }
  }
  if (tables.empty()) return pool_half::whole;
  const auto [train, test] = detail::split_indices(pool_size, seed);
  const auto all_in = [&](const std::vector<std::size_t>& half) {
    return std::all_of(tables.begin(), tables.end(), [&](std::size_t t) {
      return std::binary_search(half.begin(), half.end(), t);
    });
  };
  if (all_in(train)) return pool_half::train;
  if (all_in(test)) return pool_half::test;
  return pool_half::whole;
}

// The half a model trained on `trained` should be judged on: the other one;
// whole for whole (and for protocol_default, which names no half).
constexpr pool_half other_half(pool_half trained) noexcept {
  if (trained == pool_half::train) return pool_half::test;
  if (trained == pool_half::test) return pool_half::train;
  return pool_half::whole;
}

// The tasks of generate_tasks one at a time, so that a caller that consumes
// them in turn (compare) holds one task, not all `count` of them: next()
// returns task 0, 1, ..., count - 1, each the same as generate_tasks' task of
// that index. The constructor refuses everything generate_tasks refuses up
// front (bad options, an invalid pool table, more tables than the pool
// holds, a cluster too small for any draw) before any task is drawn; next()
// throws only when 10,000 draws in a row do not fit the cluster's memory.
// The pool is viewed, not copied: it must outlive the generator.
class task_generator {
 public:
  task_generator(std::span<const table_spec> pool, const task_options& options = {})
      : pool_(pool), options_(options), s_(resolve_protocol(options)) {
    using embplan::detail::fail;
    if (pool.empty()) fail("pool", 0, "at least one table");
    for (std::size_t i = 0; i < pool.size(); ++i)
      validate(pool[i], embplan::detail::path("pool", i));

    // The tables drawn from: `source_`; with unseen_share, the train half
    // there and the test half in `unseen_`.
    source_.resize(pool.size());
    std::iota(source_.begin(), source_.end(), std::size_t{0});
    if (s_.half == pool_half::train || s_.half == pool_half::test || options.unseen_share) {
      auto halves = detail::split_indices(pool.size(), options.split_seed);
      source_ = s_.half == pool_half::test ? std::move(halves.second) : std::move(halves.first);
      if (options.unseen_share) unseen_ = std::move(halves.second);
      if (source_.empty() || (options.unseen_share && unseen_.empty()))
        fail("pool", pool.size(), "at least two tables to split in halves");
    }
    check_room();
    check_fits();

    name_dim_ = *std::max_element(s_.dims.begin(), s_.dims.end());
    const std::uint64_t stream =
        16 + 4 * static_cast<std::uint64_t>(options.proto) + static_cast<std::uint64_t>(s_.half);
    protocol_seed_ = derive_seed(options.seed, stream);
    device_spec device;
    device.memory_bytes = options.device_memory_bytes;
    cluster_ = uniform_topology(options.devices, device);
    copies_.assign(pool.size(), 0);
  }
  // A temporary pool would be gone before the first task.
  task_generator(std::vector<table_spec>&&, const task_options& = {}) = delete;

  // How many tasks in all (the options' count, or the protocol's).
  std::size_t count() const noexcept { return s_.count; }
  // How many next() has still to return.
  std::size_t remaining() const noexcept { return s_.count - next_; }

  // The next task; throws embplan::error when none is left, or when 10,000
  // draws in a row do not fit the cluster's memory.
  task next() {
    using embplan::detail::fail;
    if (next_ == s_.count) {
      fail("task_generator.next", next_,
           "a call while remaining() > 0 (all " + std::to_string(s_.count) + " tasks drawn)");
    }
    const std::size_t t = next_;
    rng r(derive_seed(protocol_seed_, t));
    std::size_t tables = 0;
    bool fits = false;
    for (int attempt = 0; attempt < detail::max_redraws && !fits; ++attempt) {
      tables = static_cast<std::size_t>(r.between(static_cast<std::int64_t>(s_.min_tables),
                                                  static_cast<std::int64_t>(s_.max_tables)));
      chosen_.assign(tables, 0);
      if (options_.unseen_share) {
        const std::size_t k = detail::unseen_tables(*options_.unseen_share, tables);
        draw(r, unseen_, k, chosen_.data());
        draw(r, source_, tables - k, chosen_.data() + k);
        // The unseen tables anywhere in the task, not first.
        for (std::size_t i = tables; i > 1; --i)
          std::swap(chosen_[i - 1], chosen_[static_cast<std::size_t>(r.below(i))]);
      } else {
        draw(r, source_, tables, chosen_.data());
      }
      dims_.assign(tables, 0);
      for (auto& dim : dims_)
        dim = s_.dims[static_cast<std::size_t>(r.below(s_.dims.size()))];
      std::uint64_t total = 0;
      for (std::size_t i = 0; i < tables; ++i) {
        const table_spec& p = pool_[chosen_[i]];
        total = checked_add(
            total,
            block_bytes(static_cast<std::uint64_t>(p.rows), static_cast<std::uint64_t>(dims_[i]),
                        s_.weight_dtype.value_or(p.weight_dtype)),
            "task bytes");
      }
      fits = total <= s_.max_total_bytes;
    }
    if (!fits) {
      fail("device_memory_bytes", options_.device_memory_bytes,
           "enough memory to draw a task that fits: " + std::to_string(detail::max_redraws) +
               " draws of " + std::to_string(s_.min_tables) + "-" + std::to_string(s_.max_tables) +
               " tables all exceeded " + std::to_string(s_.max_total_bytes) + " bytes on " +
               std::to_string(options_.devices) +
               " devices (cannot draw a task that fits; use more devices, more memory, fewer "
               "tables or a smaller max_dim)");
    }
    task out;
    out.name = detail::task_name(options_.proto, options_.devices, name_dim_, s_.half,
                                 options_.unseen_share, t, s_.count);
    out.tables.reserve(tables);
    // Sampling with replacement may pick a pool table twice; each copy is its
    // own table in the model, so copies get "#2", "#3", ... after the name
    // (exports such as TorchRec key tables by name).
    for (std::size_t i = 0; i < tables; ++i) {
      table_spec spec = pool_[chosen_[i]];
      if (++copies_[chosen_[i]] > 1) spec.name += "#" + std::to_string(copies_[chosen_[i]]);
      spec.dim = dims_[i];
      if (s_.weight_dtype) spec.weight_dtype = *s_.weight_dtype;
      out.tables.push_back(std::move(spec));
    }
    for (std::size_t i = 0; i < tables; ++i)
      copies_[chosen_[i]] = 0;
    out.cluster = cluster_;
    out.batch_size = options_.batch_size;
    ++next_;
    return out;
  }

 private:
  // Without replacement a task cannot draw more tables than its source
  // holds; the tables drawn from each half grow with T, so max_tables tells.
  void check_room() const {
    const auto room = [&](std::size_t drawn, std::size_t holds, const std::string& where,
                          const std::string& which) {
      if (s_.with_replacement || drawn <= holds) return;
      embplan::detail::fail("max_tables", s_.max_tables,
                            "at most the " + std::to_string(holds) + " tables of the " + where +
                                which + " (" + std::string(to_string(options_.proto)) +
                                " draws tables without replacement; set max_tables" +
                                (options_.unseen_share ? ", unseen_share" : "") +
                                " or use fewer devices)");
    };
    if (options_.unseen_share) {
      const std::size_t most = detail::unseen_tables(*options_.unseen_share, s_.max_tables);
      room(
          most, unseen_.size(), "test half",
          " for the round(unseen_share x max_tables) = " + std::to_string(most) + " drawn from it");
      room(s_.max_tables - most, source_.size(), "train half",
           " for the other " + std::to_string(s_.max_tables - most) + " drawn from it");
    } else {
      room(s_.max_tables, source_.size(),
           s_.half == pool_half::whole ? "pool" : std::string(to_string(s_.half)) + " half", "");
    }
  }

  // No draw can fit when the smallest task that can be drawn (min_tables of
  // the smallest tables at the smallest dim) exceeds the memory: refused
  // now, not after max_redraws hopeless draws (each of up to max_tables).
  void check_fits() const {
    using embplan::detail::fail;
    const auto& s = s_;
    const auto& options = options_;
    const auto pool = pool_;
    const std::int32_t least_dim = *std::min_element(s.dims.begin(), s.dims.end());
    const auto least_bytes = [&](std::size_t i) {
      return block_bytes(static_cast<std::uint64_t>(pool[i].rows),
                         static_cast<std::uint64_t>(least_dim),
                         s.weight_dtype.value_or(pool[i].weight_dtype));
    };
    const auto smallest_sum = [&](const std::vector<std::size_t>& from, std::size_t n) {
      std::vector<std::uint64_t> bytes(from.size());
      for (std::size_t i = 0; i < from.size(); ++i)
        bytes[i] = least_bytes(from[i]);
      std::uint64_t total = 0;
      if (s.with_replacement) {
        const auto least = *std::min_element(bytes.begin(), bytes.end());
        for (std::size_t i = 0; i < n; ++i)
          total = checked_add(total, least, "task bytes");
        return total;
      }
      const std::size_t k = std::min(n, bytes.size());
      std::partial_sort(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(k), bytes.end());
      for (std::size_t i = 0; i < k; ++i)
        total = checked_add(total, bytes[i], "task bytes");
      return total;
    };
    std::uint64_t least_task = 0;
    if (options.unseen_share) {
      const std::size_t k = detail::unseen_tables(*options.unseen_share, s.min_tables);
      least_task = checked_add(smallest_sum(unseen_, k), smallest_sum(source_, s.min_tables - k),
                               "task bytes");
    } else {
      least_task = smallest_sum(source_, s.min_tables);
    }
    // A draw's bytes are a sum of min_tables independent (with replacement;
    // without, less spread) table-and-dim draws: where even its mean less 8
    // standard deviations exceeds the memory, a fitting draw has odds below
    // 1e-15 and max_redraws draws of up to max_tables tables would only burn
    // minutes (1,000,000 tables: 10,000 draws, 200 s) before failing.
    if (!options.unseen_share && s.min_tables > 0) {
      long double sum = 0;
      long double sum_sq = 0;
      for (const std::size_t i : source_) {
        for (const std::int32_t dim : s.dims) {
          const auto b = static_cast<long double>(
              block_bytes(static_cast<std::uint64_t>(pool[i].rows), static_cast<std::uint64_t>(dim),
                          s.weight_dtype.value_or(pool[i].weight_dtype)));
          sum += b;
          sum_sq += b * b;
        }
      }
      const auto draws = static_cast<long double>(source_.size() * s.dims.size());
      const long double mean = sum / draws;
      const long double var = std::max<long double>(0, sum_sq / draws - mean * mean);
      const auto n = static_cast<long double>(s.min_tables);
      const long double low = n * mean - 8 * std::sqrt(n * var);
      if (low > static_cast<long double>(s.max_total_bytes)) {
        fail("device_memory_bytes", options.device_memory_bytes,
             "enough memory for a task the protocol can draw: " + std::to_string(s.min_tables) +
                 " tables drawn from the pool take " +
                 std::to_string(static_cast<std::uint64_t>(n * mean)) +
                 " bytes on average, and a draw of no more than the " +
                 std::to_string(s.max_total_bytes) + " bytes a task may take on " +
                 std::to_string(options.devices) +
                 " devices is more than 8 standard deviations away (cannot draw a task that "
                 "fits; use more devices, more memory or fewer tables)");
      }
    }
    if (least_task > s.max_total_bytes) {
      fail("device_memory_bytes", options.device_memory_bytes,
           "enough memory for the smallest task the protocol can draw: " +
               std::to_string(s.min_tables) + " of the pool's smallest tables at dim " +
               std::to_string(least_dim) + " take " + std::to_string(least_task) +
               " bytes, more than the " + std::to_string(s.max_total_bytes) +
               " bytes a task may "
               "take on " +
               std::to_string(options.devices) +
               " devices (cannot draw a task that fits; use more devices, more memory or "
               "fewer tables)");
    }
  }

  // `n` tables of `from` into `out`: with replacement, else the first n of a
  // Fisher-Yates shuffle.
  void draw(rng& r, const std::vector<std::size_t>& from, std::size_t n, std::size_t* out) {
    if (s_.with_replacement) {
      for (std::size_t i = 0; i < n; ++i)
        out[i] = from[static_cast<std::size_t>(r.below(from.size()))];
      return;
    }
    shuffled_ = from;
    for (std::size_t i = 0; i < n; ++i) {
      std::swap(shuffled_[i],
                shuffled_[i + static_cast<std::size_t>(r.below(shuffled_.size() - i))]);
      out[i] = shuffled_[i];
    }
  }

  std::span<const table_spec> pool_;
  task_options options_;
  protocol_settings s_;
  std::vector<std::size_t> source_;
  std::vector<std::size_t> unseen_;
  std::int32_t name_dim_ = 0;
  std::uint64_t protocol_seed_ = 0;
  topology cluster_;
  std::size_t next_ = 0;  // the index of the task next() returns
  // Scratch of next(), kept between tasks. copies_: per pool table, how
  // often the task being drawn holds it (all zero between tasks).
  std::vector<std::size_t> chosen_;
  std::vector<std::int32_t> dims_;
  std::vector<std::size_t> shuffled_;
  std::vector<std::size_t> copies_;
};

// `count` tasks under the options' protocol: task_generator's tasks, all of
// them. Throws embplan::error for bad options (naming the field and value),
// an invalid pool table ("pool[3].rows"), more tables than the pool (half)
// holds when sampling without replacement (with unseen_share: more than
// either half holds for its part), or when 10,000 draws in a row do not fit
// the cluster's memory.
inline std::vector<task> generate_tasks(std::span<const table_spec> pool,
                                        const task_options& options = {}) {
  task_generator tasks(pool, options);
  std::vector<task> out;
  out.reserve(tasks.count());
  while (tasks.remaining() > 0)
    out.push_back(tasks.next());
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::data
