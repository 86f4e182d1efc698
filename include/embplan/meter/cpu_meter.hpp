#pragma once
// The CPU meter (docs/measuring.md, "Meters"): a device's shard — any set of
// tables and column/row pieces — runs as one fused TBE embedding bag
// (kernel/embedding_bag.hpp) on index traces generated from the tables'
// statistics (data/trace.hpp), timed under AutoShard's protocol
// (meter/protocol.hpp): forward, backward (exact SGD) and forward + backward,
// each measured separately.
//
// Where it differs from the papers' GPU meter, on purpose and said so:
//  - batch: a CPU runs B = 65,536 bags of a 10-table shard far more slowly
//    than a GPU (docs/design/meters.md), so the meter runs `batch_size` bags
//    (4,096 by default) and scales the
//    times by task batch / meter batch when it prices a plan (cpu_meter_cost);
//    the raw times at the meter's batch are what collection records;
//  - rows: a shard's weights are materialised, so tables are shrunk to fit
//    `max_weight_bytes` (256 MiB by default; rows scaled by one common
//    factor) — far beyond the last-level cache, so lookups still miss it, but
//    hash size matters less than on a GPU, where a 12.5M-row table spreads
//    over more pages (TLB reach); a shrunk table that has fewer rows than a
//    batch touches reuses rows more often (data/trace.hpp caps them);
//  - one thread: one device is one core, measured by itself.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/data/trace.hpp"
#include "embplan/kernel/embedding_bag.hpp"
#include "embplan/kernel/tbe.hpp"
#include "embplan/meter/protocol.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter {

// What the CPU meter's timer reads: the wall clock (AutoShard's steady clock,
// the default) or the measuring thread's CPU time (meter/protocol.hpp's
// thread_cpu_timer), which leaves out the time slices of other processes on
// a shared machine.
enum class meter_clock : std::uint8_t { wall, thread_cpu };

struct meter_options {
  std::int64_t batch_size = 4096;  // bags per table per run
  std::uint64_t seed = 0;          // index traces
  protocol_options protocol{};
  kernel::pooling_mode pooling = kernel::pooling_mode::sum;
  std::uint64_t max_weight_bytes = std::uint64_t{256} << 20;  // per shard
  // The cache-flush buffer written before every run when protocol.flush is
  // on; 0: twice the last-level cache, 64 MiB when unknown (cache_flusher,
  // AutoShard Alg. 2, line 2). A machine that reports a large last-level
  // cache (a VM may report its host's: 480 MiB) then writes 960 MiB before
  // each run, far more than a small shard takes; a size of one's own keeps
  // the flush and bounds its cost.
  std::uint64_t flush_bytes = 0;
  float learning_rate = 0.01f;
  // Also time forward and backward each by themselves (AutoShard times the
  // pair; NeuroShard's data needs the parts). Off: only `total` is measured.
  bool separate = true;
  // Also time forward + backward in one run (shard_measurement::total). Off
  // with `separate` on: only the parts are measured (less time:
  // docs/design/meters.md); cpu_meter_cost, which prices the parts, turns it
  // off.
  bool together = true;
  meter_clock clock = meter_clock::wall;
  // The protocol is run `repeats` times on the same inputs and the run whose
  // trimmed mean is the median is kept (a median of protocol means, on top of
  // AutoShard's trimmed mean; 1 = the plain protocol). Costs `repeats` times
  // the time; damps a measurement that a burst of other work hit as a whole.
  int repeats = 1;
  // Drift reference (off by default: AutoShard's plain protocol). On: every
  // timed run is paired with a run (forward + backward) of reference_shard(),
  // and each time is scaled by reference_ms / that run's time
  // (meter/protocol.hpp, measure_referenced), so a shared machine's slow and
  // fast spells, which move both, cancel. Times are then milliseconds of the
  // machine in the state where the reference takes `reference_ms`; 0 = the
  // meter measures that itself before its first measurement (the median of 5
  // protocol means of the reference alone), which ties the scale to the
  // state at that moment: give the same value to every meter (every MPI rank,
  // every resumed run) whose figures must share one scale.
  bool reference = false;
  double reference_ms = 0.0;

  friend bool operator==(const meter_options&, const meter_options&) = default;
};

