#pragma once
// The CUDA kernels behind kernel/embedding_bag.cuh (docs/measuring.md,
// "Kernels"; docs/design/embedding-bag-kernels.md). All index arithmetic is
// kernel::index (tbe.hpp) and detail::segment_of / table_work_begin
// (cuda_index.hpp), which the CPU tests exercise. Kernels are templates so
// this header can sit in several TUs.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "embplan/kernel/detail/cuda_index.hpp"
#include "embplan/kernel/tbe.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

// ---------------------------------------------------------------- 4-element vectors
// Every row start is a multiple of 4 elements (dims are, and so are the
// weights offsets), so a row's vector v is 16-byte (fp32) or 8-byte (fp16) aligned.
__device__ inline float half_bits_to_float(unsigned bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
}
__device__ inline unsigned float_to_half_bits(float f) {
  return __half_as_ushort(__float2half_rn(f));  // round to nearest even, as kernel::to_half
}

__device__ inline float4 load4(const float* p) {
  return __ldg(reinterpret_cast<const float4*>(p));
}
__device__ inline float4 load4(const half* p) {
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
  return make_float4(half_bits_to_float(raw.x), half_bits_to_float(raw.x >> 16),
                     half_bits_to_float(raw.y), half_bits_to_float(raw.y >> 16));
}

// acc = fma(scale, x, acc) per element: the CPU reference's fma(psw, w, acc)
// (with scale 1, exactly acc + x), in the same lookup order.
__device__ inline void fma4(float4& acc, float scale, float4 x) {
  acc.x = __fmaf_rn(scale, x.x, acc.x);
  acc.y = __fmaf_rn(scale, x.y, acc.y);
  acc.z = __fmaf_rn(scale, x.z, acc.z);
  acc.w = __fmaf_rn(scale, x.w, acc.w);
}

// w = fma(-lr, g, w) in fp32 (fp16: from the exact widening, rounded to half
// once), the CPU reference's order of operations, so untouched by reassociation
// the two agree bit for bit.
__device__ inline void sgd4(float* p, float4 g, float learning_rate) {
  auto* v = reinterpret_cast<float4*>(p);
  float4 w = *v;
  w.x = __fmaf_rn(-learning_rate, g.x, w.x);
  w.y = __fmaf_rn(-learning_rate, g.y, w.y);
  w.z = __fmaf_rn(-learning_rate, g.z, w.z);
  w.w = __fmaf_rn(-learning_rate, g.w, w.w);
  *v = w;
}
__device__ inline void sgd4(half* p, float4 g, float learning_rate) {
  auto* v = reinterpret_cast<uint2*>(p);
  const uint2 raw = *v;
  const float w0 = __fmaf_rn(-learning_rate, g.x, half_bits_to_float(raw.x));
  const float w1 = __fmaf_rn(-learning_rate, g.y, half_bits_to_float(raw.x >> 16));
  const float w2 = __fmaf_rn(-learning_rate, g.z, half_bits_to_float(raw.y));
  const float w3 = __fmaf_rn(-learning_rate, g.w, half_bits_to_float(raw.y >> 16));
  *v = make_uint2(float_to_half_bits(w0) | (float_to_half_bits(w1) << 16),
                  float_to_half_bits(w2) | (float_to_half_bits(w3) << 16));
}

// The lanes of this thread's group of `lanes` (a power of two <= 32, groups
// aligned within the warp): shuffles name only them, so neighbouring groups
// with other bag lengths never wait on each other.
__device__ inline unsigned group_mask(int lanes) {
  if (lanes >= 32) return 0xffffffffu;
  const unsigned lane = threadIdx.x & 31u;
  return ((1u << lanes) - 1u) << (lane & ~static_cast<unsigned>(lanes - 1));
}

__device__ inline std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_threads() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// ---------------------------------------------------------------- forward
template <class Weight>
struct forward_args {
  const Weight* weights;
  const std::int64_t* weights_offsets;  // T+1
  const std::int32_t* dims;             // T
  const std::int64_t* d_offsets;        // T+1
  const std::int64_t* warp_offsets;     // T+1: first warp of each table's bags
  const std::int64_t* indices;
  const std::int64_t* offsets;      // T*B+1
  const float* per_sample_weights;  // nullptr: all 1
  float* output;                    // [B][total_dim]
  std::int64_t tables;
  std::int64_t batch_size;
  std::int64_t total_dim;
  pooling_mode mode;
};

