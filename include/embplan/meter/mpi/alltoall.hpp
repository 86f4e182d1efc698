#pragma once
// A real all-to-all benchmark between MPI ranks, one rank per device
// (target embplan::mpi). DLRM's model-parallel exchange (AutoShard §2.1,
// NeuroShard Fig. 1): in the forward pass device d sends each peer j the
// pooled embeddings of its tables for j's share of the batch, (B/D) x
// dim_sum[d] floats, and receives (B/D) x dim_sum[j] from each j; the backward
// pass sends the gradients of those outputs back (counts swapped).
// Start skew (NeuroShard §3.1, Alg. 5): after a barrier, rank d waits
// start_ms[d] before entering the forward all-to-all; its forward cost is the
// time from its own start to the end of its all-to-all, so an early starter
// pays for the late ones, as on the GPUs. The backward all-to-all starts
// together. Each is timed under AutoShard's protocol (meter/protocol.hpp),
// per rank.
#include "embplan/detail/mpi.hpp"  // first: it picks MPI's C API

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/meter/protocol.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter::mpi {

struct alltoall_options {
  std::int64_t batch_size = 4096;  // global batch B
  protocol_options protocol{.warmup = 2, .runs = 9, .drop = 2, .flush = false};
};

// Collective over `comm`: every rank passes the same dim_sum and start_ms (one
// entry per rank). Returns every rank's forward/backward cost in ms.
inline std::vector<comm_cost> measure_alltoall(MPI_Comm comm, std::span<const std::int64_t> dim_sum,
                                               std::span<const double> start_ms,
                                               const alltoall_options& o = {}) {
  int rank = 0;
  int size = 0;
  embplan::detail::mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  embplan::detail::mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const auto devices = static_cast<std::size_t>(size);
  if (dim_sum.size() != devices) {
    embplan::detail::fail("alltoall.dim_sum.size", dim_sum.size(),
                          "one entry per MPI rank (" + std::to_string(size) + ")");
  }
  if (start_ms.size() != devices) {
    embplan::detail::fail("alltoall.start_ms.size", start_ms.size(),
                          "one entry per MPI rank (" + std::to_string(size) + ")");
  }
  if (o.batch_size < size) {
    embplan::detail::fail("alltoall.batch_size", o.batch_size,
                          "at least one sample per rank (" + std::to_string(size) + ")");
  }
  validate(o.protocol);
  const std::int64_t share = o.batch_size / size;
  const auto me = static_cast<std::size_t>(rank);
  // Forward: send share x dim_sum[me] to every j, receive share x dim_sum[j].
  std::vector<int> fwd_send(devices), fwd_recv(devices), fwd_sdispl(devices), fwd_rdispl(devices);
  std::int64_t send_total = 0;
  std::int64_t recv_total = 0;
  for (std::size_t j = 0; j < devices; ++j) {
    const std::int64_t s = share * dim_sum[me];
    const std::int64_t r = share * dim_sum[j];
    if (s > INT32_MAX || r > INT32_MAX || send_total + s > INT32_MAX ||
        recv_total + r > INT32_MAX) {
      embplan::detail::fail("alltoall.batch_size", o.batch_size,
                            "a batch whose per-rank messages stay below 2^31 floats");
    }
    fwd_send[j] = static_cast<int>(s);
    fwd_recv[j] = static_cast<int>(r);
    fwd_sdispl[j] = static_cast<int>(send_total);
    fwd_rdispl[j] = static_cast<int>(recv_total);
    send_total += s;
    recv_total += r;
  }
  std::vector<float> outputs(static_cast<std::size_t>(send_total), 1.0f);
  std::vector<float> received(static_cast<std::size_t>(recv_total), 0.0f);

  using clock = std::chrono::steady_clock;
  const auto wait_ms = [](clock::time_point from, double ms) {
    const auto until = from + std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double, std::milli>(ms));
    while (clock::now() < until) {
    }
  };
  const auto run = [&](bool forward) {
    embplan::detail::mpi_check(MPI_Barrier(comm), "MPI_Barrier");
    const auto t0 = clock::now();
    if (forward) {
      wait_ms(t0, start_ms[me]);
      embplan::detail::mpi_check(
          MPI_Alltoallv(outputs.data(), fwd_send.data(), fwd_sdispl.data(), MPI_FLOAT,
                        received.data(), fwd_recv.data(), fwd_rdispl.data(), MPI_FLOAT, comm),
          "MPI_Alltoallv");
      return std::chrono::duration<double, std::milli>(clock::now() - t0).count() - start_ms[me];
    }
    // Backward: the gradients travel back, counts swapped.
    embplan::detail::mpi_check(
        MPI_Alltoallv(received.data(), fwd_recv.data(), fwd_rdispl.data(), MPI_FLOAT,
                      outputs.data(), fwd_send.data(), fwd_sdispl.data(), MPI_FLOAT, comm),
        "MPI_Alltoallv");
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  const auto protocol = [&](bool forward) {
    for (int i = 0; i < o.protocol.warmup; ++i)
      (void)run(forward);
    std::vector<double> samples;
    for (int i = 0; i < o.protocol.runs; ++i)
      samples.push_back(run(forward));
    return trimmed(std::move(samples), o.protocol.drop).mean_ms;
  };
  const double mine[2] = {protocol(true), protocol(false)};
  std::vector<double> all(2 * devices);
  embplan::detail::mpi_check(MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, comm),
                             "MPI_Allgather");
  std::vector<comm_cost> out(devices);
  for (std::size_t d = 0; d < devices; ++d)
    out[d] = comm_cost{.fwd_ms = all[2 * d], .bwd_ms = all[2 * d + 1]};
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::meter::mpi
