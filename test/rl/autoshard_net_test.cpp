#include "embplan/rl/autoshard_net.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/init.hpp"
#include "embplan/nn/serialize.hpp"
#include "support/golden_tensor.hpp"
#include "support/message_of.hpp"

namespace autoshard_net_test {

using embplan::nn::matrix;

embplan::io::safetensors_file golden() {
  return embplan::io::read_safetensors(std::string(EMBPLAN_SOURCE_DIR) +
                                       "/test/rl/golden/autoshard_net_golden.safetensors");
}

matrix tensor(const embplan::io::safetensors_file& f, const std::string& name) {
  return embplan::test::golden_rows(f, name);
}

// One episode's step inputs: the tables placed so far grouped by shard.
struct episode {
  matrix tables;         // [steps, features]
  matrix state_other;    // [steps, 1]
  matrix actions_other;  // [steps, shards]
  std::vector<std::int64_t> assignment;
  Eigen::Index shards = 0;

  embplan::rl::autoshard_step_output run_step(embplan::rl::autoshard_inference& net,
                                              Eigen::Index t) const {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(shards), 0);
    std::vector<Eigen::Index> rows;
    for (Eigen::Index s = 0; s < shards; ++s) {
      for (Eigen::Index i = 0; i < t; ++i) {
        if (assignment[static_cast<std::size_t>(i)] == s) {
          rows.push_back(i);
          ++counts[static_cast<std::size_t>(s)];
        }
      }
    }
    matrix held(static_cast<Eigen::Index>(rows.size()), tables.cols());
    for (std::size_t r = 0; r < rows.size(); ++r)
      held.row(static_cast<Eigen::Index>(r)) = tables.row(rows[r]);
    const matrix other = actions_other.row(t).transpose();
    return net.step({.table = tables.row(t),
                     .state_other = state_other.row(t),
                     .held_tables = held,
                     .shard_tables = counts,
                     .actions_other = other});
  }
};

embplan::nn::autoshard_net random_net(std::uint64_t seed) {
  embplan::nn::autoshard_net net(21, 1, 1);
  embplan::rng gen(seed);
  for (auto& [name, p] : net.named_parameters())
    for (Eigen::Index i = 0; i < p->size(); ++i)
      p->data()[i] = static_cast<float>(gen.uniform(-0.3, 0.3));
  return net;
}

}  // namespace autoshard_net_test

TEST_CASE("autoshard_inference: the PyTorch golden episode's logits, values and costs") {
  using namespace autoshard_net_test;
  const auto f = golden();
  embplan::nn::autoshard_net net(21, 1, 1);
  embplan::nn::load_state_dict(net, f, "net");
  episode e{.tables = tensor(f, "tables"),
            .state_other = tensor(f, "state_other"),
            .actions_other = tensor(f, "actions_other"),
            .assignment = {},
            .shards = 4};
  for (const float a : f.tensors.at("assignment").values)
    e.assignment.push_back(static_cast<std::int64_t>(a));
  const matrix logits = tensor(f, "logits");
  const matrix value = tensor(f, "value");
  REQUIRE(logits.rows() == 7);
  embplan::rl::autoshard_inference run(net);
  for (Eigen::Index t = 0; t < 7; ++t) {
    CAPTURE(t);
    const auto out = e.run_step(run, t);
    REQUIRE(out.logits.size() == 4);
    for (Eigen::Index a = 0; a < 4; ++a)
      CHECK(out.logits[static_cast<std::size_t>(a)] ==
            doctest::Approx(logits(t, a)).epsilon(1e-5).scale(1.0));
    CHECK(out.value == doctest::Approx(value(t, 0)).epsilon(1e-5).scale(1.0));
  }
  // The cost head on each shard's summed table latents after the episode.
  matrix latent;
  run.table_latent(e.tables, latent);
  matrix sums = matrix::Zero(4, latent.cols());
  for (Eigen::Index i = 0; i < 7; ++i)
    sums.row(e.assignment[static_cast<std::size_t>(i)]) += latent.row(i);
  matrix cost;
  run.cost(sums, cost);
  const matrix expected = tensor(f, "cost");
  for (Eigen::Index s = 0; s < 4; ++s)
    CHECK(cost(s, 0) == doctest::Approx(expected(s, 0)).epsilon(1e-5).scale(1.0));
  // reset(): a new episode from zero state gives step 0's figures again.
  run.reset();
  const auto again = e.run_step(run, 0);
  CHECK(again.logits[0] == doctest::Approx(logits(0, 0)).epsilon(1e-5).scale(1.0));
}

