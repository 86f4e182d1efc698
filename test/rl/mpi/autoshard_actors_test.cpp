// rl/mpi/autoshard_actors.hpp under `mpirun -np 2` (test/CMakeLists.txt runs
// this executable through MPIEXEC): AutoShard's actors as two ranks train the
// same policy as one process, and a rank that fails to measure fails every
// rank. doctest's own main is not used: MPI must be initialised around the
// test run.
#include "embplan/rl/mpi/autoshard_actors.hpp"  // first: it picks MPI's C API

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/nn/module.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace {

using embplan::test::message_of;
namespace rl = embplan::rl;
namespace nn = embplan::nn;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The analytic model, logging every device it measures (task, device, pieces)
// and throwing on rank `fail_on` (-1: never).
struct logging_meter {
  embplan::analytic_cost model{};
  std::shared_ptr<std::vector<std::size_t>> log = std::make_shared<std::vector<std::size_t>>();
  int fail_on = -1;
  std::string failure = "device lost";

  std::string_view name() const noexcept { return "logging"; }
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return model.shard_cost(t, s);
  }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> group,
                                std::size_t device) const {
    if (world_rank() == fail_on) throw embplan::error(failure);
    log->insert(log->end(), {t.tables.size(), device, group.size()});
    return model.compute(t, group, device);
  }
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    model.communication(t, dim_sum, start_ms, out);
  }
};

std::vector<embplan::task> small_tasks() {
  std::vector<embplan::task> out;
  for (std::uint64_t i = 0; i < 3; ++i)
    out.push_back(embplan_test::search_task(40 + i, 10 + 2 * i, 3));
  return out;
}

// An odd batch: rank 0 plays three episodes of each update, rank 1 two.
rl::autoshard_train_options quick(std::int64_t updates) {
  return {.updates = updates, .batch = 5, .cost_updates = 3, .cost_batch = 16, .seed = 5};
}

// Bit for bit (NaN and -0.0 included).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

bool same_bits(const nn::matrix& a, const nn::matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.size() == 0 ||
          std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(float)) == 0);
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Every parameter, bit for bit.
bool same_net(const nn::autoshard_net& a, const nn::autoshard_net& b) {
  return std::ranges::equal(a.named_parameters(), b.named_parameters(),
                            [](const auto& x, const auto& y) {
                              return x.first == y.first && same_bits(*x.second, *y.second);
                            });
}

bool same_sample(const rl::autoshard_sample& a, const rl::autoshard_sample& b) {
  const auto& x = a.trajectory;
  const auto& y = b.trajectory;
  const auto matrices = [](const nn::matrix& m, const nn::matrix& n) { return same_bits(m, n); };
  return a.task == b.task && a.fits == b.fits && same_bits(a.reward, b.reward) &&
         same_bits(a.balance, b.balance) && same_bits(a.shard_ms, b.shard_ms) &&
         std::ranges::equal(a.shard_tables, b.shard_tables, matrices) &&
         same_bits(x.inputs.tables, y.inputs.tables) &&
         same_bits(x.inputs.state_other, y.inputs.state_other) &&
         same_bits(x.inputs.held_tables, y.inputs.held_tables) &&
         same_bits(x.inputs.action_count, y.inputs.action_count) &&
         same_bits(x.inputs.held_count, y.inputs.held_count) &&
         same_bits(x.inputs.actions_other, y.inputs.actions_other) &&
         same_bits(x.action, y.action) && same_bits(x.behaviour_logp, y.behaviour_logp) &&
         same_bits(x.reward, y.reward);
}

rl::autoshard_policy untrained(std::span<const embplan::task> tasks) {
  return rl::autoshard_policy::untrained(1, rl::autoshard_feature_stats::of(tasks));
}

}  // namespace

TEST_CASE("autoshard actors: a sample survives its bytes bit for bit; bad bytes name the field") {
  const auto tasks = small_tasks();
  const auto batch = rl::detail::autoshard_play(
      tasks, embplan::analytic_cost{}, embplan::all_of<>{}, quick(1), untrained(tasks), 0, 0, 1);
  auto odd = batch[1];
  odd.reward = -0.0;
  odd.balance = std::numeric_limits<double>::quiet_NaN();
  odd.trajectory.behaviour_logp.front() = std::numeric_limits<double>::denorm_min();
  odd.trajectory.inputs.tables(0, 0) = std::numeric_limits<float>::infinity();
  odd.shard_ms.push_back(std::numeric_limits<double>::quiet_NaN());
  odd.shard_tables.emplace_back(0, 7);
  odd.fits = false;
  odd.task = 4'000'000'000u;
  std::vector<rl::autoshard_sample> samples(batch.begin(), batch.end());
  samples.push_back(odd);
  samples.emplace_back();  // all default, empty matrices
  for (const auto& s : samples) {
    const auto bytes = rl::mpi::encode_autoshard_sample(s);
    const auto back = rl::mpi::decode_autoshard_sample(bytes);
    CHECK(same_sample(s, back));
    CHECK(rl::mpi::encode_autoshard_sample(back) == bytes);
  }

  const auto bytes = rl::mpi::encode_autoshard_sample(batch[0]);
  const auto bad = [](std::vector<std::byte> b, const std::string& want) {
    const auto m = message_of([&] { (void)rl::mpi::decode_autoshard_sample(b); });
    CHECK_MESSAGE(m.find(want) != std::string::npos, m);
  };
  auto version = bytes;
  version[4] = std::byte{2};
  bad(version, "'autoshard_sample.version' = 2: expected 1");
  auto magic = bytes;
  std::swap(magic[0], magic[3]);
  bad(magic, "'autoshard_sample.magic'");
  bad({bytes.begin(), bytes.begin() + 6}, "'autoshard_sample.version.bytes_left' = 2");
  bad({bytes.begin(), bytes.end() - 3}, "'autoshard_sample.shard_ms.");
  auto longer = bytes;
  longer.push_back(std::byte{0});
  bad(longer, "'autoshard_sample.bytes_after' = 1");
  // The tables' row count, far more than the bytes hold.
  auto rows = bytes;
  const std::int64_t huge = std::int64_t{1} << 40;
  std::memcpy(rows.data() + 12, &huge, sizeof huge);
  bad(rows, "'autoshard_sample.trajectory.inputs.tables.rows' = 1099511627776");
  auto fits = rl::mpi::encode_autoshard_sample(rl::autoshard_sample{});
  // A default sample: magic, version, task, 3 empty matrices, 2 empty vectors,
  // an empty matrix, 3 empty vectors, the reward; then `fits`.
  const std::size_t at = 4 + 4 + 4 + 3 * 16 + 2 * 8 + 16 + 3 * 8 + 8;
  fits[at] = std::byte{2};
  bad(fits, "'autoshard_sample.fits' = 2: expected 0 or 1");
}

TEST_CASE("autoshard actors: rank r plays the episodes k with k % 2 == r, every rank gets all") {
  REQUIRE(world_size() == 2);
  const auto tasks = small_tasks();
  const auto o = quick(1);
  const auto policy = untrained(tasks);
  // The memory rule: every plan fits, so each episode measures its 3 devices.
  const logging_meter meter{};
  const auto player =
      rl::mpi::autoshard_mpi_player(MPI_COMM_WORLD, tasks, meter, o, embplan::memory_capacity{});
  CHECK(!player.concurrent);
  const auto batch = player.play(policy, 2);

  const logging_meter alone{};
  const auto local =
      rl::detail::autoshard_play(tasks, alone, embplan::memory_capacity{}, o, policy, 2, 0, 1);
  REQUIRE(batch.size() == 5);
  for (std::size_t k = 0; k < batch.size(); ++k)
    CHECK_MESSAGE(same_sample(batch[k], local[k]), "episode " << k);
  // This rank measured its share only: rank 0 episodes 0, 2, 4, rank 1 1, 3.
  const auto rank = static_cast<std::size_t>(world_rank());
  const logging_meter share{};
  (void)rl::detail::autoshard_play(tasks, share, embplan::memory_capacity{}, o, policy, 2, rank, 2);
  CHECK(*meter.log == *share.log);
  CHECK(meter.log->size() == 3 * 3 * (rank == 0 ? 3 : 2));
}

