#pragma once
// The GPU meter: what meter/cpu_meter.hpp's shard_meter does, on the CUDA
// embedding bag (kernel/embedding_bag.cuh). A device's shard runs as one fused
// TBE on index traces generated from the tables' statistics
// (data/trace.hpp), timed under AutoShard's protocol (meter/protocol.hpp)
// with CUDA events (meter/cuda_timer.cuh): forward, backward (exact SGD) and
// forward + backward, each measured separately. This is the papers' own
// setting (AutoShard App. B.1 and NeuroShard §3.1 measured FBGEMM's TBE on
// GPUs), so the GPU meter needs none of the CPU meter's allowances but one:
//  - batch: meter_options::batch_size bags per table, as given (the papers
//    use 65,536; cuda_meter_defaults() sets it);
//  - rows: tables are shrunk to fit meter_options::max_weight_bytes (one
//    common factor), as on the CPU; a GPU holds far more, so set it high
//    (cuda_meter_defaults(): 8 GiB);
//  - the cache flush writes four times the device's L2 before every run,
//    outside the timed events (the buffer is allocated at the first
//    measurement, so bad tables are reported before any CUDA call);
//  - meter_options::clock is not used: CUDA events time the device;
//  - meter_options::reference (the CPU meter's drift reference) is refused.
// Weights are zeros on the device (the values do not change the time).
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "embplan/core/table_spec.hpp"
#include "embplan/data/trace.hpp"
#include "embplan/kernel/embedding_bag.cuh"
#include "embplan/kernel/tbe.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/meter/cuda_timer.cuh"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter {

// meter_options as the GPU meter's papers measured: B = 65,536 bags per table,
// shards up to 8 GiB of weights.
inline meter_options cuda_meter_defaults() {
  meter_options o;
  o.batch_size = 65536;
  o.max_weight_bytes = std::uint64_t{8} << 30;
  return o;
}

// Measures the tables of one device as one fused CUDA embedding bag on the
// current device. fp32 or fp16 weights (one dtype per shard); dims must be
// multiples of 4 (the kernel's vector loads). Keeps its flush buffer between
// measurements. One per thread (and per device).
class cuda_shard_meter {
 public:
  // Checks the options; the first CUDA call is in the first measure().
  explicit cuda_shard_meter(const meter_options& o = cuda_meter_defaults()) : options_(o) {
    validate(options_);
    if (options_.reference) {
      embplan::detail::fail("meter.reference", true,
                            "false: the GPU meter has no drift reference (CUDA events on a "
                            "device of its own repeat within 0.1 %)");
    }
  }

  const meter_options& options() const noexcept { return options_; }

  shard_measurement measure(std::span<const table_spec> tables) {
    return measure(tables, options_.seed);
  }
  shard_measurement measure(std::span<const table_spec> tables, std::uint64_t seed) {
    return measure(detail::prepare_shard(tables, options_, seed, "GPU meter", 4));
  }
  // A shard laid out and traced already (detail::prepare_shard, or
  // meter/shard_traces.hpp's prepare with dim multiple 4).
  shard_measurement measure(const prepared_shard& p) {
    return p.fp16 ? run<kernel::half>(p.layout, p.trace) : run<float>(p.layout, p.trace);
  }

 private:
  template <class Weight>
  shard_measurement run(const kernel::tbe_layout& layout, const data::tbe_trace& trace) {
    const meter_options& o = options_;
    kernel::device_tbe<Weight> tbe(layout, kernel::zero_weights);
    tbe.upload_batch(
        {.batch_size = trace.batch_size, .indices = trace.indices, .offsets = trace.offsets});
    const std::vector<float> grad(static_cast<std::size_t>(trace.batch_size * layout.total_dim()),
                                  1e-3f);
    tbe.upload_grad_output(grad);

    const auto forward = [&] { tbe.forward(o.pooling); };
    const auto backward = [&] { tbe.backward_sgd(o.pooling, o.learning_rate); };
    const auto before = [&] {
      if (o.protocol.flush) flush_();
    };
    const auto protocol = [&](auto&& operation) {
      cuda_event_timer timer(nullptr);
      return detail::median_of_repeats(timer, operation, before, o.protocol, o.repeats);
    };
    return detail::measure_parts(o, protocol, forward, backward, layout, trace, sizeof(Weight));
  }

  meter_options options_;
  cuda_l2_flusher flush_;
};

}  // namespace embplan::inline EMBPLAN_ABI::meter
