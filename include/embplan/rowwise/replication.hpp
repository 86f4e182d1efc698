#pragma once
// Hot-row remedies of the embedding-tables chapter (§4 and exercise (a)-(c) of
// Code 38.2.2):
//  - read replication: the k hottest IDs are stored on r shards (their owner
//    and the r-1 shards after it, mod S; r = S: everywhere) and each read of a
//    replicated ID goes to one of those r shards, routed either
//      random:   uniformly at random (the chapter's exercise), or
//      balanced: by water-filling onto the least-loaded holder;
//  - the skew factor as a function of k, and the smallest k meeting a target;
//  - gradient pre-aggregation: each worker sums a hot row's gradients over its
//    part of the batch and pushes once to the owning shard, instead of once
//    per occurrence (replication alone leaves that push skew untouched).
// Invariants: a request keeps its route whatever k is (random routing draws
// from the request's own sub-stream derive_seed(seed, position); balanced
// routing takes the hot IDs in order, each step depending only on the ones
// before), so the curve over k is one incremental pass; under balanced
// routing the max load, hence the skew, is non-increasing in k (Claim 1),
// and with r = S it is exactly max(max_s F_s, ceil(T / S)) (Claim 2).
// Design notes, the water-filling and both proofs: docs/design/hot-rows.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

// How the reads of a replicated ID are spread over its holders (see the top).
enum class replica_routing {
  random,    // uniformly at random, per request (seeded): the chapter's exercise
  balanced,  // water-filling onto the least-loaded holder: skew non-increasing in k
};

inline std::string_view to_string(replica_routing r) noexcept {
  return r == replica_routing::balanced ? "balanced" : "random";
}

// "random" or "balanced"; anything else is an error naming `field`.
inline replica_routing replica_routing_from(std::string_view name,
                                            std::string_view field = "routing") {
  if (name == "random") return replica_routing::random;
  if (name == "balanced") return replica_routing::balanced;
  embplan::detail::fail(field, name, "random or balanced");
}

struct replication_options {
  std::uint32_t replicas = 0;  // shards holding each hot row, owner included; 0 = all S
  std::uint64_t seed = 0;      // the routing draws (random routing)
  replica_routing routing = replica_routing::random;
};

namespace detail {

// One water-filling step (see the top): c units added to the r holders
// owner, owner + 1, ... (mod S) of `load`, as if one at a time onto the
// least-loaded holder, ties to the lowest shard id; quota[i] = the units
// holder i received. Closed form in O(r log r): the holders below a common
// level L are raised to it, the rest (fewer than the holders at L) go one each
// to the lowest shard ids at L. `order` is scratch.
inline void water_fill(std::span<std::uint64_t> load, std::uint32_t owner, std::uint32_t r,
                       std::uint64_t c, std::vector<std::uint64_t>& quota,
                       std::vector<std::uint32_t>& order) {
  const auto shards = static_cast<std::uint64_t>(load.size());
  auto shard = [&](std::uint32_t i) {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(owner) + i) % shards);
  };
  quota.assign(r, 0);
  if (c == 0) return;
  order.resize(r);
  for (std::uint32_t i = 0; i < r; ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto sa = shard(a);
    const auto sb = shard(b);
    return load[sa] != load[sb] ? load[sa] < load[sb] : sa < sb;
  });
  // The m least-loaded holders end at a common level (+1 for the remainder).
  std::uint64_t left = c;
  std::uint64_t level = load[shard(order[0])];
  std::uint32_t m = 1;
  while (m < r) {
    const std::uint64_t next = load[shard(order[m])];
    const std::uint64_t cost = (next - level) * m;
    if (cost > left) break;
    left -= cost;
    level = next;
    ++m;
  }
  level += left / m;
  std::uint64_t extra = left % m;
  // order[0..m) ties at equal load are sorted by shard id, but after the raise
  // all m are equal: the extra units go to the lowest shard ids among them.
  std::sort(order.begin(), order.begin() + m,
            [&](std::uint32_t a, std::uint32_t b) { return shard(a) < shard(b); });
  for (std::uint32_t j = 0; j < m; ++j) {
    const auto i = order[j];
    const auto s = shard(i);
    std::uint64_t q = level - load[s];
    if (extra > 0) {
      ++q;
      --extra;
    }
    quota[i] = q;
    load[s] += q;
  }
}

