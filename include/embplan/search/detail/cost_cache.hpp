#pragma once
// The device-cost cache of NeuroShard's online search (§3.3, "Implementation
// with caching"; Alg. 2, lines 12-16): the compute cost of a device is asked
// for the same set of pieces again and again — the beam's children differ by
// one split, the grid's bounds by a late placement — so each (device kind,
// multiset of pieces) is priced once and looked up after.
//
// Key: a piece is identified by (table, column count, row range) — not by
// which columns it holds, since a column piece costs what a table of that
// width costs (NeuroShard's table augmentation) — and a device's multiset of
// pieces by the SUM of its pieces' 128-bit hashes, plus a salt for the device
// kind (devices of identical hardware share one kind). A sum is commutative,
// so it follows a device's contents in O(1) per placement or removal, and it
// respects multiplicity (two equal halves count twice). Two different
// multisets collide only if their hash sums agree in all 128 bits, which for
// splitmix-mixed words has probability ~2^-128 per pair: the cache treats equal
// keys as equal sets.
//
// The cache lives in one search call (never global, never shared between
// threads), so a const planner stays thread-safe.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/lower_bound.hpp"

namespace embplan::search::detail {

struct multiset_key {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;

  multiset_key& operator+=(const multiset_key& o) noexcept {
    lo += o.lo;
    hi += o.hi;
    return *this;
  }
  multiset_key& operator-=(const multiset_key& o) noexcept {
    lo -= o.lo;
    hi -= o.hi;
    return *this;
  }
  friend multiset_key operator+(multiset_key a, const multiset_key& b) noexcept { return a += b; }
  friend multiset_key operator-(multiset_key a, const multiset_key& b) noexcept { return a -= b; }
  friend bool operator==(const multiset_key&, const multiset_key&) = default;
};

// The hash of one piece: (table, columns, row range), each word folded in
// through a bijective mix (splitmix64's finaliser), twice with two seeds.
inline std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline std::uint64_t fold_piece(std::uint64_t seed, const shard& s) noexcept {
  std::uint64_t h =
      mix64(seed ^ ((std::uint64_t{s.table} << 32) | static_cast<std::uint32_t>(s.cols())));
  h = mix64(h ^ static_cast<std::uint64_t>(s.row_begin));
  return mix64(h ^ static_cast<std::uint64_t>(s.row_end));
}

inline multiset_key piece_key(const shard& s) noexcept {
  return multiset_key{fold_piece(0x9e3779b97f4a7c15ULL, s), fold_piece(0xd1b54a32d192ed03ULL, s)};
}

// Devices grouped by hardware: kind_of[d] and a salt per kind, so one multiset
// on two different kinds of device has two keys.
struct device_kinds {
  std::vector<std::uint32_t> kind_of;
  std::vector<multiset_key> salt;

  explicit device_kinds(const task& t) {
    const std::size_t devices = t.cluster.size();
    kind_of.resize(devices);
    std::vector<std::size_t> representative;
    for (std::size_t d = 0; d < devices; ++d) {
      std::size_t k = 0;
      while (k < representative.size() &&
             !same_hardware(t.cluster.devices[representative[k]], t.cluster.devices[d]))
        ++k;
      if (k == representative.size()) {
        representative.push_back(d);
        salt.push_back(
            multiset_key{mix64(0xc0ffee0000000001ULL + k), mix64(0xfacade0000000003ULL + k)});
      }
      kind_of[d] = static_cast<std::uint32_t>(k);
    }
  }

  // The key of an empty device `d`; add piece keys to it.
  multiset_key empty(std::size_t d) const noexcept { return salt[kind_of[d]]; }
};

// Open addressing with linear probing over 128-bit keys; grows at half load.
template <class Value>
class key_map {
 public:
  explicit key_map(std::size_t capacity = 1 << 14) {
    slots_.resize(std::bit_ceil(capacity < 16 ? std::size_t{16} : capacity));
  }

  // The value stored under `key`, or make() stored and returned on a miss.
  template <class Make>
  Value get(const multiset_key& key, Make&& make) {
    ++lookups_;
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = static_cast<std::size_t>(key.lo) & mask;
    while (slots_[i].used) {
      if (slots_[i].key == key) {
        ++hits_;
        return slots_[i].value;
      }
      i = (i + 1) & mask;
    }
    Value value = make();
    slots_[i] = slot{key, value, true};
    if (2 * ++size_ > slots_.size()) grow();
    return value;
  }

  std::uint64_t lookups() const noexcept { return lookups_; }
  std::uint64_t hits() const noexcept { return hits_; }
  std::uint64_t misses() const noexcept { return lookups_ - hits_; }
  std::size_t size() const noexcept { return size_; }

 private:
  struct slot {
    multiset_key key;
    Value value{};
    bool used = false;
  };

  void grow() {
    std::vector<slot> old(slots_.size() * 2);
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const auto& s : old) {
      if (!s.used) continue;
      std::size_t i = static_cast<std::size_t>(s.key.lo) & mask;
      while (slots_[i].used)
        i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<slot> slots_;
  std::size_t size_ = 0;
  std::uint64_t lookups_ = 0;
  std::uint64_t hits_ = 0;
};

// NeuroShard's cache: device kind + multiset of pieces -> compute cost.
using cost_cache = key_map<compute_cost>;

}  // namespace embplan::search::detail