// One group of index::lanes_per_bag(dim) lanes per bag; each table's bags start
// on a warp boundary (warp_offsets), so a warp's groups share one width. Lane l
// owns 4-element vectors l, l + lanes, ... of the row; the group loads `lanes`
// indices at once and broadcasts each row start by shuffle.
template <class Weight>
__global__ void embedding_bag_forward_kernel(const forward_args<Weight> a) {
  const std::int64_t thread = global_thread();
  const std::int64_t warp = thread / 32;
  if (warp >= a.warp_offsets[a.tables]) return;  // the whole warp
  const std::int64_t t = segment_of(a.warp_offsets, a.tables, warp);
  const std::int32_t dim = a.dims[t];
  const int lanes = index::lanes_per_bag(dim);
  const std::int64_t local = thread - a.warp_offsets[t] * 32;
  const std::int64_t b = local / lanes;
  if (b >= a.batch_size) return;  // padding up to the warp boundary: whole groups
  const int lane = static_cast<int>(local % lanes);
  const unsigned mask = group_mask(lanes);

  const std::int64_t bag = index::bag(t, b, a.batch_size);
  const std::int64_t begin = a.offsets[bag];
  const std::int64_t end = a.offsets[bag + 1];
  const float scale = index::bag_scale(a.mode, end - begin);
  const std::int64_t weights_offset = a.weights_offsets[t];
  float* out = a.output + index::output_offset(b, a.total_dim, a.d_offsets[t]);
  const int vectors = dim / 4;

  for (int v0 = 0; v0 < vectors; v0 += lanes) {
    const int v = v0 + lane;
    const bool active = v < vectors;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (std::int64_t i0 = begin; i0 < end; i0 += lanes) {
      const std::int64_t i = i0 + lane;
      std::int64_t row_start = 0;
      float sample_weight = 1.0f;
      if (i < end) {
        row_start = index::weight_offset(weights_offset, a.indices[i], dim);
        if (a.per_sample_weights != nullptr) sample_weight = a.per_sample_weights[i];
      }
      const int n = end - i0 < lanes ? static_cast<int>(end - i0) : lanes;
#pragma unroll 4
      for (int j = 0; j < n; ++j) {
        const std::int64_t r = __shfl_sync(mask, row_start, j, lanes);
        const float s = __shfl_sync(mask, sample_weight, j, lanes);
        if (active) fma4(acc, s, load4(a.weights + r + 4 * v));
      }
    }
    if (active) {
      *reinterpret_cast<float4*>(out + 4 * v) =
          make_float4(acc.x * scale, acc.y * scale, acc.z * scale, acc.w * scale);
    }
  }
}

// ---------------------------------------------------------------- backward
// Key and value of the radix sort: the linearised row of every lookup and the
// lookup's position; and the bag of every position, found here once (a search
// of the offsets) so the SGD kernel gathers it instead of searching again.
template <class Key>
__global__ void linearize_kernel(const std::int64_t* indices, const std::int64_t* offsets,
                                 const std::int64_t* row_offsets, std::int64_t batch_size,
                                 std::int64_t bags, std::int64_t lookups, Key* keys,
                                 std::int32_t* positions, std::int32_t* bag_of) {
  for (std::int64_t p = global_thread(); p < lookups; p += grid_threads()) {
    const std::int64_t bag = segment_of(offsets, bags, p);
    const std::int64_t t = index::bag_table(bag, batch_size);
    keys[p] = static_cast<Key>(index::linear_row(row_offsets[t], indices[p]));
    positions[p] = static_cast<std::int32_t>(p);
    bag_of[p] = static_cast<std::int32_t>(bag);
  }
}

