#pragma once
// The CUDA embedding bag over the TBE layout (tbe.hpp): forward sum/mean pooling
// with optional per-sample weights, fp32 or fp16 weights accumulated in fp32,
// and an exact SGD backward (every gradient of a row summed, then applied once).
// It computes what the CPU reference (kernel/embedding_bag.hpp) computes.
//
// device_tbe owns the device copies of the weights, of one batch and of every
// scratch buffer. Inputs are checked on the host before anything is copied, so
// a bad index is an embplan::error naming table, position, value and rows,
// never a wild read on the device:
//
//   embplan::kernel::device_tbe<float> tbe(layout, host_weights);
//   tbe.forward(batch, pooling_mode::sum, stream);
//   tbe.download_output(output, stream);
//   tbe.backward_sgd(batch, pooling_mode::sum, grad_output, 0.01f, stream);
//
// For timing the kernels alone (meter/cuda_timer.cuh), upload once with
// upload_batch / upload_grad_output and call forward(mode, stream) /
// backward_sgd(mode, lr, stream), which only enqueue kernels.
#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/kernel/detail/cuda_check.cuh"
#include "embplan/kernel/detail/device_buffer.cuh"
#include "embplan/kernel/detail/embedding_bag_kernels.cuh"
#include "embplan/kernel/tbe.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel {

// Tag: construct a device_tbe with zero weights, copying none from the host.
struct zero_weights_t {
  explicit zero_weights_t() = default;
};
inline constexpr zero_weights_t zero_weights{};

// Knobs of the CUDA embedding bag.
struct device_tbe_options {
  int block_threads = 256;          // threads per block, a multiple of 32 in [32, 1024]
  std::int32_t segment_chunk = 32;  // lookups one thread group sums before a hot row is split
};

// What the CUDA kernels need beyond validate(): 4-element vectors per row.
inline void validate_for_cuda(const tbe_layout& layout) {
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const std::int32_t dim = layout.dims[static_cast<std::size_t>(t)];
    if (dim % 4 != 0) {
      embplan::detail::fail("tbe.tables[" + std::to_string(t) + "].dim", dim,
                            "a multiple of 4 (the CUDA kernel loads rows as 4-element vectors)");
    }
  }
}

// validate() plus the CUDA backward's limit: lookup positions are sorted as int32.
inline void validate_for_cuda(const tbe_layout& layout, const tbe_batch_view& batch) {
  validate_for_cuda(layout);
  // before validate(): it would ask for T x B + 1 offsets first
  if (layout.tables() > 0 && batch.batch_size > INT32_MAX / layout.tables()) {
    embplan::detail::fail(
        "tbe.batch_size", batch.batch_size,
        "at most (2^31 - 1) / tables = " + std::to_string(INT32_MAX / layout.tables()) +
            " (the CUDA backward keeps int32 bag ids)");
  }
  validate(layout, batch);
  if (batch.indices.size() > static_cast<std::size_t>(INT32_MAX)) {
    embplan::detail::fail(
        "tbe.indices.size", batch.indices.size(),
        "at most 2^31 - 1 lookups per batch (the CUDA backward sorts int32 positions)");
  }
}

inline void validate(const device_tbe_options& options) {
  if (options.block_threads < 32 || options.block_threads > 1024 ||
      options.block_threads % 32 != 0) {
    embplan::detail::fail("device_tbe_options.block_threads", options.block_threads,
                          "a multiple of 32 in [32, 1024]");
  }
  if (options.segment_chunk < 1) {
    embplan::detail::fail("device_tbe_options.segment_chunk", options.segment_chunk,
                          "a count >= 1");
  }
}

template <class Weight>
class device_tbe {
  static_assert(std::is_same_v<Weight, float> || std::is_same_v<Weight, half>,
                "device_tbe: weights are float or embplan::kernel::half");

 public:
  // Checks the layout (validate_for_cuda) and the weights' size before any CUDA
  // call, then copies layout and weights to the current device.
  device_tbe(const tbe_layout& layout, std::span<const Weight> host_weights,
             device_tbe_options options = {}, cudaStream_t stream = nullptr)
      : layout_(layout), options_(options) {
    validate(options_);
    validate_for_cuda(layout_);
    if (host_weights.size() != static_cast<std::size_t>(layout_.total_weights())) {
      embplan::detail::fail(
          "device_tbe.weights.size", host_weights.size(),
          "the layout's total weights (" + std::to_string(layout_.total_weights()) + ")");
    }
    init_device();
    weights_.upload(host_weights, stream);
    upload_layout(stream);
  }

