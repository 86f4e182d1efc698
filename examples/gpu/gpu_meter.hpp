#pragma once
// The GPU meter behind a plain C++ interface: meter::cuda_shard_meter lives in
// gpu_meter.cu (compiled by nvcc), so the observation and collection drivers
// (examples/embplan/observe.hpp, collect.hpp) compile with the host compiler.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "embplan/core/table_spec.hpp"
#include "embplan/meter/cpu_meter.hpp"

namespace embplan_gpu {

// "<name>, <SMs> SMs, <GiB> GiB" of the current device, or an empty string
// (and `why` set to the runtime's text) when there is none.
std::string device_description(std::string& why);

// meter::cuda_meter_defaults(): batch 65,536 (the papers'), shards up to 8 GiB.
embplan::meter::meter_options meter_defaults();

class gpu_meter {
 public:
  explicit gpu_meter(const embplan::meter::meter_options& options);
  ~gpu_meter();
  gpu_meter(const gpu_meter&) = delete;
  gpu_meter& operator=(const gpu_meter&) = delete;

  const embplan::meter::meter_options& options() const noexcept;
  embplan::meter::shard_measurement measure(std::span<const embplan::table_spec> tables,
                                            std::uint64_t seed);
  // A shard laid out and traced already (meter/shard_traces.hpp).
  embplan::meter::shard_measurement measure(const embplan::meter::prepared_shard& shard);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace embplan_gpu