// After run-length encoding: chunks per segment (index::segment_chunks), and
// zeros past the last segment so the scans over all `capacity` entries see
// only real segments (the segment count stays on the device: no host sync).
template <class Count>
__global__ void plan_segments_kernel(Count* lengths, Count* chunks, const Count* num_segments,
                                     std::int64_t capacity, std::int64_t chunk) {
  const std::int64_t segments = *num_segments;
  for (std::int64_t s = global_thread(); s < capacity; s += grid_threads()) {
    if (s < segments) {
      chunks[s] = static_cast<Count>(index::segment_chunks(lengths[s], chunk));
    } else {
      lengths[s] = 0;
      chunks[s] = 0;
    }
  }
}

// Each work item's segment, so the SGD kernel reads it instead of searching
// chunk_starts: the first chunk of segment s is marked with s here (heads is
// zero elsewhere), and an inclusive max-scan (cub::DeviceScan with max_op)
// carries each mark over the segment's other chunks. Parallel in the work
// items: a hot row of 100,000 chunks costs what 100,000 cold rows cost (a
// thread per segment writing its chunks serialises on such a row;
// docs/design/embedding-bag-kernels.md).
template <class Count>
__global__ void mark_segment_heads_kernel(const Count* chunk_starts, const Count* num_segments,
                                          Count* heads) {
  const std::int64_t segments = *num_segments;
  for (std::int64_t s = global_thread(); s < segments; s += grid_threads())
    heads[chunk_starts[s]] = static_cast<Count>(s);
}

struct max_op {
  template <class T>
  __host__ __device__ T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
};

// table_work[t] = the first work item of table t, t in [0, tables]
// (detail::table_work_begin; table_work[tables] = all work items).
__global__ void table_work_kernel(const std::int64_t* unique_rows, const std::int32_t* chunks,
                                  const std::int32_t* chunk_starts,
                                  const std::int32_t* num_segments, const std::int64_t* row_offsets,
                                  std::int64_t tables, std::int64_t* table_work) {
  const std::int64_t segments = *num_segments;
  const std::int64_t total =
      segments > 0 ? std::int64_t{chunk_starts[segments - 1]} + chunks[segments - 1] : 0;
  for (std::int64_t t = global_thread(); t <= tables; t += grid_threads()) {
    table_work[t] =
        t == tables ? total
                    : table_work_begin(unique_rows, chunk_starts, segments, total, row_offsets[t]);
  }
}

template <class Weight>
struct backward_args {
  Weight* weights;
  const std::int64_t* weights_offsets;  // T+1
  const std::int32_t* dims;             // T
  const std::int64_t* d_offsets;        // T+1
  const std::int64_t* row_offsets;      // T+1
  const std::int64_t* offsets;          // T*B+1
  const float* per_sample_weights;      // nullptr: all 1
  const float* grad_output;             // [B][total_dim]
  const std::int64_t* unique_rows;      // per segment: its linear row
  const std::int32_t* segment_lengths;
  const std::int32_t* segment_starts;
  const std::int32_t* segment_chunks;
  const std::int32_t* chunk_starts;
  const std::int32_t* num_segments;
  const std::int32_t* sorted_positions;  // lookup positions, grouped by row
  const std::int32_t* bag_of;            // per position: its bag (linearize_kernel)
  const std::int32_t* chunk_segment;     // per work item: its segment (mark_segment_heads_kernel)
  const std::int64_t* table_work;        // T+1: each table's first work item (table_work_kernel)
  float* scratch;                        // hot rows' partial sums; all zero between calls
  std::int32_t* arrivals;                // chunks of a hot row done so far; all zero between calls
  std::int64_t table;                    // this launch's table
  std::int64_t batch_size;
  std::int64_t total_dim;
  std::int64_t max_dim;
  std::int64_t chunk;  // lookups per work item
  int lanes;           // index::lanes_per_bag(dims[table])
  pooling_mode mode;
  float learning_rate;
};

