// Plans on the learned cost model do not depend on the packed network's
// kernel: NeuroShard's search and its local-search variant
// on seeded NeuroShard-protocol tasks give the same placement and the same
// costs, bit for bit, whether neural_cost runs the scalar, AVX2 or AVX-512
// kernel (each only where this CPU runs it; a skipped one is reported).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/nn/packed_compute_cost_net.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/local_search.hpp"

namespace {

using embplan::nn::simd_kernel;

const embplan::neural_cost& bundled() {
  static const auto m = embplan::neural_cost::load(std::string(EMBPLAN_SOURCE_DIR) +
                                                   "/data/cost/cpu_compute_model.safetensors");
  return m;
}

// The kernels besides scalar that this CPU runs; the others are named on stdout.
std::vector<simd_kernel> wide_kernels() {
  std::vector<simd_kernel> out;
  for (const auto k : {simd_kernel::avx2, simd_kernel::avx512}) {
    if (embplan::nn::simd_kernel_supported(k)) {
      out.push_back(k);
    } else {
      std::cout << "neural_isa_test: kernel " << embplan::nn::to_string(k)
                << " skipped (this CPU or build does not run it)\n";
    }
  }
  return out;
}

// Ten 4-device and ten 8-device tasks of NeuroShard's protocol (Table 5).
const std::vector<embplan::task>& tasks() {
  static const auto all = [] {
    const auto pool = embplan::data::synthetic_pool({.seed = 0});
    auto out = embplan::data::generate_tasks(
        pool, {.devices = 4, .max_dim = 128, .count = 10, .seed = 19});
    const auto eight = embplan::data::generate_tasks(
        pool, {.devices = 8, .max_dim = 128, .count = 10, .seed = 19});
    out.insert(out.end(), eight.begin(), eight.end());
    return out;
  }();
  return all;
}

// Bitwise: the same doubles, not merely equal ones (-0.0 and 0.0 differ here).
bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

void check_same_cost(const embplan::plan_cost& a, const embplan::plan_cost& b) {
  REQUIRE(a.devices.size() == b.devices.size());
  for (std::size_t d = 0; d < a.devices.size(); ++d) {
    CAPTURE(d);
    CHECK(same_bits(a.devices[d].fwd_compute_ms, b.devices[d].fwd_compute_ms));
    CHECK(same_bits(a.devices[d].bwd_compute_ms, b.devices[d].bwd_compute_ms));
    CHECK(same_bits(a.devices[d].total_ms(), b.devices[d].total_ms()));
  }
  CHECK(a.memory_bytes == b.memory_bytes);
  CHECK(a.dim_sum == b.dim_sum);
}

template <class Planner>
void check_planner(const std::string& name) {
  const auto wide = wide_kernels();
  const Planner reference(bundled().with_kernel(simd_kernel::scalar), {}, {}, {});
  std::size_t planned = 0;
  for (std::size_t i = 0; i < tasks().size(); ++i) {
    const embplan::task& t = tasks()[i];
    CAPTURE(name);
    CAPTURE(i);
    const std::uint64_t seed = 7 + i;
    const auto ref = reference(t, seed);
    planned += ref.ok ? 1 : 0;
    for (const auto k : wide) {
      CAPTURE(embplan::nn::to_string(k));
      const Planner other(bundled().with_kernel(k), {}, {}, {});
      REQUIRE(other.cost().kernel() == k);
      const auto r = other(t, seed);
      CHECK(r.ok == ref.ok);
      CHECK(r.placement == ref.placement);
      CHECK(same_bits(r.reward, ref.reward));
      check_same_cost(r.cost_ms, ref.cost_ms);
      check_same_cost(r.search_cost, ref.search_cost);
    }
  }
  // Most tasks are planned (NeuroShard's beam fits nothing on one of them):
  // the comparison is of plans, not of failures.
  CHECK(planned + 1 >= tasks().size());
}

}  // namespace

TEST_CASE("neural_cost::with_kernel picks the packed network's kernel") {
  CHECK(bundled().kernel() != simd_kernel::automatic);
  CHECK(bundled().with_kernel(simd_kernel::scalar).kernel() == simd_kernel::scalar);
  CHECK(bundled().with_kernel(simd_kernel::automatic).kernel() == bundled().kernel());
  // The copy keeps the model's metadata and communication model.
  CHECK(bundled().with_kernel(simd_kernel::scalar).metadata().meter == bundled().metadata().meter);
  CHECK(bundled().with_kernel(simd_kernel::scalar).communication_name() ==
        bundled().communication_name());
  for (const auto k : {simd_kernel::avx2, simd_kernel::avx512}) {
    if (embplan::nn::simd_kernel_supported(k)) continue;
    try {
      (void)bundled().with_kernel(k);
      FAIL("no error for a kernel this CPU does not run");
    } catch (const embplan::error& e) {
      const std::string msg = e.what();
      CHECK(msg.find("packed_compute_cost_net.kernel") != std::string::npos);
      CHECK(msg.find(std::string(embplan::nn::to_string(k))) != std::string::npos);
    }
  }
}

// neuroshard_plus: its unbounded grid pass plans (nearly) every task, so the
// comparison is of plans (the faithful search fails 2 of these 20).
TEST_CASE("neuroshard_plus plans on the learned model are the same on every kernel") {
  check_planner<embplan::basic_neuroshard_plus_planner<embplan::neural_cost>>("neuroshard_plus");
}

TEST_CASE("neuroshard_ls plans on the learned model are the same on every kernel") {
  check_planner<embplan::basic_neuroshard_ls_planner<embplan::neural_cost>>("neuroshard_ls");
}
