#pragma once
// Routed sparse gather over a row-sharded table (embedding-tables chapter §3
// and the §5 demo): each requested ID is routed to the shard that holds it,
// every shard reads its local rows, and the rows are reassembled in request
// order (the all-gather). Sharding moves where rows live, not what comes
// back: the result is bit-identical to a single-table gather.
//
// The stages are kept apart as a distributed lookup runs them: route (ID ->
// shard, local row; counting sort of the requests by shard), per-shard reads
// into that shard's response buffer, then the scatter back to request order.
// A gather_workspace keeps the buffers between calls.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/rowwise/replication.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

struct gather_workspace {
  std::vector<std::size_t> shard_begin;  // S + 1 offsets into the arrays below
  std::vector<std::size_t> position;     // request position, grouped by shard
  std::vector<std::int64_t> local;       // local row (or replica slot), grouped by shard
  std::vector<std::uint8_t> from_replica;
  std::vector<row_route> routes;  // per request, in request order
  std::vector<float> responses;   // rows read by each shard, grouped by shard
};

template <row_partitioner P>
class sharded_table {
 public:
  // Splits a row-major [rows][dim] table into per-shard storage (copies).
  sharded_table(P part, std::span<const float> full, std::int32_t dim)
      : part_(std::move(part))
      , dim_(dim)
      , store_(part_.shards())
      , replica_store_(part_.shards())
      , replica_rows_(part_.shards(), 0) {
    if (dim <= 0) embplan::detail::fail("dim", dim, "a positive dimension");
    const auto d = static_cast<std::size_t>(dim);
    const auto rows = static_cast<std::size_t>(part_.rows());
    if (full.size() != rows * d) {
      embplan::detail::fail("table.size", full.size(),
                            "rows x dim = " + std::to_string(rows * d) + " values");
    }
    for (std::uint32_t s = 0; s < part_.shards(); ++s) {
      const auto n = static_cast<std::size_t>(part_.rows_in(s));
      store_[s].resize(n * d);
      for (std::size_t l = 0; l < n; ++l) {
        const auto g = static_cast<std::size_t>(part_.global_id(s, static_cast<std::int64_t>(l)));
        std::memcpy(&store_[s][l * d], &full[g * d], d * sizeof(float));
      }
    }
  }

  const P& partition() const noexcept { return part_; }
  std::int32_t dim() const noexcept { return dim_; }
  std::span<const float> shard_rows(std::uint32_t s) const noexcept { return store_[s]; }

  // Stores the hot rows of `rep` (built over the same partition) in each
  // holder's replica store, copied from the owners' storage. Replaces any
  // earlier replication; an empty hot set removes it.
  void replicate(const hot_replicas<P>& rep) {
    const auto d = static_cast<std::size_t>(dim_);
    if (rep.partition().rows() != part_.rows() || rep.partition().shards() != part_.shards()) {
      embplan::detail::fail("replicas.partition", rep.partition().shards(),
                            "the table's own partition");
    }
    replica_rows_ = rep.replica_rows_per_shard();
    for (std::uint32_t s = 0; s < part_.shards(); ++s)
      replica_store_[s].assign(static_cast<std::size_t>(replica_rows_[s]) * d, 0.f);
    const auto hot = rep.hot();
    for (std::size_t h = 0; h < hot.size(); ++h) {
      const auto loc = part_.locate(hot[h]);
      const float* src = &store_[loc.shard][static_cast<std::size_t>(loc.local) * d];
      for (std::uint32_t i = 1; i < rep.replicas(); ++i) {
        const auto t = rep.holder(loc.shard, i);
        const auto slot = static_cast<std::size_t>(rep.slot(static_cast<std::uint32_t>(h), i));
        std::memcpy(&replica_store_[t][slot * d], src, d * sizeof(float));
      }
    }
  }

  // Rows of `ids` into out ([ids.size()][dim], request order), every ID
  // routed to its owner. Returns the lookups each shard served.
  std::vector<std::uint64_t> gather(std::span<const std::int64_t> ids, std::span<float> out,
                                    gather_workspace& ws) const {
    check(ids, out);
    ws.routes.resize(ids.size());
    for (std::size_t j = 0; j < ids.size(); ++j) {
      const auto loc = part_.locate(ids[j]);
      ws.routes[j] = row_route{loc.shard, false, loc.local};
    }
    return run(out, ws);
  }

  // As above, with the reads of hot IDs spread over their holders as `rep`
  // routes them (random or balanced; rep must have been passed to replicate()).
  std::vector<std::uint64_t> gather(std::span<const std::int64_t> ids, std::span<float> out,
                                    const hot_replicas<P>& rep, gather_workspace& ws) const {
    check(ids, out);
    if (rep.replica_rows_per_shard() != replica_rows_) {
      embplan::detail::fail("replicas", rep.hot().size(),
                            "the hot set last passed to replicate() (its rows are not stored)");
    }
    ws.routes.resize(ids.size());
    rep.routes(ids, ws.routes);
    return run(out, ws);
  }

 private:
  void check(std::span<const std::int64_t> ids, std::span<const float> out) const {
    check_ids(ids, part_.rows());
    if (out.size() != ids.size() * static_cast<std::size_t>(dim_)) {
      embplan::detail::fail(
          "out.size", out.size(),
          "ids x dim = " + std::to_string(ids.size() * static_cast<std::size_t>(dim_)) + " values");
    }
  }

  std::vector<std::uint64_t> run(std::span<float> out, gather_workspace& ws) const {
    const std::uint32_t shards = part_.shards();
    const auto d = static_cast<std::size_t>(dim_);
    const std::size_t n = ws.routes.size();
    // Route: count per shard, then bucket the requests (stable: request order).
    std::vector<std::uint64_t> load(shards, 0);
    for (const auto& r : ws.routes)
      ++load[r.shard];
    ws.shard_begin.assign(shards + 1, 0);
    for (std::uint32_t s = 0; s < shards; ++s)
      ws.shard_begin[s + 1] = ws.shard_begin[s] + load[s];
    ws.position.resize(n);
    ws.local.resize(n);
    ws.from_replica.resize(n);
    {
      std::vector<std::size_t> fill(ws.shard_begin.begin(), ws.shard_begin.end() - 1);
      for (std::size_t j = 0; j < n; ++j) {
        const auto& r = ws.routes[j];
        const std::size_t at = fill[r.shard]++;
        ws.position[at] = j;
        ws.local[at] = r.local;
        ws.from_replica[at] = r.replica ? 1 : 0;
      }
    }
    // Each shard reads its local rows into its part of the response buffer.
    ws.responses.resize(n * d);
    for (std::uint32_t s = 0; s < shards; ++s) {
      const float* primary = store_[s].data();
      const float* replica = replica_store_[s].data();
      for (std::size_t at = ws.shard_begin[s]; at < ws.shard_begin[s + 1]; ++at) {
        const float* src =
            (ws.from_replica[at] ? replica : primary) + static_cast<std::size_t>(ws.local[at]) * d;
        std::memcpy(&ws.responses[at * d], src, d * sizeof(float));
      }
    }
    // All-gather: responses back to request order.
    for (std::size_t at = 0; at < n; ++at)
      std::memcpy(&out[ws.position[at] * d], &ws.responses[at * d], d * sizeof(float));
    return load;
  }

  P part_;
  std::int32_t dim_ = 0;
  std::vector<std::vector<float>> store_;
  std::vector<std::vector<float>> replica_store_;
  std::vector<std::int64_t> replica_rows_;
};

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
