#pragma once
// An owning, growable device allocation: the device_tbe keeps one per array so
// buffers are allocated once and reused across batches of the same size or
// smaller.
#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "embplan/kernel/detail/cuda_check.cuh"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t count) { reserve(count); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
  }
  ~device_buffer() { release(); }

  // Grows to at least `count` elements; the old contents are not kept.
  // cudaFree synchronises the device, so no kernel still reads the old block.
  void reserve(std::size_t count) {
    if (count <= capacity_) return;
    release();
    void* p = nullptr;
    EMBPLAN_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    data_ = static_cast<T*>(p);
    capacity_ = count;
  }

  // Host -> device, enqueued on `stream`. From pageable memory the runtime
  // stages the copy before returning, so `host` may go away afterwards.
  void upload(std::span<const T> host, cudaStream_t stream) {
    reserve(host.size());
    if (host.empty()) return;
    EMBPLAN_CUDA_CHECK(
        cudaMemcpyAsync(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream));
  }

  // Device -> host of the first host.size() elements; returns when they arrived.
  void download(std::span<T> host, cudaStream_t stream) const {
    if (host.size() > capacity_) {
      embplan::detail::fail("device_buffer.download.size", host.size(),
                            "at most the buffer's " + std::to_string(capacity_) + " elements");
    }
    if (host.empty()) return;
    EMBPLAN_CUDA_CHECK(
        cudaMemcpyAsync(host.data(), data_, host.size_bytes(), cudaMemcpyDeviceToHost, stream));
    EMBPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  void release() noexcept {
    if (data_ != nullptr) cudaFree(data_);  // a failure here has no one to report to
    data_ = nullptr;
    capacity_ = 0;
  }

  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail
