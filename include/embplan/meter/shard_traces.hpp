#pragma once
// Common random numbers for comparing the plans of one task: each table's
// index trace drawn once per task and reused by every shard that holds the
// table (or a column piece of it), whichever plan and device the shard is
// from. Two plans of a task are then timed on the same lookups: their ratio
// carries no trace-sampling noise, and the meter stops drawing the same
// table's trace again for every plan (at the papers' batch of 65,536 a
// 40-table task is ~50M lookups: drawing them takes a core longer than a GPU
// takes to time the plan; docs/design/meters.md).
//
// The trace of table i is data::generate_trace(piece, {batch, derive_seed(seed,
// i)}), the piece being core/plan.hpp's piece_table: a column piece has the
// whole table's rows and pooling, so the columns of a table share one trace; a
// row piece (rows [a, b)) has a trace of its own. prepare() lays a shard out
// as prepare_shard (cpu_meter.hpp) does, checks included; where the meter
// would shrink the shard's tables to fit max_weight_bytes it returns
// prepare_shard's own (per-shard) trace instead, since a shrunk table's trace
// depends on the shard it is in.
//
// Holds one task at a time: a call for another task (another table, or
// another meter batch or seed) drops the traces of the last one. Not
// thread-safe: one per meter, called under the meter's lock.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/data/trace.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter {

class shard_traces {
 public:
  // `threads`: how many threads draw a new task's traces (0: the hardware's).
  explicit shard_traces(std::size_t threads = 0) : threads_(threads) {}

  // The shard `group` of task `t` ready to run at the batch and seed of `o`.
  prepared_shard prepare(const task& t, std::span<const shard> group, const meter_options& o,
                         std::string_view meter_name, std::int32_t dim_multiple) {
    std::vector<table_spec> specs;
    specs.reserve(group.size());
    for (const auto& s : group)
      specs.push_back(piece_table(t, s));
    detail::check_shard(specs, meter_name, dim_multiple);
    const auto rows = detail::capped_rows(specs, o.max_weight_bytes);
    bool shrunk = false;
    for (std::size_t i = 0; i < specs.size(); ++i)
      shrunk = shrunk || rows[i] != specs[i].rows;
    if (shrunk) return detail::prepare_shard(specs, o, o.seed, meter_name, dim_multiple);
    use_task(t, o);
    draw(t, group);

    prepared_shard p;
    std::vector<std::int32_t> dims;
    dims.reserve(specs.size());
    for (const auto& s : specs)
      dims.push_back(s.dim);
    p.layout = kernel::make_tbe_layout(rows, dims);
    p.fp16 = !specs.empty() && specs.front().weight_dtype == dtype::fp16;
    const auto b = static_cast<std::size_t>(o.batch_size);
    std::size_t total = 0;
    for (const auto& s : group)
      total += traces_.at(key_of(s))->indices.size();
    p.trace.batch_size = o.batch_size;
    p.trace.indices.reserve(total);
    p.trace.offsets.reserve(group.size() * b + 1);
    for (const auto& s : group)
      data::detail::append_table(p.trace, *traces_.at(key_of(s)));
    p.trace.offsets.push_back(static_cast<std::int64_t>(p.trace.indices.size()));
    return p;
  }

  // Traces held (the current task's), and how many were drawn since construction.
  std::size_t held() const noexcept { return traces_.size(); }
  std::size_t drawn() const noexcept { return drawn_; }

 private:
  // (table, row_begin, row_end): the pieces that share a trace.
  using key = std::tuple<std::uint32_t, std::int64_t, std::int64_t>;
  static key key_of(const shard& s) { return {s.table, s.row_begin, s.row_end}; }

  // A trace depends on the table, the meter's batch and the seed alone.
  void use_task(const task& t, const meter_options& o) {
    if (batch_size_ != 0 && t.tables == tables_ && o.batch_size == batch_size_ && o.seed == seed_)
      return;
    traces_.clear();
    tables_ = t.tables;
    batch_size_ = o.batch_size;
    seed_ = o.seed;
  }

  // Draws the group's missing traces, several threads at a time.
  void draw(const task& t, std::span<const shard> group) {
    std::vector<std::pair<key, table_spec>> missing;
    for (const auto& s : group) {
      const key k = key_of(s);
      bool listed = traces_.contains(k);
      for (const auto& m : missing)
        listed = listed || m.first == k;
      if (!listed) missing.emplace_back(k, piece_table(t, s));
    }
    if (missing.empty()) return;
    std::vector<std::shared_ptr<const data::bag_trace>> out(missing.size());
    const auto one = [&](std::size_t i) {
      out[i] = std::make_shared<const data::bag_trace>(data::generate_trace(
          missing[i].second,
          {.batch_size = batch_size_, .seed = derive_seed(seed_, std::get<0>(missing[i].first))}));
    };
    std::size_t threads = threads_ ? threads_ : std::thread::hardware_concurrency();
    threads = std::clamp<std::size_t>(threads, 1, missing.size());
    if (threads == 1) {
      for (std::size_t i = 0; i < missing.size(); ++i)
        one(i);
    } else {
      // Largest first would balance better; tables are drawn round robin,
      // which is enough for a pool whose sizes are mixed.
      std::vector<std::jthread> pool;
      std::vector<std::exception_ptr> errors(threads);
      for (std::size_t w = 0; w < threads; ++w) {
        pool.emplace_back([&, w] {
          try {
            for (std::size_t i = w; i < missing.size(); i += threads)
              one(i);
          } catch (...) {
            errors[w] = std::current_exception();
          }
        });
      }
      pool.clear();  // joins
      for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    }
    for (std::size_t i = 0; i < missing.size(); ++i)
      traces_.emplace(missing[i].first, std::move(out[i]));
    drawn_ += missing.size();
  }

  std::size_t threads_ = 0;
  std::vector<table_spec> tables_{};
  std::int64_t batch_size_ = 0;  // 0: no task yet
  std::uint64_t seed_ = 0;
  std::map<key, std::shared_ptr<const data::bag_trace>> traces_{};
  std::size_t drawn_ = 0;
};

}  // namespace embplan::inline EMBPLAN_ABI::meter