inline void validate(const meter_options& o) {
  if (o.batch_size < 1) embplan::detail::fail("meter.batch_size", o.batch_size, "a count >= 1");
  if (o.max_weight_bytes < (std::uint64_t{1} << 20)) {
    embplan::detail::fail("meter.max_weight_bytes", o.max_weight_bytes, "at least 1 MiB");
  }
  if (o.repeats < 1) embplan::detail::fail("meter.repeats", o.repeats, "a count >= 1");
  if (o.flush_bytes != 0 && o.flush_bytes < (std::uint64_t{1} << 20)) {
    embplan::detail::fail("meter.flush_bytes", o.flush_bytes,
                          "0 (twice the last-level cache) or at least 1 MiB");
  }
  if (!(o.reference_ms >= 0.0) || !std::isfinite(o.reference_ms)) {
    embplan::detail::fail("meter.reference_ms", o.reference_ms,
                          "a finite time >= 0 (0: measured by the meter)");
  }
  validate(o.protocol);
}

// The drift reference of meter_options::reference: one fp32 table of 2^20 rows
// and dim 32 (128 MiB, beyond a last-level cache), 16 lookups per bag, every
// index used once per batch (reuse bin 0): memory-bound gathers and scatters,
// like the shards it is paired with.
inline std::vector<table_spec> reference_shard() {
  table_spec t;
  t.name = "meter_reference";
  t.rows = std::int64_t{1} << 20;
  t.dim = 32;
  t.pooling_factor = 16.0;
  t.reuse_hist[0] = 1.0;
  return {t};
}

struct shard_measurement {
  measurement forward{};
  measurement backward{};
  measurement total{};               // forward + backward in one timed run
                                     // (forward/backward stay empty unless
                                     // meter_options::separate)
  std::int64_t lookups = 0;          // indices per run, all tables
  std::vector<std::int64_t> rows{};  // rows materialised per table (after the cap)
  std::uint64_t weight_bytes = 0;    // materialised
};

namespace detail {

// Rows kept per table so the shard's weights fit `budget` bytes: one common
// scale factor, never below 1 row, never above the table's own rows.
inline std::vector<std::int64_t> capped_rows(std::span<const table_spec> tables,
                                             std::uint64_t budget) {
  double total = 0.0;
  for (const auto& t : tables)
    total += static_cast<double>(t.rows) * t.dim * static_cast<double>(dtype_bytes(t.weight_dtype));
  const double scale =
      total > static_cast<double>(budget) ? static_cast<double>(budget) / total : 1.0;
  std::vector<std::int64_t> rows{};
  rows.reserve(tables.size());
  for (const auto& t : tables) {
    const auto r = static_cast<std::int64_t>(std::floor(static_cast<double>(t.rows) * scale));
    rows.push_back(std::clamp<std::int64_t>(r, 1, t.rows));
  }
  return rows;
}

}  // namespace detail

// What a meter runs for one shard: the layout of its (capped) tables and an
// index trace of `batch_size` bags per table. detail::prepare_shard makes one
// for a shard by itself; meter/shard_traces.hpp one whose tables' traces are
// shared with the other plans of the task.
struct prepared_shard {
  kernel::tbe_layout layout;
  data::tbe_trace trace;
  bool fp16 = false;
};

namespace detail {

// The checks of prepare_shard: valid tables, fp32 or fp16, one dtype per
// shard, dims that are multiples of `dim_multiple` (the CUDA kernel's
// 4-element vectors; 1 on the CPU).
inline void check_shard(std::span<const table_spec> tables, std::string_view meter_name,
                        std::int32_t dim_multiple) {
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const std::string where = "shard.tables[" + std::to_string(i) + "]";
    validate(tables[i], where);
    if (tables[i].weight_dtype == dtype::int8) {
      embplan::detail::fail(where + ".dtype", "int8",
                            "fp32 or fp16 (the " + std::string(meter_name) + "'s kernels)");
    }
    if (tables[i].weight_dtype != tables.front().weight_dtype) {
      embplan::detail::fail(where + ".dtype", to_string(tables[i].weight_dtype),
                            "the dtype of the shard's first table (" +
                                std::string(to_string(tables.front().weight_dtype)) + ")");
    }
    if (tables[i].dim % dim_multiple != 0) {
      embplan::detail::fail(where + ".dim", tables[i].dim,
                            "a multiple of " + std::to_string(dim_multiple) + " (the " +
                                std::string(meter_name) + "'s kernel loads rows as vectors)");
    }
  }
}