  // Weights set to zero on the device, nothing copied from the host: for
  // timing (the values do not change the time) and for training from zeros.
  device_tbe(const tbe_layout& layout, zero_weights_t, device_tbe_options options = {},
             cudaStream_t stream = nullptr)
      : layout_(layout), options_(options) {
    validate(options_);
    validate_for_cuda(layout_);
    init_device();
    const auto count = static_cast<std::size_t>(layout_.total_weights());
    weights_.reserve(std::max<std::size_t>(count, 1));
    EMBPLAN_CUDA_CHECK(cudaMemsetAsync(weights_.data(), 0, count * sizeof(Weight), stream));
    upload_layout(stream);
  }

  const tbe_layout& layout() const noexcept { return layout_; }
  const device_tbe_options& options() const noexcept { return options_; }

  // ---- uploads (checked first)
  void upload_batch(const tbe_batch_view& batch, cudaStream_t stream = nullptr) {
    validate_for_cuda(layout_, batch);
    batch_ready_ = false;
    grad_ready_ = false;
    if (batch.batch_size != warp_offsets_batch_) {
      // Each table's bags start on a warp boundary: all groups of a warp share a width.
      std::vector<std::int64_t> warps(1, 0);
      for (const std::int32_t dim : layout_.dims) {
        const std::int64_t threads = batch.batch_size * index::lanes_per_bag(dim);
        warps.push_back(warps.back() + (threads + 31) / 32);
      }
      warp_offsets_.upload(std::span<const std::int64_t>(warps), stream);
      forward_threads_ = warps.back() * 32;
      warp_offsets_batch_ = batch.batch_size;
    }
    table_lookups_.clear();
    for (std::int64_t t = 0; t < layout_.tables(); ++t) {
      table_lookups_.push_back(batch.offsets[static_cast<std::size_t>((t + 1) * batch.batch_size)] -
                               batch.offsets[static_cast<std::size_t>(t * batch.batch_size)]);
    }
    indices_.upload(batch.indices, stream);
    offsets_.upload(batch.offsets, stream);
    per_sample_weights_.upload(batch.per_sample_weights, stream);
    batch_size_ = batch.batch_size;
    lookups_ = static_cast<std::int64_t>(batch.indices.size());
    has_per_sample_weights_ = !batch.per_sample_weights.empty();
    output_.reserve(static_cast<std::size_t>(output_size()));
    batch_ready_ = true;
  }

  void upload_grad_output(std::span<const float> grad_output, cudaStream_t stream = nullptr) {
    require_batch("upload_grad_output");
    if (grad_output.size() != static_cast<std::size_t>(output_size())) {
      embplan::detail::fail("grad_output.size", grad_output.size(),
                            "batch_size x total_dim = " + std::to_string(output_size()));
    }
    grad_output_.upload(grad_output, stream);
    grad_ready_ = true;
  }

  // ---- kernels
  // Pools every bag of the uploaded batch into the device output [B][total_dim].
  void forward(pooling_mode mode, cudaStream_t stream = nullptr) {
    require_batch("forward");
    if (forward_threads_ == 0) return;
    const detail::forward_args<Weight> args{
        .weights = weights_.data(),
        .weights_offsets = weights_offsets_.data(),
        .dims = dims_.data(),
        .d_offsets = d_offsets_.data(),
        .warp_offsets = warp_offsets_.data(),
        .indices = indices_.data(),
        .offsets = offsets_.data(),
        .per_sample_weights = has_per_sample_weights_ ? per_sample_weights_.data() : nullptr,
        .output = output_.data(),
        .tables = layout_.tables(),
        .batch_size = batch_size_,
        .total_dim = layout_.total_dim(),
        .mode = mode,
    };
    const std::int64_t blocks =
        (forward_threads_ + options_.block_threads - 1) / options_.block_threads;
    if (blocks > INT_MAX) {
      embplan::detail::fail("tbe.batch_size", batch_size_,
                            "a batch whose forward grid fits 2^31 blocks");
    }
    detail::embedding_bag_forward_kernel<Weight>
        <<<static_cast<unsigned>(blocks), static_cast<unsigned>(options_.block_threads), 0,
           stream>>>(args);
    EMBPLAN_CUDA_CHECK(cudaGetLastError());
  }

