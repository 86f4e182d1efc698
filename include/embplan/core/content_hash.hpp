#pragma once
// The content hash of a plan and what it was planned for: the task, the
// planner's name, the seed and the plan's shards, so that two machines can
// check they planned the same thing and `plan --check` can tell a plan edited
// by hand (a table moved) from the one the planner made. It is
// FNV-1a 64 over an explicit canonical byte string, so it is the same on
// every run, platform and compiler (never std::hash, whose values the
// standard leaves to the implementation).
// The canonical bytes, version 2 (a change to them changes every hash, and the
// golden value in test/core/content_hash_test.cpp says so): a version tag,
// then every table's name, shape, pooling factor, reuse bins and dtype (and
// tier and load factor only for a table off hbm, so hashes from before tiers
// stay), every device's name, memory, bandwidths and cache (and host DRAM only
// where set), the topology's links and latency, the batch size, the optimizer
// state, the planner and the seed, then the number of shards and every
// shard in plan order (table, device, columns, rows, replica and
// data-parallel flags); integers fixed-width little-endian, f64 as
// its IEEE-754 bit pattern (-0.0 written as +0.0), strings length-prefixed,
// enums their underlying values (content_hash below writes them in order;
// docs/design/plan-report.md lists them).
// The task's own name is a label and is left out: renaming a task does not
// change what is planned. Not covered: the learned model or policy a planner
// searched with (--model, --policy) and --constraints; the shards they led to
// are. The library version is not hashed but recorded
// beside the hash (plan_provenance), so that a check can tell "a different
// task" from "another version of embplan".

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace detail {

// FNV-1a 64 (Fowler, Noll, Vo; offset basis and prime of the 64-bit variant)
// fed the canonical bytes one field at a time.
class canonical_hasher {
 public:
  void u8(std::uint8_t v) noexcept { state_ = (state_ ^ v) * 0x100000001b3ULL; }
  void u64(std::uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i)
      u8(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void u32(std::uint32_t v) noexcept {
    for (int i = 0; i < 4; ++i)
      u8(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i64(std::int64_t v) noexcept { u64(static_cast<std::uint64_t>(v)); }
  void i32(std::int32_t v) noexcept { u32(static_cast<std::uint32_t>(v)); }
  void f64(double v) noexcept { u64(std::bit_cast<std::uint64_t>(v == 0.0 ? 0.0 : v)); }
  void str(std::string_view s) noexcept {
    u64(s.size());
    for (const char c : s)
      u8(static_cast<std::uint8_t>(c));
  }

  std::uint64_t value() const noexcept { return state_; }

 private:
  std::uint64_t state_ = 0xcbf29ce484222325ULL;
};

}  // namespace detail

inline constexpr std::string_view content_hash_format = "embplan.content_hash.v2";

// The hash of (t, planner, seed, p) as the header comment (and
// docs/design/plan-report.md) defines it.
inline std::uint64_t content_hash(const task& t, const plan& p, std::string_view planner,
                                  std::uint64_t seed) {
  detail::canonical_hasher h;
  h.str(content_hash_format);
  h.u64(t.tables.size());
  for (const auto& spec : t.tables) {
    h.str(spec.name);
    h.i64(spec.rows);
    h.i32(spec.dim);
    h.f64(spec.pooling_factor);
    for (const double bin : spec.reuse_hist)
      h.f64(bin);
    h.u8(static_cast<std::uint8_t>(spec.weight_dtype));
    if (spec.placement.tier != memory_tier::hbm) {
      h.u8(static_cast<std::uint8_t>(spec.placement.tier));
      h.f64(spec.placement.tier == memory_tier::uvm_caching ? spec.placement.load_factor : 0.0);
    }
  }
  h.u64(t.cluster.devices.size());
  for (const auto& d : t.cluster.devices) {
    h.str(d.name);
    h.u64(d.memory_bytes);
    h.f64(d.memory_bandwidth_gbps);
    h.f64(d.cache_bandwidth_gbps);
    h.u64(d.cache_bytes);
    if (d.dram_bytes != 0) h.u64(d.dram_bytes);
  }
  h.i32(t.cluster.devices_per_host);
  h.f64(t.cluster.intra_host_bandwidth_gbps);
  h.f64(t.cluster.inter_host_bandwidth_gbps);
  h.f64(t.cluster.collective_latency_ms);
  h.i64(t.batch_size);
  h.u8(static_cast<std::uint8_t>(t.optimizer_state));
  h.str(planner);
  h.u64(seed);
  h.u64(p.shards.size());
  for (const auto& s : p.shards) {
    h.u32(s.table);
    h.u32(s.device);
    h.i32(s.col_begin);
    h.i32(s.col_end);
    h.i64(s.row_begin);
    h.i64(s.row_end);
    h.u8(s.replica ? 1 : 0);
    h.u8(s.data_parallel ? 1 : 0);
  }
  return h.value();
}

// 16 lower-case hex digits, most significant first.
inline std::string hash_hex(std::uint64_t h) {
  constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4)
    out[static_cast<std::size_t>(i)] = digits[h & 0xF];
  return out;
}

// The hash hash_hex wrote (16 hex digits, either case), or none.
inline std::optional<std::uint64_t> parse_hash_hex(std::string_view s) noexcept {
  if (s.size() != 16) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : s) {
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

// What a plan records of how it was made: the planner, the seed, the content
// hash of (task, planner, seed, shards) and the version of embplan that
// planned it.
struct plan_provenance {
  std::string planner{};
  std::uint64_t seed = 0;
  std::uint64_t content_hash = 0;
  std::string version{};

  friend bool operator==(const plan_provenance&, const plan_provenance&) = default;
};

inline plan_provenance provenance_of(const task& t, const plan& p, std::string_view planner,
                                     std::uint64_t seed) {
  return {std::string(planner), seed, content_hash(t, p, planner, seed), EMBPLAN_VERSION_STRING};
}

}  // namespace embplan::inline EMBPLAN_ABI
