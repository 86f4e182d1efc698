#pragma once
// Every allocation of the program that includes this header (in exactly one
// of its files: it replaces the global operator new and delete) is counted:
// live_bytes is what is allocated now, peak_bytes its high-water mark since a
// benchmark last reset it (peak_bytes.store(live_bytes.load()) before the
// measured call). Bytes are malloc_usable_size's, what the allocator really
// hands out. A benchmark's own counter, not the library's: the library keeps
// no global state.

#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace embplan_bench {

inline std::atomic<std::int64_t> live_bytes{0};
inline std::atomic<std::int64_t> peak_bytes{0};

namespace detail {

inline void note_alloc(void* p) noexcept {
  const auto n = static_cast<std::int64_t>(malloc_usable_size(p));
  const std::int64_t now = live_bytes.fetch_add(n, std::memory_order_relaxed) + n;
  std::int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

inline void* counted_alloc(std::size_t n, std::size_t align) {
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(n == 0 ? 1 : n);
  } else if (posix_memalign(&p, align, n == 0 ? align : n) != 0) {
    p = nullptr;
  }
  if (p == nullptr) throw std::bad_alloc();
  note_alloc(p);
  return p;
}

// Not inlined: inlined into a delete of a new-expression's pointer, GCC 12
// sees free() of memory from operator new and warns (-Wmismatched-new-delete),
// though this operator new got it from malloc.
[[gnu::noinline]] inline void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  live_bytes.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace detail

}  // namespace embplan_bench

void* operator new(std::size_t n) {
  return embplan_bench::detail::counted_alloc(n, 0);
}
void* operator new[](std::size_t n) {
  return embplan_bench::detail::counted_alloc(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return embplan_bench::detail::counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return embplan_bench::detail::counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return embplan_bench::detail::counted_alloc(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return embplan_bench::detail::counted_alloc(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  embplan_bench::detail::counted_free(p);
}
void operator delete[](void* p) noexcept {
  embplan_bench::detail::counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  embplan_bench::detail::counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  embplan_bench::detail::counted_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  embplan_bench::detail::counted_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  embplan_bench::detail::counted_free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  embplan_bench::detail::counted_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  embplan_bench::detail::counted_free(p);
}