TEST_CASE("autoshard_inference: any shard count; relabelling shards relabels the logits") {
  using namespace autoshard_net_test;
  const auto net = random_net(5);
  embplan::rng gen(9);
  for (const Eigen::Index shards : {2, 4, 8, 16}) {
    CAPTURE(shards);
    episode e;
    e.shards = shards;
    e.tables.resize(6, 21);
    e.state_other.resize(6, 1);
    e.actions_other.resize(6, shards);
    for (Eigen::Index i = 0; i < e.tables.size(); ++i)
      e.tables.data()[i] = static_cast<float>(gen.uniform(-1.0, 1.0));
    for (Eigen::Index t = 0; t < 6; ++t) {
      e.state_other(t, 0) = static_cast<float>(6 - t) / 6.0f;
      for (Eigen::Index s = 0; s < shards; ++s)
        e.actions_other(t, s) = static_cast<float>(gen.uniform(0.0, 3.0));
      e.assignment.push_back(static_cast<std::int64_t>(gen.uniform(0.0, 1.0) * double(shards)) %
                             shards);
    }
    // The same episode with shard s called shards-1-s.
    episode r = e;
    for (auto& a : r.assignment)
      a = shards - 1 - a;
    r.actions_other = e.actions_other.rowwise().reverse();
    embplan::rl::autoshard_inference a(net), b(net);
    for (Eigen::Index t = 0; t < 6; ++t) {
      const auto x = e.run_step(a, t);
      const auto y = r.run_step(b, t);
      REQUIRE(x.logits.size() == static_cast<std::size_t>(shards));
      CHECK(x.value == y.value);
      for (Eigen::Index s = 0; s < shards; ++s) {
        CHECK(std::isfinite(x.logits[static_cast<std::size_t>(s)]));
        CHECK(x.logits[static_cast<std::size_t>(s)] ==
              doctest::Approx(y.logits[static_cast<std::size_t>(shards - 1 - s)]).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("autoshard_inference: inputs of the wrong shape name the field and the shape") {
  using namespace autoshard_net_test;
  using embplan::test::message_of;
  const auto net = random_net(1);
  embplan::rl::autoshard_inference run(net);
  const matrix table = matrix::Zero(1, 21);
  const matrix other = matrix::Zero(1, 1);
  const matrix held = matrix::Zero(2, 21);
  const std::vector<std::int64_t> counts{1, 0, 1};
  const matrix actions = matrix::Zero(3, 1);
  const auto step = [&](const matrix& t, const matrix& o, const matrix& h,
                        const std::vector<std::int64_t>& c, const matrix& a) {
    return message_of([&] {
      (void)run.step(
          {.table = t, .state_other = o, .held_tables = h, .shard_tables = c, .actions_other = a});
    });
  };
  CHECK(step(table, other, held, counts, actions) == "no error");
  const embplan::nn::autoshard_net empty;
  CHECK(message_of([&] {
          embplan::rl::autoshard_inference bad(empty);
        }).find("'autoshard_inference.net' = \"(empty)\"") != std::string::npos);
  CHECK(step(matrix::Zero(1, 20), other, held, counts, actions)
            .find("'autoshard_step_input.table.shape' = \"[1, 20]\": expected [1, 21]") !=
        std::string::npos);
  CHECK(step(table, matrix::Zero(1, 2), held, counts, actions)
            .find("'autoshard_step_input.state_other.shape' = \"[1, 2]\"") != std::string::npos);
  CHECK(step(table, other, held, {}, matrix::Zero(0, 1))
            .find("'autoshard_step_input.shard_tables.size' = 0") != std::string::npos);
  CHECK(step(table, other, held, counts, matrix::Zero(2, 1))
            .find("'autoshard_step_input.actions_other.shape' = \"[2, 1]\": expected [3, 1]") !=
        std::string::npos);
  CHECK(step(table, other, held, {1, -1, 2}, actions)
            .find("'autoshard_step_input.shard_tables[1]' = -1") != std::string::npos);
  CHECK(step(table, other, matrix::Zero(3, 21), counts, actions)
            .find("'autoshard_step_input.held_tables.shape' = \"[3, 21]\": expected [2, 21]") !=
        std::string::npos);
}