TEST_CASE("autoshard actors: two ranks train the policy of one process, bit for bit") {
  REQUIRE(world_size() == 2);
  const auto tasks = small_tasks();
  const embplan::analytic_cost meter{};
  for (const std::int64_t lag : {1, 0}) {
    auto o = quick(3);
    o.policy_lag = lag;
    auto alone = rl::autoshard_initial_state(tasks, o);
    rl::autoshard_train(tasks, meter, o, alone);

    auto ranked = o;
    ranked.actors = 2;  // threads within a rank change nothing either
    auto st = rl::autoshard_initial_state(tasks, ranked);
    std::vector<double> rewards;
    rl::autoshard_train(tasks, rl::mpi::autoshard_mpi_player(MPI_COMM_WORLD, tasks, meter, ranked),
                        ranked, st,
                        [&](const rl::autoshard_progress& p) { rewards.push_back(p.mean_reward); });
    CHECK(st.updates_done == 3);
    CHECK(st.episodes == 15);
    CHECK(same_net(st.net, alone.net));
    CHECK(st.learning_curve == alone.learning_curve);
    CHECK(st.measured == alone.measured);
    CHECK(rewards.size() == 3);
    CHECK(!same_net(st.net, rl::autoshard_initial_state(tasks, o).net));
  }
}

TEST_CASE("autoshard actors: a rank that fails to measure fails every rank, named, no hang") {
  REQUIRE(world_size() == 2);
  const auto tasks = small_tasks();
  const auto o = quick(2);
  logging_meter meter{};
  meter.fail_on = 1;
  auto st = rl::autoshard_initial_state(tasks, o);
  const auto m = message_of([&] {
    rl::autoshard_train(tasks, rl::mpi::autoshard_mpi_player(MPI_COMM_WORLD, tasks, meter, o), o,
                        st);
  });
  CHECK_MESSAGE(
      m.find("autoshard actors: rank 1 failed to play/measure update 0: device lost") == 0, m);
  CHECK(st.updates_done == 0);

  // Both fail: the lowest rank is named, the other counted.
  logging_meter both{};
  both.fail_on = world_rank();
  both.failure = "rank " + std::to_string(world_rank()) + "'s device lost";
  const auto m2 = message_of([&] {
    rl::autoshard_train(tasks, rl::mpi::autoshard_mpi_player(MPI_COMM_WORLD, tasks, both, o), o,
                        st);
  });
  CHECK_MESSAGE(m2 ==
                    "autoshard actors: rank 0 failed to play/measure update 0: rank 0's device "
                    "lost (and 1 more rank failed)",
                m2);

  // Options that differ between ranks: refused on every rank at the first exchange.
  auto other = o;
  if (world_rank() == 1) other.seed = 6;
  auto st_other = rl::autoshard_initial_state(tasks, other);
  const embplan::analytic_cost fine{};
  const auto m3 = message_of([&] {
    rl::autoshard_train(tasks, rl::mpi::autoshard_mpi_player(MPI_COMM_WORLD, tasks, fine, other),
                        other, st_other);
  });
  CHECK_MESSAGE(m3.find("autoshard actors: rank 1 plays update 0 of batch 5 with seed 6, rank 0 "
                        "update 0 of batch 5 with seed 5") == 0,
                m3);

  // The ranks are still in step: training goes on together afterwards.
  rl::autoshard_train(tasks, rl::mpi::autoshard_mpi_player(MPI_COMM_WORLD, tasks, fine, o), o, st);
  CHECK(st.updates_done == 2);
}

#include "support/mpi_doctest_main.hpp"
