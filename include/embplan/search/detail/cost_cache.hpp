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
// kind (devices that price alike share one kind: device_kinds). A sum is commutative,
// so it follows a device's contents in O(1) per placement or removal, and it
// respects multiplicity (two equal halves count twice). Two different
// multisets collide only if their hash sums agree in all 128 bits, which for
// splitmix-mixed words has probability ~2^-128 per pair: the cache treats equal
// keys as equal sets.
//
// The cache lives in one search call (never global, never shared between
// threads), so a const planner stays thread-safe.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/lower_bound.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::search::detail {

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
// on two different kinds of device has two keys. By default (price) devices
// that differ only in their capacities (memory_bytes, dram_bytes), which no
// cost model reads (concepts/cost_model.hpp), share a kind: a sub-task whose
// devices keep different free memory (stage::staged) prices each
// set of pieces once, not once per device (told apart by capacity, a large
// sub-task's devices fall into hundreds of kinds, and each run of the grid
// engine maps every piece's term once per kind;
// docs/design/search-internals.md). `whole` also tells those apart, for a
// search that swaps equal devices (the exact solver's symmetry breaking).
struct device_kinds {
  enum class by : unsigned char { price, whole };

  std::vector<std::uint32_t> kind_of;
  std::vector<multiset_key> salt;
  std::vector<std::size_t> representative;  // per kind: its first device

  explicit device_kinds(const task& t, by equal = by::price) {
    const std::size_t devices = t.cluster.size();
    kind_of.resize(devices);
    for (std::size_t d = 0; d < devices; ++d) {
      std::size_t k = 0;
      while (k < representative.size() &&
             !same_kind(t.cluster.devices[representative[k]], t.cluster.devices[d], equal))
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

 private:
  static bool same_kind(const device_spec& a, const device_spec& b, by equal) {
    if (equal == by::whole) return same_hardware(a, b);
    device_spec priced = a;
    priced.memory_bytes = b.memory_bytes;
    priced.dram_bytes = b.dram_bytes;
    return same_hardware(priced, b);
  }
};

// Storage of key_map's slots. A search's cache can reach tens of megabytes
// (hundreds of thousands of device sets on large tasks), where nearly every
// lookup misses the TLB as well as the caches; on Linux, tables of 2 MiB and
// more ask for transparent huge pages (a hint: where the kernel refuses,
// nothing changes but speed). Zero-filled, so every slot starts empty.
template <class T>
class slot_array {
 public:
  slot_array() = default;
  explicit slot_array(std::size_t n) : n_(n) {
    const std::size_t bytes = n * sizeof(T);
    // At least T's own alignment: key_map's slots of the learned model's
    // per-piece terms are alignas(64), and code built for AVX-512 stores them
    // with aligned 64-byte moves (operator new's 16 bytes crashed there).
    align_ = bytes >= huge_page ? huge_page : std::max(alignof(T), alignof(std::max_align_t));
    const std::size_t rounded = (bytes + align_ - 1) / align_ * align_;
    data_ = static_cast<T*>(::operator new (rounded, std::align_val_t{align_}));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align_ == huge_page) ::madvise(data_, rounded, MADV_HUGEPAGE);
#endif
    std::memset(static_cast<void*>(data_), 0, rounded);
  }
  slot_array(const slot_array&) = delete;
  slot_array& operator=(const slot_array&) = delete;
  slot_array(slot_array&& o) noexcept {
    swap(o);
  }
  slot_array& operator=(slot_array&& o) noexcept {
    swap(o);
    return *this;
  }
  ~slot_array() {
    if (data_) ::operator delete (data_, std::align_val_t{align_});
  }

  void swap(slot_array& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
    std::swap(align_, o.align_);
  }
  std::size_t size() const noexcept {
    return n_;
  }
  T& operator[](std::size_t i) noexcept {
    return data_[i];
  }
  const T& operator[](std::size_t i) const noexcept {
    return data_[i];
  }
  T* begin() noexcept {
    return data_;
  }
  T* end() noexcept {
    return data_ + n_;
  }

 private:
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  T* data_ = nullptr;
  std::size_t n_ = 0;
  std::size_t align_ = std::max(alignof(T), alignof(std::max_align_t));
};

// Open addressing with linear probing over 128-bit keys; grows at half load.
// A slot is empty when its key is zero (zero-filled storage); the one key that
// is zero is stored as `zero_stand_in` instead — like any two distinct
// multisets with equal keys, a collision of probability ~2^-128.
// With max_slots, the table grows to at most that many slots; at half load
// then it is emptied instead (every value is recomputed on its next miss, so
// results never change, only the hit rate): a search that prices millions of
// distinct device sets keeps a bounded cache (local_search).
template <class Value>
class key_map {
  static_assert(std::is_trivially_copyable_v<Value> && std::is_trivially_destructible_v<Value>,
                "key_map stores values in zero-filled storage");