  void forward(const tbe_batch_view& batch, pooling_mode mode, cudaStream_t stream = nullptr) {
    upload_batch(batch, stream);
    forward(mode, stream);
  }

  // Exact SGD on the uploaded batch and gradient: linearise rows (and note each
  // lookup's bag), radix-sort (row, position) pairs over only the bits
  // total_rows needs, run-length encode into segments, scan for segment and
  // chunk starts, map work items to segments (a max-scan over segment heads)
  // and tables to work ranges, then sum and apply, one launch per table at the
  // table's width.
  void backward_sgd(pooling_mode mode, float learning_rate, cudaStream_t stream = nullptr) {
    require_batch("backward_sgd");
    if (!grad_ready_) {
      embplan::detail::fail("device_tbe.grad_output", "none",
                            "upload_grad_output before backward_sgd");
    }
    if (!std::isfinite(learning_rate)) {
      embplan::detail::fail("embedding_bag.learning_rate", learning_rate, "a finite number");
    }
    if (lookups_ == 0) return;
    const auto n = static_cast<std::size_t>(lookups_);
    const auto items = static_cast<std::int32_t>(lookups_);
    reserve_backward(n, stream);

    const unsigned block = static_cast<unsigned>(options_.block_threads);
    const unsigned flat_blocks = grid_blocks(lookups_);
    detail::linearize_kernel<std::int64_t><<<flat_blocks, block, 0, stream>>>(
        indices_.data(), offsets_.data(), row_offsets_.data(), batch_size_,
        layout_.tables() * batch_size_, lookups_, keys_.data(), positions_.data(), bag_of_.data());
    EMBPLAN_CUDA_CHECK(cudaGetLastError());

    std::size_t temp_bytes = temp_.capacity();
    EMBPLAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        temp_.data(), temp_bytes, keys_.data(), sorted_keys_.data(), positions_.data(),
        sorted_positions_.data(), items, 0, index::radix_end_bit(layout_.total_rows()), stream));
    // keys_ is free again: it receives the unique rows
    temp_bytes = temp_.capacity();
    EMBPLAN_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(
        temp_.data(), temp_bytes, sorted_keys_.data(), keys_.data(), lengths_.data(),
        num_segments_.data(), items, stream));
    detail::plan_segments_kernel<std::int32_t><<<flat_blocks, block, 0, stream>>>(
        lengths_.data(), chunks_.data(), num_segments_.data(), lookups_, options_.segment_chunk);
    EMBPLAN_CUDA_CHECK(cudaGetLastError());
    temp_bytes = temp_.capacity();
    EMBPLAN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.data(), temp_bytes, lengths_.data(),
                                                     segment_starts_.data(), items, stream));
    temp_bytes = temp_.capacity();
    EMBPLAN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.data(), temp_bytes, chunks_.data(),
                                                     chunk_starts_.data(), items, stream));
    // positions_ is free again (the sort wrote sorted_positions_): the heads
    EMBPLAN_CUDA_CHECK(cudaMemsetAsync(positions_.data(), 0, n * sizeof(std::int32_t), stream));
    detail::mark_segment_heads_kernel<std::int32_t><<<flat_blocks, block, 0, stream>>>(
        chunk_starts_.data(), num_segments_.data(), positions_.data());
    EMBPLAN_CUDA_CHECK(cudaGetLastError());
    temp_bytes = temp_.capacity();
    EMBPLAN_CUDA_CHECK(cub::DeviceScan::InclusiveScan(temp_.data(), temp_bytes, positions_.data(),
                                                      chunk_segment_.data(), detail::max_op{},
                                                      items, stream));
    detail::table_work_kernel<<<grid_blocks(layout_.tables() + 1), block, 0, stream>>>(
        keys_.data(), chunks_.data(), chunk_starts_.data(), num_segments_.data(),
        row_offsets_.data(), layout_.tables(), table_work_.data());
    EMBPLAN_CUDA_CHECK(cudaGetLastError());

    detail::backward_args<Weight> args{
        .weights = weights_.data(),
        .weights_offsets = weights_offsets_.data(),
        .dims = dims_.data(),
        .d_offsets = d_offsets_.data(),
        .row_offsets = row_offsets_.data(),
        .offsets = offsets_.data(),
        .per_sample_weights = has_per_sample_weights_ ? per_sample_weights_.data() : nullptr,
        .grad_output = grad_output_.data(),
        .unique_rows = keys_.data(),
        .segment_lengths = lengths_.data(),
        .segment_starts = segment_starts_.data(),
        .segment_chunks = chunks_.data(),
        .chunk_starts = chunk_starts_.data(),
        .num_segments = num_segments_.data(),
        .sorted_positions = sorted_positions_.data(),
        .bag_of = bag_of_.data(),
        .chunk_segment = chunk_segment_.data(),
        .table_work = table_work_.data(),
        .scratch = scratch_.data(),
        .arrivals = arrivals_.data(),
        .table = 0,
        .batch_size = batch_size_,
        .total_dim = layout_.total_dim(),
        .max_dim = max_dim_,
        .chunk = options_.segment_chunk,
        .lanes = 8,
        .mode = mode,
        .learning_rate = learning_rate,
    };
    // One launch per table at its own width. A table has at most as many work
    // items as lookups (every chunk holds one); the kernel reads its true range
    // on the device (table_work) and strides over it.
    scratch_clean_ = false;
    for (std::int64_t t = 0; t < layout_.tables(); ++t) {
      const std::int64_t table_lookups = table_lookups_[static_cast<std::size_t>(t)];
      if (table_lookups == 0) continue;
      args.table = t;
      args.lanes = index::lanes_per_bag(layout_.dims[static_cast<std::size_t>(t)]);
      detail::embedding_bag_backward_sgd_kernel<Weight>
          <<<grid_blocks(table_lookups * args.lanes), block, 0, stream>>>(args);
      EMBPLAN_CUDA_CHECK(cudaGetLastError());
    }
    scratch_clean_ = true;  // the kernels leave scratch and counters zero
  }

  void backward_sgd(const tbe_batch_view& batch, pooling_mode mode,
                    std::span<const float> grad_output, float learning_rate,
                    cudaStream_t stream = nullptr) {
    upload_batch(batch, stream);
    upload_grad_output(grad_output, stream);
    backward_sgd(mode, learning_rate, stream);
  }

  // ---- results (return when the data has arrived)
  void download_output(std::span<float> output, cudaStream_t stream = nullptr) const {
    require_batch("download_output");
    if (output.size() != static_cast<std::size_t>(output_size())) {
      embplan::detail::fail("output.size", output.size(),
                            "batch_size x total_dim = " + std::to_string(output_size()));
    }
    output_.download(output, stream);
  }
  void download_weights(std::span<Weight> weights, cudaStream_t stream = nullptr) const {
    if (weights.size() != static_cast<std::size_t>(layout_.total_weights())) {
      embplan::detail::fail(
          "weights.size", weights.size(),
          "the layout's total weights (" + std::to_string(layout_.total_weights()) + ")");
    }
    weights_.download(weights, stream);
  }

  const float* device_output() const noexcept { return output_.data(); }
  const Weight* device_weights() const noexcept { return weights_.data(); }

 private:
  std::int64_t output_size() const noexcept { return batch_size_ * layout_.total_dim(); }

  void init_device() {
    max_dim_ = layout_.dims.empty() ? 4 : *std::ranges::max_element(layout_.dims);
    int device = 0;
    EMBPLAN_CUDA_CHECK(cudaGetDevice(&device));
    EMBPLAN_CUDA_CHECK(
        cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device));
  }

  void upload_layout(cudaStream_t stream) {
    dims_.upload(std::span<const std::int32_t>(layout_.dims), stream);
    weights_offsets_.upload(std::span<const std::int64_t>(layout_.weights_offsets), stream);
    d_offsets_.upload(std::span<const std::int64_t>(layout_.d_offsets), stream);
    row_offsets_.upload(std::span<const std::int64_t>(layout_.row_offsets), stream);
    EMBPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void require_batch(const char* call) const {
    if (!batch_ready_) {
      embplan::detail::fail("device_tbe.batch", "none", std::string("upload_batch before ") + call);
    }
  }

  // Enough blocks for `threads`, capped where the grid-stride loops take over.
  unsigned grid_blocks(std::int64_t threads) const {
    const std::int64_t block = options_.block_threads;
    const std::int64_t cap = std::int64_t{multiprocessors_} * (2048 / block) * 4;
    return static_cast<unsigned>(std::clamp<std::int64_t>((threads + block - 1) / block, 1, cap));
  }

  void reserve_backward(std::size_t n, cudaStream_t stream) {
    keys_.reserve(n);
    sorted_keys_.reserve(n);
    positions_.reserve(n);
    sorted_positions_.reserve(n);
    lengths_.reserve(n);
    chunks_.reserve(n);
    segment_starts_.reserve(n);
    chunk_starts_.reserve(n);
    bag_of_.reserve(n);
    chunk_segment_.reserve(n);
    table_work_.reserve(static_cast<std::size_t>(layout_.tables()) + 1);
    num_segments_.reserve(1);
    const auto hot = static_cast<std::size_t>(
        detail::hot_rows_bound(static_cast<std::int64_t>(n), options_.segment_chunk));
    const std::size_t scratch = hot * static_cast<std::size_t>(max_dim_);
    if (scratch_.capacity() < scratch || arrivals_.capacity() < hot) {
      scratch_.reserve(scratch);
      arrivals_.reserve(hot);
      scratch_clean_ = false;
    }
    if (!scratch_clean_) {
      EMBPLAN_CUDA_CHECK(
          cudaMemsetAsync(scratch_.data(), 0, scratch_.capacity() * sizeof(float), stream));
      EMBPLAN_CUDA_CHECK(cudaMemsetAsync(arrivals_.data(), 0,
                                         arrivals_.capacity() * sizeof(std::int32_t), stream));
      scratch_clean_ = true;
    }

    const auto items = static_cast<std::int32_t>(n);
    std::size_t need = 0;
    std::size_t bytes = 0;
    EMBPLAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, bytes, keys_.data(), sorted_keys_.data(), positions_.data(),
        sorted_positions_.data(), items, 0, index::radix_end_bit(layout_.total_rows()), stream));
    need = std::max(need, bytes);
    EMBPLAN_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, bytes, sorted_keys_.data(),
                                                          keys_.data(), lengths_.data(),
                                                          num_segments_.data(), items, stream));
    need = std::max(need, bytes);
    EMBPLAN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, lengths_.data(),
                                                     segment_starts_.data(), items, stream));
    need = std::max(need, bytes);
    EMBPLAN_CUDA_CHECK(cub::DeviceScan::InclusiveScan(
        nullptr, bytes, positions_.data(), chunk_segment_.data(), detail::max_op{}, items, stream));
    need = std::max(need, bytes);
    temp_.reserve(std::max<std::size_t>(need, 1));  // a null pointer would mean "query" to CUB
  }

  tbe_layout layout_;
  device_tbe_options options_;
  std::int64_t max_dim_ = 4;
  int multiprocessors_ = 1;

  detail::device_buffer<Weight> weights_;
  detail::device_buffer<std::int32_t> dims_;
  detail::device_buffer<std::int64_t> weights_offsets_;
  detail::device_buffer<std::int64_t> d_offsets_;
  detail::device_buffer<std::int64_t> row_offsets_;

  // the uploaded batch
  detail::device_buffer<std::int64_t> indices_;
  detail::device_buffer<std::int64_t> offsets_;
  detail::device_buffer<float> per_sample_weights_;
  detail::device_buffer<std::int64_t> warp_offsets_;
  detail::device_buffer<float> output_;
  detail::device_buffer<float> grad_output_;
  std::int64_t batch_size_ = 0;
  std::int64_t lookups_ = 0;
  std::int64_t warp_offsets_batch_ = -1;
  std::int64_t forward_threads_ = 0;
  bool has_per_sample_weights_ = false;
  bool batch_ready_ = false;
  bool grad_ready_ = false;

  // backward workspace
  detail::device_buffer<std::int64_t> keys_;  // linear rows, then the unique rows
  detail::device_buffer<std::int64_t> sorted_keys_;
  detail::device_buffer<std::int32_t> positions_;
  detail::device_buffer<std::int32_t> sorted_positions_;
  detail::device_buffer<std::int32_t> lengths_;
  detail::device_buffer<std::int32_t> chunks_;
  detail::device_buffer<std::int32_t> segment_starts_;
  detail::device_buffer<std::int32_t> chunk_starts_;
  detail::device_buffer<std::int32_t> num_segments_;
  detail::device_buffer<std::int32_t> bag_of_;         // per position
  detail::device_buffer<std::int32_t> chunk_segment_;  // per work item
  detail::device_buffer<std::int64_t> table_work_;     // T+1
  std::vector<std::int64_t> table_lookups_;            // per table, of the uploaded batch
  detail::device_buffer<float> scratch_;
  detail::device_buffer<std::int32_t> arrivals_;
  detail::device_buffer<std::byte> temp_;
  bool scratch_clean_ = false;
};

}  // namespace embplan::inline EMBPLAN_ABI::kernel