// Which of the r holders serves request `position`: uniform in [0, r).
inline std::uint32_t replica_choice(std::uint64_t seed, std::size_t position,
                                    std::uint32_t r) noexcept {
  rng g(derive_seed(seed, position));
  return static_cast<std::uint32_t>(g.below(r));
}

inline std::uint32_t replica_count(std::uint32_t requested, std::uint32_t shards) {
  if (requested > shards) {
    embplan::detail::fail("replicas", requested,
                          "at most the shard count " + std::to_string(shards) + " (0 = all)");
  }
  return requested == 0 ? shards : requested;
}

inline void check_k(std::size_t k, std::int64_t rows) {
  if (k > static_cast<std::uint64_t>(rows)) {
    embplan::detail::fail("k", k, "at most the table's rows (" + std::to_string(rows) + ")");
  }
}

}  // namespace detail

// Where one request is served.
struct row_route {
  std::uint32_t shard = 0;
  bool replica = false;    // read from the shard's replica store
  std::int64_t local = 0;  // primary local row, or slot in the replica store
};

// The replica layout of a hot set over a partition.
template <row_partitioner P>
class hot_replicas {
 public:
  // `hot`: the IDs to replicate (distinct, inside the table), e.g. the first k
  // of id_frequency(trace).
  hot_replicas(P part, std::span<const std::int64_t> hot, replication_options o = {})
      : part_(std::move(part))
      , r_(detail::replica_count(o.replicas, part_.shards()))
      , seed_(o.seed)
      , routing_(o.routing)
      , hot_(hot.begin(), hot.end())
      , slots_(hot.size() * r_, -1)
      , replica_rows_(part_.shards(), 0) {
    detail::check_k(hot.size(), part_.rows());
    index_.reserve(hot.size());
    for (std::size_t h = 0; h < hot_.size(); ++h) {
      const auto id = hot_[h];
      if (id < 0 || id >= part_.rows()) {
        embplan::detail::fail(embplan::detail::path("hot", h), id,
                              "a row ID in [0, " + std::to_string(part_.rows()) + ")");
      }
      if (!index_.emplace(id, static_cast<std::uint32_t>(h)).second) {
        embplan::detail::fail(embplan::detail::path("hot", h), id, "IDs that are distinct");
      }
      const auto owner = part_.shard_of(id);
      for (std::uint32_t i = 1; i < r_; ++i) {
        const auto t = holder(owner, i);
        slots_[h * r_ + i] = replica_rows_[t]++;
      }
    }
  }

  const P& partition() const noexcept { return part_; }
  std::uint32_t replicas() const noexcept { return r_; }
  std::uint64_t seed() const noexcept { return seed_; }
  replica_routing routing() const noexcept { return routing_; }
  std::span<const std::int64_t> hot() const noexcept { return hot_; }

  // Rows each shard stores beyond its own partition.
  const std::vector<std::int64_t>& replica_rows_per_shard() const noexcept { return replica_rows_; }

