#pragma once
// The GPU meter behind a plain C++ interface: bench::cuda_shard_meter lives in
// gpu_meter.cu (compiled by nvcc), so the observation and collection drivers
// (examples/embplan/observe.hpp, collect.hpp) compile with the host compiler.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "embplan/bench/cpu_meter.hpp"
#include "embplan/core/table_spec.hpp"

namespace embplan_gpu {

// "<name>, <SMs> SMs, <GiB> GiB" of the current device, or an empty string
// (and `why` set to the runtime's text) when there is none.
std::string device_description(std::string& why);

// bench::cuda_meter_defaults(): batch 65,536 (the papers'), shards up to 8 GiB.
embplan::bench::meter_options meter_defaults();

class gpu_meter {
 public:
  explicit gpu_meter(const embplan::bench::meter_options& options);
  ~gpu_meter();
  gpu_meter(const gpu_meter&) = delete;
  gpu_meter& operator=(const gpu_meter&) = delete;

  const embplan::bench::meter_options& options() const noexcept;
  embplan::bench::shard_measurement measure(std::span<const embplan::table_spec> tables,
                                            std::uint64_t seed);
  // A shard laid out and traced already (bench/shard_traces.hpp).
  embplan::bench::shard_measurement measure(const embplan::bench::prepared_shard& shard);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace embplan_gpu
