#pragma once
// The GPU meter as a cost model, for `embplan_gpu compare --meter cuda`: each
// device's shard runs as one fused CUDA embedding bag at the meter's batch
// (65,536 by default, the papers') and is timed forward and backward (times
// scaled by task batch / meter batch where they differ); communication from
// the analytic all-to-all model (one GPU here, no NCCL: said wherever the
// figures are shown). Each table's trace is drawn once per task and shared by
// every plan's shard that holds it (meter/shard_traces.hpp), so the plans of
// a task are timed on the same lookups. One GPU: calls are serialised (copies
// share the meter and its lock).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/meter/shard_traces.hpp"
#include "gpu_meter.hpp"

namespace embplan_gpu {

class gpu_meter_cost {
 public:
  // `options`: the meter's (meter::cuda_meter_defaults() and a protocol);
  // separate is forced on and together off, as the CPU meter's cost model does.
  explicit gpu_meter_cost(embplan::meter::meter_options options)
      : state_(std::make_shared<state>(with_parts(std::move(options)))) {}

  std::string_view name() const noexcept { return "cuda-meter"; }

  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> group,
                                std::size_t /*device*/) const {
    if (group.empty()) return {};
    const std::lock_guard lock(state_->mutex);
    embplan::meter::meter_options o = state_->meter.options();
    o.batch_size = std::min(o.batch_size, t.batch_size);
    const auto shard = state_->traces.prepare(t, group, o, "GPU meter", 4);
    const auto m = state_->meter.measure(shard);
    const double scale = static_cast<double>(t.batch_size) / static_cast<double>(o.batch_size);
    return {.fwd_ms = m.forward.mean_ms * scale, .bwd_ms = m.backward.mean_ms * scale};
  }

  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    const auto c = compute(t, std::span<const embplan::shard>(&s, 1), s.device);
    return c.fwd_ms + c.bwd_ms;
  }

  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    embplan::analytic_cost{}.communication(t, dim_sum, start_ms, out);
  }

  // Traces drawn so far (each table of each task once; tests and reports).
  std::size_t traces_drawn() const {
    const std::lock_guard lock(state_->mutex);
    return state_->traces.drawn();
  }

 private:
  static embplan::meter::meter_options with_parts(embplan::meter::meter_options o) {
    o.separate = true;
    o.together = false;
    return o;
  }
  struct state {
    explicit state(const embplan::meter::meter_options& o) : meter(o) {}
    std::mutex mutex;
    gpu_meter meter;
    embplan::meter::shard_traces traces;
  };
  std::shared_ptr<state> state_;
};
static_assert(embplan::cost_model<gpu_meter_cost>);

}  // namespace embplan_gpu
