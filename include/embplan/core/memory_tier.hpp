#pragma once
// Where a table's rows live (TorchRec's compute kernels over FBGEMM's
// EmbeddingLocation): in device memory (`hbm`, FBGEMM DEVICE); in host DRAM
// read through unified memory with a software cache of `load_factor` x rows
// rows in device memory (`uvm_caching`, MANAGED_CACHING); or in host DRAM with
// every read crossing the host link (`host`, MANAGED without a cache). A
// table's tier is table_spec::placement; shard_bytes / shard_dram_bytes
// (core/plan.hpp) and analytic_cost price its shards by it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

enum class memory_tier : std::uint8_t { hbm, uvm_caching, host };

constexpr std::string_view to_string(memory_tier t) noexcept {
  switch (t) {
    case memory_tier::hbm:
      return "hbm";
    case memory_tier::uvm_caching:
      return "uvm_caching";
    case memory_tier::host:
      return "host";
  }
  return "hbm";
}

inline memory_tier parse_memory_tier(std::string_view s, std::string_view field) {
  if (s == "hbm") return memory_tier::hbm;
  if (s == "uvm_caching") return memory_tier::uvm_caching;
  if (s == "host") return memory_tier::host;
  detail::fail(field, s, "one of \"hbm\", \"uvm_caching\", \"host\"");
}

// A tier and, for uvm_caching, the cache's load factor: cached rows / rows, in
// (0, 1]. The other tiers ignore load_factor.
struct tier_placement {
  memory_tier tier = memory_tier::hbm;
  double load_factor = 0.0;

  friend bool operator==(const tier_placement&, const tier_placement&) = default;
};

inline void validate(const tier_placement& p, std::string_view where = "placement") {
  if (p.tier != memory_tier::hbm && p.tier != memory_tier::uvm_caching &&
      p.tier != memory_tier::host) {
    detail::fail(detail::path(where, "tier"), static_cast<int>(p.tier),
                 "one of hbm, uvm_caching, host");
  }
  if (p.tier == memory_tier::uvm_caching &&
      (!std::isfinite(p.load_factor) || p.load_factor <= 0.0 || p.load_factor > 1.0)) {
    detail::fail(detail::path(where, "load_factor"), p.load_factor,
                 "a cache load factor in (0, 1] for tier uvm_caching");
  }
}

// Rows of device memory a placement reads from: all `rows` in hbm,
// ceil(load_factor x rows) cache slots in uvm_caching (at least 1, at most rows),
// none in host. FBGEMM rounds its slots up to whole 32-way sets; this does not.
inline std::uint64_t device_rows(const tier_placement& p, std::int64_t rows) {
  validate(p);
  if (rows <= 0) detail::fail("rows", rows, "a positive number of rows");
  const auto n = static_cast<std::uint64_t>(rows);
  switch (p.tier) {
    case memory_tier::hbm:
      return n;
    case memory_tier::uvm_caching: {
      // A product within 1e-9 (relative) of a whole number is that number, so
      // load_factor = k / rows gives back k slots despite rounding.
      const double x = p.load_factor * static_cast<double>(rows);
      const double whole = std::nearbyint(x);
      const double slots = std::abs(x - whole) <= 1e-9 * std::max(1.0, x) ? whole : std::ceil(x);
      if (slots < 1.0) return 1;
      return slots >= static_cast<double>(n) ? n : static_cast<std::uint64_t>(slots);
    }
    case memory_tier::host:
      return 0;
  }
  return n;
}

}  // namespace embplan::inline EMBPLAN_ABI