inline prepared_shard prepare_shard(std::span<const table_spec> tables, const meter_options& o,
                                    std::uint64_t seed, std::string_view meter_name,
                                    std::int32_t dim_multiple) {
  check_shard(tables, meter_name, dim_multiple);
  std::vector<table_spec> run_tables(tables.begin(), tables.end());
  const auto rows = capped_rows(tables, o.max_weight_bytes);
  std::vector<std::int32_t> dims{};
  for (std::size_t i = 0; i < run_tables.size(); ++i) {
    run_tables[i].rows = rows[i];
    dims.push_back(run_tables[i].dim);
  }
  prepared_shard p;
  p.layout = kernel::make_tbe_layout(rows, dims);
  p.trace = data::generate_tbe_trace(run_tables,
                                     data::trace_options{.batch_size = o.batch_size, .seed = seed});
  p.fp16 = !tables.empty() && tables.front().weight_dtype == dtype::fp16;
  return p;
}

// `one()` (a measurement) `repeats` times; the measurement whose mean is the
// median (meter_options::repeats).
template <class One>
measurement median_measurement(int repeats, One&& one) {
  std::vector<measurement> all{};
  all.reserve(static_cast<std::size_t>(repeats));
  for (int r = 0; r < repeats; ++r)
    all.push_back(one());
  const auto middle = all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2);
  std::nth_element(all.begin(), middle, all.end(), [](const measurement& x, const measurement& y) {
    return x.mean_ms < y.mean_ms;
  });
  return std::move(*middle);
}

// The protocol `repeats` times on the same inputs; the median measurement.
template <class Timer, class Run, class Before>
measurement median_of_repeats(Timer& timer, Run&& run, Before&& before,
                              const protocol_options& protocol, int repeats) {
  return median_measurement(repeats,
                            [&] { return embplan::meter::measure(timer, run, before, protocol); });
}

// Forward, backward (if o.separate) and both together (if o.together, or
// when the parts are not measured), each under `protocol`, and what was run:
// the common end of every meter's measure().
template <class Protocol, class Forward, class Backward>
shard_measurement measure_parts(const meter_options& o, Protocol&& protocol, Forward&& forward,
                                Backward&& backward, const kernel::tbe_layout& layout,
                                const data::tbe_trace& trace, std::size_t weight_size) {
  shard_measurement m;
  if (o.separate) {
    m.forward = protocol(forward);
    m.backward = protocol(backward);
  }
  if (o.together || !o.separate) {
    m.total = protocol([&] {
      forward();
      backward();
    });
  }
  m.lookups = static_cast<std::int64_t>(trace.indices.size());
  m.rows = layout.rows;
  m.weight_bytes = static_cast<std::uint64_t>(layout.total_weights()) * weight_size;
  return m;
}

}  // namespace detail

// Measures the tables of one device as one fused embedding bag. Each table is
// run with its own rows (capped, see above), dim, pooling factor and reuse
// histogram; fp32 or fp16 weights (all tables of a shard share one dtype).
// A shard_meter keeps its buffers (weights, outputs, the cache-flush buffer,
// the backward's workspace) from one measurement to the next, so a collection
// run does not pay page faults for every sample. One per thread.
class shard_meter {
 public:
  explicit shard_meter(const meter_options& o = {}) : options_((validate(o), o)) {
    if (options_.protocol.flush) flush_.emplace(static_cast<std::size_t>(options_.flush_bytes));
  }

  const meter_options& options() const noexcept { return options_; }
  // The cache-flush buffer's size (meter_options::flush_bytes, or its
  // default); 0 without protocol.flush, where none is allocated.
  std::size_t flush_buffer_bytes() const noexcept { return flush_ ? flush_->bytes() : 0; }

  // `seed` overrides options().seed for this measurement's index traces.
  shard_measurement measure(std::span<const table_spec> tables) {
    return measure(tables, options_.seed);
  }
  shard_measurement measure(std::span<const table_spec> tables, std::uint64_t seed) {
    const auto p = detail::prepare_shard(tables, options_, seed, "CPU meter", 1);
    if (options_.reference) prepare_reference();
    return p.fp16 ? run(p.layout, p.trace, weights_half_) : run(p.layout, p.trace, weights_float_);
  }

  // With meter_options::reference, the time of the reference shard the meter
  // scales to: the option's value or, when that is 0, the reference measured
  // by itself (the median of 5 protocol means) the first time this or
  // measure() is called. 0 with the reference off.
  double reference_ms() {
    if (!options_.reference) return 0.0;
    prepare_reference();
    return reference_->ms;
  }

 private:
  // The drift reference's shard and buffers, its own (its backward updates
  // its weights).
  struct reference_state {
    prepared_shard shard;
    kernel::cache_aligned_vector<float> weights;
    std::vector<float> output;
    std::vector<float> grad;
    kernel::backward_workspace workspace;
    double ms = 0.0;
  };