 public:
  static constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

  explicit key_map(std::size_t capacity = 1 << 14, std::size_t max_slots = unbounded)
      : slots_(std::bit_ceil(capacity < 16 ? std::size_t{16} : capacity)), max_slots_(max_slots) {}

  // The value stored under `key`, or make() stored and returned on a miss.
  template <class Make>
  Value get(const multiset_key& key, Make&& make) {
    return ref(key, std::forward<Make>(make));
  }

  // get(), by reference: valid until the next call that may store a value.
  template <class Make>
  const Value& ref(multiset_key key, Make&& make) {
    ++lookups_;
    if (key == multiset_key{}) key = zero_stand_in;
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = static_cast<std::size_t>(key.lo) & mask;
    while (slots_[i].key != multiset_key{}) {
      if (slots_[i].key == key) {
        ++hits_;
        return slots_[i].value;
      }
      i = (i + 1) & mask;
    }
    slots_[i] = slot{key, make()};
    if (2 * ++size_ > slots_.size()) {
      if (slots_.size() <= max_slots_ / 2) {
        grow();
        return find(key);
      }
      // Full at its bound: emptied, the new entry kept.
      const slot kept = slots_[i];
      std::memset(static_cast<void*>(slots_.begin()), 0, slots_.size() * sizeof(slot));
      ++clears_;
      size_ = 1;
      i = static_cast<std::size_t>(kept.key.lo) & mask;
      slots_[i] = kept;
    }
    return slots_[i].value;
  }

  std::uint64_t lookups() const noexcept { return lookups_; }
  std::uint64_t hits() const noexcept { return hits_; }
  std::uint64_t misses() const noexcept { return lookups_ - hits_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t slots() const noexcept { return slots_.size(); }
  std::uint64_t clears() const noexcept { return clears_; }  // times emptied at max_slots

 private:
  static constexpr multiset_key zero_stand_in{0x9e3779b97f4a7c15ULL, 0x2545f4914f6cdd1dULL};

  struct slot {
    multiset_key key;
    Value value;
  };

  const Value& find(const multiset_key& key) const noexcept {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = static_cast<std::size_t>(key.lo) & mask;
    while (slots_[i].key != key)
      i = (i + 1) & mask;
    return slots_[i].value;
  }

  void grow() {
    slot_array<slot> old(slots_.size() * 2);
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const auto& s : old) {
      if (s.key == multiset_key{}) continue;
      std::size_t i = static_cast<std::size_t>(s.key.lo) & mask;
      while (slots_[i].key != multiset_key{})
        i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  slot_array<slot> slots_;
  std::size_t max_slots_ = unbounded;
  std::uint64_t clears_ = 0;
  std::size_t size_ = 0;
  std::uint64_t lookups_ = 0;
  std::uint64_t hits_ = 0;
};

// NeuroShard's cache: device kind + multiset of pieces -> compute cost.
using cost_cache = key_map<compute_cost>;

}  // namespace embplan::inline EMBPLAN_ABI::search::detail