  // The i-th holder of a row owned by `owner` (i = 0: the owner).
  std::uint32_t holder(std::uint32_t owner, std::uint32_t i) const noexcept {
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(owner) + i) % part_.shards());
  }

  // Which hot row (index into hot()) `id` is, if any.
  std::optional<std::uint32_t> find(std::int64_t id) const {
    const auto it = index_.find(id);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }

  // The slot of hot row h in the replica store of its i-th holder (i >= 1).
  std::int64_t slot(std::uint32_t h, std::uint32_t i) const noexcept {
    return slots_[static_cast<std::size_t>(h) * r_ + i];
  }

  // Request `position` asks for `id` (inside the table). Random routing only:
  // a balanced route depends on the whole batch (use routes()).
  row_route route(std::int64_t id, std::size_t position) const {
    if (routing_ != replica_routing::random) {
      embplan::detail::fail("routing", to_string(routing_),
                            "random for a single request (balanced routing routes a whole "
                            "batch: use routes())");
    }
    const auto loc = part_.locate(id);
    if (index_.empty()) return {loc.shard, false, loc.local};
    const auto h = find(id);
    if (!h) return {loc.shard, false, loc.local};
    const auto i = detail::replica_choice(seed_, position, r_);
    if (i == 0) return {loc.shard, false, loc.local};
    return {holder(loc.shard, i), true, slot(*h, i)};
  }

  // Routes of a whole batch, in request order (out.size() == ids.size()), by
  // the routing chosen at construction. Balanced: the water-filling of
  // docs/design/hot-rows.md, O(R + k r log r) — the same loads
  // visit_loads_by_k reports at k = hot().size() when hot() is the first k of
  // the trace's id_frequency.
  void routes(std::span<const std::int64_t> ids, std::span<row_route> out) const {
    check_ids(ids, part_.rows());
    if (out.size() != ids.size()) {
      embplan::detail::fail("routes.size", out.size(),
                            "one route per request (" + std::to_string(ids.size()) + ")");
    }
    if (routing_ == replica_routing::random) {
      for (std::size_t j = 0; j < ids.size(); ++j)
        out[j] = route(ids[j], j);
      return;
    }
    // Every request at its owner; the hot ones grouped by hot index
    // (counting sort, trace order kept).
    const std::size_t k = hot_.size();
    std::vector<std::uint64_t> load(part_.shards(), 0);
    std::vector<std::size_t> begin(k + 1, 0);
    std::vector<std::uint32_t> hot_of(k == 0 ? 0 : ids.size(), ~std::uint32_t{0});
    for (std::size_t j = 0; j < ids.size(); ++j) {
      const auto loc = part_.locate(ids[j]);
      out[j] = row_route{loc.shard, false, loc.local};
      ++load[loc.shard];
      if (k == 0) continue;
      const auto it = index_.find(ids[j]);
      if (it != index_.end()) {
        hot_of[j] = it->second;
        ++begin[it->second + 1];
      }
    }
    if (k == 0) return;
    for (std::size_t h = 0; h < k; ++h)
      begin[h + 1] += begin[h];
    std::vector<std::size_t> positions(begin[k]);
    {
      std::vector<std::size_t> fill(begin.begin(), begin.end() - 1);
      for (std::size_t j = 0; j < hot_of.size(); ++j)
        if (hot_of[j] != ~std::uint32_t{0}) positions[fill[hot_of[j]]++] = j;
    }
    std::vector<std::uint64_t> quota;
    std::vector<std::uint32_t> order;
    for (std::size_t h = 0; h < k; ++h) {
      const std::uint64_t c = begin[h + 1] - begin[h];
      if (c == 0) continue;
      const auto owner = part_.shard_of(hot_[h]);
      load[owner] -= c;
      detail::water_fill(load, owner, r_, c, quota, order);
      std::size_t p = begin[h];
      for (std::uint32_t i = 0; i < r_; ++i) {
        for (std::uint64_t u = 0; u < quota[i]; ++u, ++p) {
          // i = 0: the owner's primary row, already in out.
          if (i != 0)
            out[positions[p]] = {holder(owner, i), true, slot(static_cast<std::uint32_t>(h), i)};
        }
      }
    }
  }

 private:
  P part_;
  std::uint32_t r_ = 1;
  std::uint64_t seed_ = 0;
  replica_routing routing_ = replica_routing::random;
  std::vector<std::int64_t> hot_;
  std::unordered_map<std::int64_t, std::uint32_t> index_;
  std::vector<std::int64_t> slots_;  // [h * r + i]: slot on holder i (i >= 1)
  std::vector<std::int64_t> replica_rows_;
};