  void prepare_reference() {
    if (reference_) return;
    const meter_options& o = options_;
    auto r = std::make_unique<reference_state>();
    r->shard = detail::prepare_shard(reference_shard(), o, reference_seed, "CPU meter", 1);
    r->weights.assign(static_cast<std::size_t>(r->shard.layout.total_weights()), 0.0f);
    const auto out_size =
        static_cast<std::size_t>(r->shard.trace.batch_size * r->shard.layout.total_dim());
    r->output.assign(out_size, 0.0f);
    r->grad.assign(out_size, 1e-3f);
    r->ms = o.reference_ms;
    reference_ = std::move(r);
    if (reference_->ms == 0.0) {
      // Calibration: the reference alone, the median of 5 protocol means.
      const auto before = [&] {
        if (flush_) (*flush_)();
      };
      const auto run_reference = [&] { reference_run(); };
      const auto one = [&] {
        if (o.clock == meter_clock::thread_cpu) {
          thread_cpu_timer timer;
          return embplan::meter::measure(timer, run_reference, before, o.protocol);
        }
        steady_timer timer;
        return embplan::meter::measure(timer, run_reference, before, o.protocol);
      };
      reference_->ms = detail::median_measurement(5, one).mean_ms;
      // A clock that cannot see the reference cannot scale by it.
      if (!(reference_->ms > 0.0)) reference_->ms = 1.0;
    }
  }

  // One forward + backward of the reference shard.
  void reference_run() {
    reference_state& r = *reference_;
    const kernel::tbe_batch_view batch{.batch_size = r.shard.trace.batch_size,
                                       .indices = r.shard.trace.indices,
                                       .offsets = r.shard.trace.offsets};
    kernel::detail::forward_unchecked<float>(r.shard.layout, r.weights, batch, options_.pooling,
                                             r.output);
    kernel::detail::backward_sgd_unchecked<float>(r.shard.layout, r.weights, batch,
                                                  options_.pooling, r.grad, options_.learning_rate,
                                                  r.workspace);
  }

  static constexpr std::uint64_t reference_seed = 0x5eed'0f'4ef;

  template <class Weight>
  shard_measurement run(const kernel::tbe_layout& layout, const data::tbe_trace& trace,
                        kernel::cache_aligned_vector<Weight>& weights) {
    const meter_options& o = options_;
    // Zeros: the values do not change the timing (no denormals). One cache
    // line of touched zeros past the last row: a dim that is not a multiple
    // of the vector width is read with masked loads whose masked-off lanes
    // reach past the row, and where that is a page never touched the CPU
    // suppresses the fault with a microcode assist on every lookup (a tiny
    // table last in a shard then runs many times slower:
    // docs/design/meters.md, docs/measuring.md "Measured plan quality").
    weights.assign(
        static_cast<std::size_t>(layout.total_weights()) + kernel::slack_elements<Weight>,
        Weight{});
    const kernel::tbe_batch_view batch{
        .batch_size = trace.batch_size, .indices = trace.indices, .offsets = trace.offsets};
    kernel::validate(layout, batch);
    const auto out_size = static_cast<std::size_t>(trace.batch_size * layout.total_dim());
    output_.assign(out_size, 0.0f);
    grad_.assign(out_size, 1e-3f);

    const auto forward = [&] {
      kernel::detail::forward_unchecked<Weight>(layout, weights, batch, o.pooling, output_);
    };
    const auto backward = [&] {
      kernel::detail::backward_sgd_unchecked<Weight>(layout, weights, batch, o.pooling, grad_,
                                                     o.learning_rate, workspace_);
    };
    const auto before = [&] {
      if (flush_) (*flush_)();
    };
    const auto timed = [&](auto& timer, auto&& operation) {
      if (!o.reference) {
        return detail::median_of_repeats(timer, operation, before, o.protocol, o.repeats);
      }
      const auto reference = [&] { reference_run(); };
      return detail::median_measurement(o.repeats, [&] {
        return measure_referenced(timer, operation, reference, before, o.protocol, reference_->ms);
      });
    };
    const auto protocol = [&](auto&& operation) {
      if (o.clock == meter_clock::thread_cpu) {
        thread_cpu_timer timer;
        return timed(timer, operation);
      }
      steady_timer timer;
      return timed(timer, operation);
    };
    return detail::measure_parts(o, protocol, forward, backward, layout, trace, sizeof(Weight));
  }

