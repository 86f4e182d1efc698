#pragma once
// The CUDA timer policy of the micro-benchmark: the same shape as the CPU
// timer (start(); stop_ms()), timing the work enqueued on one stream between
// the two calls with CUDA events, so host-side launch overhead and other
// streams' work stay out of the figure (AutoShard's protocol times the kernel).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <utility>

#include "embplan/kernel/detail/cuda_check.cuh"
#include "embplan/kernel/detail/device_buffer.cuh"
#include "embplan/meter/protocol.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter {

class cuda_event_timer {
 public:
  explicit cuda_event_timer(cudaStream_t stream) : stream_(stream) {
    EMBPLAN_CUDA_CHECK(cudaEventCreate(&start_));
    const cudaError_t status = cudaEventCreate(&stop_);
    if (status != cudaSuccess) {
      cudaEventDestroy(start_);
      kernel::detail::cuda_check(status, "cudaEventCreate(&stop_)");
    }
  }
  cuda_event_timer(const cuda_event_timer&) = delete;
  cuda_event_timer& operator=(const cuda_event_timer&) = delete;
  cuda_event_timer(cuda_event_timer&& other) noexcept
      : stream_(other.stream_)
      , start_(std::exchange(other.start_, nullptr))
      , stop_(std::exchange(other.stop_, nullptr)) {}
  cuda_event_timer& operator=(cuda_event_timer&& other) noexcept {
    if (this != &other) {
      destroy();
      stream_ = other.stream_;
      start_ = std::exchange(other.start_, nullptr);
      stop_ = std::exchange(other.stop_, nullptr);
    }
    return *this;
  }
  ~cuda_event_timer() { destroy(); }

  void start() { EMBPLAN_CUDA_CHECK(cudaEventRecord(start_, stream_)); }

  // Records the stop event, waits for it, and returns the milliseconds between
  // the two events (resolution about half a microsecond).
  double stop_ms() {
    EMBPLAN_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    EMBPLAN_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    EMBPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms);
  }

 private:
  void destroy() noexcept {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    start_ = nullptr;
    stop_ = nullptr;
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

static_assert(timer<cuda_event_timer>);

// The GPU's cache flush (AutoShard Alg. 2, line 2; protocol.hpp's
// cache_flusher on the CPU): a memset of four times the current device's L2,
// enqueued on `stream` before a timed run and outside its events. The buffer
// is allocated at the first flush, so constructing one makes no CUDA call.
class cuda_l2_flusher {
 public:
  void operator()(cudaStream_t stream = nullptr) {
    if (buffer_.capacity() == 0) {
      int device = 0;
      int l2 = 0;
      EMBPLAN_CUDA_CHECK(cudaGetDevice(&device));
      EMBPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
      buffer_.reserve(std::size_t{4} * static_cast<std::size_t>(std::max(l2, 1 << 20)));
    }
    EMBPLAN_CUDA_CHECK(cudaMemsetAsync(buffer_.data(), ++round_, buffer_.capacity(), stream));
  }

 private:
  kernel::detail::device_buffer<std::byte> buffer_;
  unsigned char round_ = 0;
};

}  // namespace embplan::inline EMBPLAN_ABI::meter