// The first k IDs of a frequency list (id_frequency order: hottest first).
inline std::vector<std::int64_t> hottest_ids(std::span<const id_hits> freq, std::size_t k) {
  std::vector<std::int64_t> out;
  out.reserve(std::min(k, freq.size()));
  for (std::size_t h = 0; h < k && h < freq.size(); ++h)
    out.push_back(freq[h].id);
  return out;
}

// Lookups per shard with the k hottest IDs (of `freq`, computed from the same
// trace) replicated, for every k in 0..max_k: f(k, loads) in increasing k.
// Incremental: the requests of the k-th hottest ID move from its owner to
// their drawn holders (random) or are water-filled over them (balanced), so
// the whole curve costs O(R + max_k * r log r) after one pass over the trace,
// in O(R + S) memory. Balanced: the max load, hence the skew, is
// non-increasing in k (Claim 1, docs/design/hot-rows.md).
template <row_partitioner P, class F>
void visit_loads_by_k(const P& part, std::span<const std::int64_t> ids,
                      std::span<const id_hits> freq, std::size_t max_k, replication_options o,
                      F&& f) {
  detail::check_k(max_k, part.rows());
  const std::uint32_t shards = part.shards();
  const std::uint32_t r = detail::replica_count(o.replicas, shards);
  const std::size_t hot_k = std::min(max_k, freq.size());
  std::unordered_map<std::int64_t, std::uint32_t> rank;
  rank.reserve(hot_k);
  for (std::size_t h = 0; h < hot_k; ++h)
    rank.emplace(freq[h].id, static_cast<std::uint32_t>(h));
  // Requests grouped by the rank of their ID (counting sort), in trace order.
  std::vector<std::size_t> begin(hot_k + 1, 0);
  std::vector<std::uint32_t> rank_of(hot_k == 0 ? 0 : ids.size(), ~std::uint32_t{0});
  std::vector<std::uint64_t> load(shards, 0);
  for (std::size_t j = 0; j < ids.size(); ++j) {
    const auto id = ids[j];
    if (id < 0 || id >= part.rows()) {
      embplan::detail::fail(embplan::detail::path("ids", j), id,
                            "a row ID in [0, " + std::to_string(part.rows()) + ")");
    }
    ++load[part.shard_of(id)];
    if (hot_k == 0) continue;
    const auto it = rank.find(id);
    if (it != rank.end()) {
      rank_of[j] = it->second;
      ++begin[it->second + 1];
    }
  }
  for (std::size_t h = 0; h < hot_k; ++h)
    begin[h + 1] += begin[h];
  std::vector<std::size_t> positions(begin[hot_k]);
  {
    std::vector<std::size_t> fill(begin.begin(), begin.end() - 1);
    for (std::size_t j = 0; j < rank_of.size(); ++j)
      if (rank_of[j] != ~std::uint32_t{0}) positions[fill[rank_of[j]]++] = j;
  }
  f(std::size_t{0}, std::span<const std::uint64_t>(load));
  std::vector<std::uint64_t> quota;
  std::vector<std::uint32_t> order;
  for (std::size_t k = 1; k <= max_k; ++k) {
    if (k <= hot_k && o.routing == replica_routing::balanced) {
      const auto owner = part.shard_of(freq[k - 1].id);
      const std::uint64_t c = begin[k] - begin[k - 1];
      load[owner] -= c;
      detail::water_fill(load, owner, r, c, quota, order);
    } else if (k <= hot_k) {
      const auto owner = part.shard_of(freq[k - 1].id);
      for (std::size_t p = begin[k - 1]; p < begin[k]; ++p) {
        const auto i = detail::replica_choice(o.seed, positions[p], r);
        --load[owner];
        ++load[(static_cast<std::uint64_t>(owner) + i) % shards];
      }
    }
    f(k, std::span<const std::uint64_t>(load));
  }
}

// visit_loads_by_k, kept: out[k][s] (O(max_k * S) memory).
template <row_partitioner P>
std::vector<std::vector<std::uint64_t>> loads_by_k(const P& part, std::span<const std::int64_t> ids,
                                                   std::span<const id_hits> freq, std::size_t max_k,
                                                   replication_options o = {}) {
  std::vector<std::vector<std::uint64_t>> out;
  visit_loads_by_k(part, ids, freq, max_k, o, [&](std::size_t, std::span<const std::uint64_t> l) {
    out.emplace_back(l.begin(), l.end());
  });
  return out;
}

// The skew factor for k = 0..max_k (see visit_loads_by_k).
template <row_partitioner P>
std::vector<double> skew_by_k(const P& part, std::span<const std::int64_t> ids,
                              std::span<const id_hits> freq, std::size_t max_k,
                              replication_options o = {}) {
  std::vector<double> out;
  visit_loads_by_k(part, ids, freq, max_k, o, [&](std::size_t, std::span<const std::uint64_t> l) {
    out.push_back(skew_factor(l));
  });
  return out;
}

// The smallest k whose skew (curve[k], from skew_by_k) is <= target; none if
// no k of the curve reaches it. A target below 1 cannot be met and is an error.
inline std::optional<std::size_t> smallest_k_for(std::span<const double> curve, double target) {
  if (!std::isfinite(target) || target < 1.0) {
    embplan::detail::fail("target_skew", target, "a skew factor >= 1 (1 = perfect balance)");
  }
  for (std::size_t k = 0; k < curve.size(); ++k)
    if (curve[k] <= target) return k;
  return std::nullopt;
}

// Gradient pushes to the owning shards for one batch split over `workers`
// (contiguous, as a data-parallel batch is split): without pre-aggregation one
// push per lookup; with it, the k hottest IDs cost one push per worker that
// saw them (their gradients summed locally first) and the rest one per lookup.
struct push_report {
  std::vector<std::uint64_t> without{};  // per shard
  std::vector<std::uint64_t> with{};     // per shard
};

template <row_partitioner P>
push_report gradient_pushes(const P& part, std::span<const std::int64_t> ids,
                            std::span<const id_hits> freq, std::size_t k, std::uint32_t workers) {
  detail::check_k(k, part.rows());
  if (workers == 0) embplan::detail::fail("workers", workers, "at least 1 worker");
  const std::size_t hot_k = std::min(k, freq.size());
  std::unordered_map<std::int64_t, std::uint32_t> rank;
  rank.reserve(hot_k);
  for (std::size_t h = 0; h < hot_k; ++h)
    rank.emplace(freq[h].id, static_cast<std::uint32_t>(h));
  push_report out{std::vector<std::uint64_t>(part.shards(), 0),
                  std::vector<std::uint64_t>(part.shards(), 0)};
  std::vector<std::uint32_t> seen_by(hot_k, 0);  // last worker + 1 that pushed hot row h
  const std::size_t n = ids.size();
  for (std::uint32_t w = 0; w < workers; ++w) {
    const std::size_t lo = n * w / workers;
    const std::size_t hi = n * (w + 1) / workers;
    for (std::size_t j = lo; j < hi; ++j) {
      const auto id = ids[j];
      if (id < 0 || id >= part.rows()) {
        embplan::detail::fail(embplan::detail::path("ids", j), id,
                              "a row ID in [0, " + std::to_string(part.rows()) + ")");
      }
      const auto owner = part.shard_of(id);
      ++out.without[owner];
      const auto it = hot_k == 0 ? rank.end() : rank.find(id);
      if (it == rank.end()) {
        ++out.with[owner];
      } else if (seen_by[it->second] != w + 1) {
        seen_by[it->second] = w + 1;
        ++out.with[owner];
      }
    }
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