  meter_options options_;
  std::optional<cache_flusher> flush_;  // engaged iff options_.protocol.flush
  kernel::cache_aligned_vector<float> weights_float_;
  kernel::cache_aligned_vector<kernel::half> weights_half_;
  std::vector<float> output_;
  std::vector<float> grad_;
  kernel::backward_workspace workspace_;
  std::unique_ptr<reference_state> reference_;
};

// One measurement with a meter of its own.
inline shard_measurement measure_shard(std::span<const table_spec> tables,
                                       const meter_options& o = {}) {
  return shard_meter(o).measure(tables);
}

// The reference shard's time now, under `o`'s protocol and clock (the median
// of 5 protocol means): a value for meter_options::reference_ms that every
// meter of a run then shares.
inline double calibrate_reference(meter_options o) {
  o.reference = true;
  o.reference_ms = 0.0;
  return shard_meter(o).reference_ms();
}

namespace detail {

// The shard_meters a cpu_meter_cost and its copies reuse. A meter keeps its
// buffers — the cache-flush buffer (twice the last-level cache: 600 MiB on a
// 300 MiB L3), the weights, the drift reference's shard and trace — so a plan
// priced device by device does not allocate and fault them in again for every
// device. One meter per concurrent caller: compute() takes one (or makes one)
// and puts it back; at most `kept` idle meters stay.
class shard_meter_pool {
 public:
  static constexpr std::size_t kept = 4;

  std::unique_ptr<shard_meter> take(const meter_options& o) {
    {
      const std::lock_guard lock(mutex_);
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        if ((*it)->options() == o) {
          auto m = std::move(*it);
          idle_.erase(it);
          return m;
        }
      }
    }
    return std::make_unique<shard_meter>(o);
  }

  void give_back(std::unique_ptr<shard_meter> m) {
    const std::lock_guard lock(mutex_);
    if (idle_.size() < kept) idle_.push_back(std::move(m));
  }

  std::size_t idle() const {
    const std::lock_guard lock(mutex_);
    return idle_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<shard_meter>> idle_;
};

}  // namespace detail

// The measured meter as a cost model: compute is measured on this CPU (times
// scaled from the meter's batch to the task's), communication comes from the
// analytic model (say so wherever the figures are shown). Use it with
// evaluate(task, plan, cpu_meter_cost{...}) to measure a plan, device by device.
// It times forward and backward (options.separate and .together are set so:
// the pair in one run is not measured, it is not priced), and reuses its
// meters' buffers across calls (copies share them; thread-safe).
struct cpu_meter_cost {
  meter_options options{};
  analytic_cost comm_model{};
  std::shared_ptr<detail::shard_meter_pool> meters = std::make_shared<detail::shard_meter_pool>();

  std::string_view name() const noexcept { return "cpu-meter"; }

  compute_cost compute(const task& t, std::span<const shard> group, std::size_t /*device*/) const {
    if (group.empty()) return {};
    if (options.reference && options.reference_ms == 0.0) {
      // Every device must be scaled to one reference time, not its own.
      embplan::detail::fail("meter.reference_ms", options.reference_ms,
                            "a time > 0 when cpu_meter_cost uses the drift reference "
                            "(meter::calibrate_reference gives one)");
    }
    std::vector<table_spec> specs;
    specs.reserve(group.size());
    for (const auto& s : group)
      specs.push_back(piece_table(t, s));  // core/plan.hpp
    meter_options o = options;
    o.batch_size = std::min(options.batch_size, t.batch_size);
    o.separate = true;
    o.together = false;
    shard_measurement m;
    if (meters) {
      auto meter = meters->take(o);
      m = meter->measure(specs);
      meters->give_back(std::move(meter));
    } else {
      m = measure_shard(specs, o);
    }
    const double scale = static_cast<double>(t.batch_size) / static_cast<double>(o.batch_size);
    return compute_cost{.fwd_ms = m.forward.mean_ms * scale, .bwd_ms = m.backward.mean_ms * scale};
  }

  double shard_cost(const task& t, const shard& s) const {
    const auto c = compute(t, std::span<const shard>(&s, 1), s.device);
    return c.fwd_ms + c.bwd_ms;
  }

  void communication(const task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<comm_cost> out) const {
    comm_model.communication(t, dim_sum, start_ms, out);
  }
};
static_assert(cost_model<cpu_meter_cost>);

}  // namespace embplan::inline EMBPLAN_ABI::meter