// One launch per table, with the table's own group width: a work item is up to
// `chunk` lookups of one row of that table, one group of `lanes` lanes each
// (a fused shard's dim-4 table is not run at a dim-128 table's width). A row
// with one chunk is updated directly (w -= lr * sum); a hot row's chunks add
// their sums into a scratch row with atomics, and the chunk that arrives last
// applies the total, once, and zeroes the scratch again (the
// threadfence-reduction pattern). A work item reads its segment
// (chunk_segment) and each lookup's bag (bag_of), both precomputed, and lanes
// broadcast each gradient row and scale by shuffle.
template <class Weight>
__global__ void embedding_bag_backward_sgd_kernel(const backward_args<Weight> a) {
  const int lanes = a.lanes;
  const std::int64_t thread = global_thread();
  const std::int64_t groups = grid_threads() / lanes;
  const int lane = static_cast<int>(thread % lanes);
  const unsigned mask = group_mask(lanes);

  const std::int64_t t = a.table;
  const std::int32_t dim = a.dims[t];
  const int vectors = dim / 4;
  const std::int64_t weights_offset = a.weights_offsets[t];
  const std::int64_t first_row = a.row_offsets[t];
  const std::int64_t d_offset = a.d_offsets[t];
  const std::int64_t work_end = a.table_work[t + 1];
  for (std::int64_t w = a.table_work[t] + thread / lanes; w < work_end; w += groups) {
    const std::int64_t s = a.chunk_segment[w];
    const std::int32_t chunks = a.segment_chunks[s];
    const std::int64_t first =
        std::int64_t{a.segment_starts[s]} + (w - a.chunk_starts[s]) * a.chunk;
    const std::int64_t segment_end = std::int64_t{a.segment_starts[s]} + a.segment_lengths[s];
    const std::int64_t last = first + a.chunk < segment_end ? first + a.chunk : segment_end;

    Weight* row =
        a.weights + index::weight_offset(weights_offset, a.unique_rows[s] - first_row, dim);
    const std::int64_t rank = hot_rank(a.chunk_starts[s], s);
    float* partial = a.scratch + rank * a.max_dim;

    for (int v0 = 0; v0 < vectors; v0 += lanes) {
      const int v = v0 + lane;
      const bool active = v < vectors;
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (std::int64_t i0 = first; i0 < last; i0 += lanes) {
        const std::int64_t i = i0 + lane;
        std::int64_t grad_start = 0;
        float scale = 0.0f;
        if (i < last) {
          const std::int64_t p = a.sorted_positions[i];
          const std::int64_t bag = a.bag_of[p];
          scale = index::bag_scale(a.mode, a.offsets[bag + 1] - a.offsets[bag]);
          if (a.per_sample_weights != nullptr) scale *= a.per_sample_weights[p];
          grad_start =
              index::output_offset(index::bag_sample(bag, a.batch_size), a.total_dim, d_offset);
        }
        const int n = last - i0 < lanes ? static_cast<int>(last - i0) : lanes;
#pragma unroll 4
        for (int j = 0; j < n; ++j) {
          const std::int64_t g = __shfl_sync(mask, grad_start, j, lanes);
          const float sc = __shfl_sync(mask, scale, j, lanes);
          if (active) fma4(acc, sc, load4(a.grad_output + g + 4 * v));
        }
      }
      if (!active) continue;
      if (chunks == 1) {
        sgd4(row + 4 * v, acc, a.learning_rate);
      } else {
        atomicAdd(partial + 4 * v + 0, acc.x);
        atomicAdd(partial + 4 * v + 1, acc.y);
        atomicAdd(partial + 4 * v + 2, acc.z);
        atomicAdd(partial + 4 * v + 3, acc.w);
      }
    }
    if (chunks == 1) continue;

    // Publish this chunk's sums, then count it; the last chunk sees every sum.
    __threadfence();
    __syncwarp(mask);
    int arrived = 0;
    if (lane == 0) arrived = atomicAdd(a.arrivals + rank, 1);
    arrived = __shfl_sync(mask, arrived, 0, lanes);
    if (arrived != chunks - 1) continue;
    __threadfence();
    for (int v = lane; v < vectors; v += lanes) {
      // atomicExch reads the final sum and leaves the scratch zero for the next call
      const float4 g =
          make_float4(atomicExch(partial + 4 * v + 0, 0.0f), atomicExch(partial + 4 * v + 1, 0.0f),
                      atomicExch(partial + 4 * v + 2, 0.0f), atomicExch(partial + 4 * v + 3, 0.0f));
      sgd4(row + 4 * v, g, a.learning_rate);
    }
    if (lane == 0) a.arrivals[rank] = 0;
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail
