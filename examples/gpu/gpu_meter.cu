#include "gpu_meter.hpp"

#include <cuda_runtime.h>

#include <string>

#include "embplan/meter/cuda_meter.cuh"

namespace embplan_gpu {

std::string device_description(std::string& why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    why = status == cudaSuccess ? "0 devices" : cudaGetErrorString(status);
    return {};
  }
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    why = "cudaGetDeviceProperties failed";
    return {};
  }
  return std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, " +
         std::to_string(prop.totalGlobalMem >> 30) + " GiB, L2 " +
         std::to_string(prop.l2CacheSize >> 20) + " MiB";
}

embplan::meter::meter_options meter_defaults() {
  return embplan::meter::cuda_meter_defaults();
}

struct gpu_meter::impl {
  embplan::meter::cuda_shard_meter meter;
};

gpu_meter::gpu_meter(const embplan::meter::meter_options& options)
    : impl_(std::make_unique<impl>(impl{embplan::meter::cuda_shard_meter(options)})) {}
gpu_meter::~gpu_meter() = default;

const embplan::meter::meter_options& gpu_meter::options() const noexcept {
  return impl_->meter.options();
}

embplan::meter::shard_measurement gpu_meter::measure(std::span<const embplan::table_spec> tables,
                                                     std::uint64_t seed) {
  return impl_->meter.measure(tables, seed);
}

embplan::meter::shard_measurement gpu_meter::measure(const embplan::meter::prepared_shard& shard) {
  return impl_->meter.measure(shard);
}

}  // namespace embplan_gpu
