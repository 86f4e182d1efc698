#include "embplan/cost/dreamshard_cost.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/dreamshard_policy_net.hpp"
#include "embplan/search/sorted_greedy.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

using embplan::test::message_of;
namespace nn = embplan::nn;

namespace {

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("embplan_mdp_" + name);
}

embplan::dreamshard_cost seeded_cost(std::uint64_t seed) {
  return embplan::dreamshard_cost(nn::make_dreamshard_model(21, 4, seed),
                                  embplan::dreamshard_cost_metadata{.meter = "cpu"});
}

}  // namespace

TEST_CASE("DreamShard's features: rows, pooling and size z-scored over the task, the rest raw") {
  auto t = embplan_test::search_task(1, 5, 2);
  t.tables[2].reuse_hist[3] = 0.25;
  const auto x = embplan::dreamshard_task_features(t);
  REQUIRE(x.rows() == 5);
  REQUIRE(x.cols() == 21);
  double mean[3] = {0, 0, 0};
  double var[3] = {0, 0, 0};
  const auto raw = [&](std::size_t i, int k) {
    const auto& s = t.tables[i];
    return k == 0   ? static_cast<double>(s.rows)
           : k == 1 ? s.pooling_factor
                    : static_cast<double>(s.rows) * static_cast<double>(s.dim);
  };
  for (int k = 0; k < 3; ++k) {
    for (std::size_t i = 0; i < 5; ++i)
      mean[k] += raw(i, k) / 5.0;
    for (std::size_t i = 0; i < 5; ++i)
      var[k] += (raw(i, k) - mean[k]) * (raw(i, k) - mean[k]) / 5.0;  // np.std: population
  }
  for (std::size_t i = 0; i < 5; ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    CHECK(x(r, 0) == static_cast<float>(t.tables[i].dim));
    for (int k = 0; k < 3; ++k)
      CHECK(x(r, k + 1) == static_cast<float>((raw(i, k) - mean[k]) / std::sqrt(var[k])));
    for (Eigen::Index b = 0; b < 17; ++b)
      CHECK(x(r, 4 + b) == static_cast<float>(t.tables[i].reuse_hist[static_cast<std::size_t>(b)]));
  }
  // Equal values (0 / 0 in the authors' code) give 0, not NaN.
  auto same = t;
  for (auto& s : same.tables)
    s.pooling_factor = 3.0;
  const auto y = embplan::dreamshard_task_features(same);
  for (Eigen::Index r = 0; r < 5; ++r)
    CHECK(y(r, 2) == 0.0f);
}

TEST_CASE("dreamshard_cost: the heads as a cost model, the overall head, the sort key") {
  const auto t = embplan_test::search_task(2, 8, 3);
  const auto cost = seeded_cost(5);
  const auto x = embplan::dreamshard_task_features(t);
  const std::vector<embplan::shard> group = {embplan::whole_table(t, 1, 0),
                                             embplan::whole_table(t, 4, 0)};
  // The network run by hand on the two rows.
  nn::dreamshard_cost_tape tape;
  nn::matrix rows(2, 21);
  rows.row(0) = x.row(1);
  rows.row(1) = x.row(4);
  const std::vector<std::int64_t> g = {0, 0};
  const std::vector<std::int64_t> placement = {0};
  nn::dreamshard_cost_forward(cost.network(), rows, g, placement, 1, tape);
  const auto heads = cost.device_cost(t, group);
  CHECK(heads.fwd_ms == static_cast<double>(tape.device_costs(0, 0)));
  CHECK(heads.comm_ms == static_cast<double>(tape.device_costs(0, 1)));
  CHECK(heads.bwd_ms == static_cast<double>(tape.device_costs(0, 2)));
  const auto c = cost.compute(t, group, 0);
  CHECK(c.fwd_ms == heads.fwd_ms);
  CHECK(c.bwd_ms == heads.bwd_ms + heads.comm_ms);

  // The sort key: fwd + comm + bwd of one table, as dreamshard_single_table_costs.
  std::vector<double> keys;
  embplan::rl::dreamshard_single_table_costs(cost.network(), x, keys);
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    CHECK(cost.shard_cost(t, embplan::whole_table(t, i, 2)) ==
          doctest::Approx(keys[i]).epsilon(1e-5));

  // An empty device is one all-zero row (the authors' Env / Buffer).
  nn::matrix zero = nn::matrix::Zero(1, 21);
  const std::vector<std::int64_t> g1 = {0};
  nn::dreamshard_cost_forward(cost.network(), zero, g1, placement, 1, tape);
  const auto empty = cost.device_cost(t, {});
  CHECK(empty.fwd_ms == static_cast<double>(tape.device_costs(0, 0)));

  // Overall head = the network's max over the devices' sums.
  std::vector<std::size_t> assignment = {0, 0, 1, 1, 0, 1, 0, 0};  // device 2 empty
  const auto p = embplan::table_wise_plan(t, assignment);
  nn::matrix all(9, 21);
  std::vector<std::int64_t> dev;
  Eigen::Index r = 0;
  for (std::size_t d = 0; d < 3; ++d) {
    bool any = false;
    for (std::size_t i = 0; i < assignment.size(); ++i) {
      if (assignment[i] != d) continue;
      all.row(r++) = x.row(static_cast<Eigen::Index>(i));
      dev.push_back(static_cast<std::int64_t>(d));
      any = true;
    }
    if (!any) {
      all.row(r++).setZero();
      dev.push_back(static_cast<std::int64_t>(d));
    }
  }
  const std::vector<std::int64_t> three = {0, 0, 0};
  nn::dreamshard_cost_forward(cost.network(), all, dev, three, 1, tape);
  CHECK(cost.overall_ms(t, p) == static_cast<double>(tape.out[3](0, 0)));

  // evaluate(): per device compute, no communication part.
  const auto priced = embplan::evaluate(t, p, cost);
  CHECK(priced.devices[2].fwd_compute_ms == empty.fwd_ms);
  CHECK(priced.devices[0].fwd_comm_ms == 0.0);
  static_assert(embplan::cost_unit_of<embplan::dreamshard_cost> == embplan::cost_unit::ms);
}

TEST_CASE("dreamshard_cost composes in a planner") {
  const auto t = embplan_test::search_task(3, 12, 4);
  const embplan::planner<embplan::dreamshard_cost, embplan::sorted_greedy, embplan::memory_capacity,
                         embplan::neg_max_cost_reward>
      p(seeded_cost(1), {}, {}, {});
  const auto r = p(t);
  CHECK(r.ok);
  CHECK(r.meter == "dreamshard_cost");
  embplan::validate(t, r.placement);
}

TEST_CASE("dreamshard_cost files: round trip, the authors' export, bad files") {
  const auto t = embplan_test::search_task(4, 6, 2);
  const auto cost = seeded_cost(9);
  const auto path = temp_file("cost.safetensors");
  cost.save(path);
  const auto back = embplan::dreamshard_cost::load(path);
  CHECK(back.metadata().meter == "cpu");
  CHECK(back.metadata().features == embplan::feature_set::embplan21);
  const auto p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 0, 1, 1, 0});
  CHECK(back.overall_ms(t, p) == cost.overall_ms(t, p));
  CHECK(back.shard_cost(t, embplan::whole_table(t, 3, 0)) ==
        cost.shard_cost(t, embplan::whole_table(t, 3, 0)));

  // The authors' state_dict: no metadata; without value_net, or with an 8-device one.
  auto file = nn::state_dict(cost.network());
  file.tensors.erase("value_net.weight");
  file.tensors.erase("value_net.bias");
  embplan::io::write_safetensors(path, file);
  const auto exported = embplan::dreamshard_cost::load(path);
  CHECK(exported.metadata().meter == "unknown");
  CHECK(exported.overall_ms(t, p) == cost.overall_ms(t, p));
  file.tensors["value_net.weight"] =
      embplan::io::tensor{"F32", {1, 512}, std::vector<float>(512, 0.5f)};
  file.tensors["value_net.bias"] = embplan::io::tensor{"F32", {1}, {0.0f}};
  embplan::io::write_safetensors(path, file);
  CHECK(embplan::dreamshard_cost::load(path).network().value_net.in_features() == 512);

  SUBCASE("another feature set") {
    auto f = nn::state_dict(
        cost.network(), {},
        {{"embplan.kind", "dreamshard_model"}, {"embplan.feature_set", "neuroshard20"}});
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { embplan::dreamshard_cost::load(path); });
    CHECK(msg.find("metadata.embplan.feature_set") != std::string::npos);
    CHECK(msg.find("\"neuroshard20\"") != std::string::npos);
  }
  SUBCASE("another kind of model") {
    auto f = nn::state_dict(cost.network(), {}, {{"embplan.kind", "compute_cost_net"}});
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { embplan::dreamshard_cost::load(path); });
    CHECK(msg ==
          path.string() + ": this is a compute cost model, expected a DreamShard cost model");
  }
  SUBCASE("another architecture") {
    auto m = nn::make_dreamshard_model(20, 4, 1);
    embplan::io::write_safetensors(path, nn::state_dict(m));
    const auto msg = message_of([&] { embplan::dreamshard_cost::load(path); });
    CHECK(msg.find("table_fc_0.weight") != std::string::npos);
    CHECK(msg.find("[128, 20]") != std::string::npos);
  }
  SUBCASE("a value_net that is not 64 x devices wide") {
    auto f = nn::state_dict(cost.network());
    f.tensors["value_net.weight"] = embplan::io::tensor{"F32", {1, 100}, std::vector<float>(100)};
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { embplan::dreamshard_cost::load(path); });
    CHECK(msg.find("value_net.weight") != std::string::npos);
    CHECK(msg.find("[1, 100]") != std::string::npos);
  }
  SUBCASE("NaN in a weight") {
    auto f = nn::state_dict(cost.network());
    f.tensors["cost_fc_1.bias"].values[3] = std::numeric_limits<float>::quiet_NaN();
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { embplan::dreamshard_cost::load(path); });
    CHECK(msg.find("cost_fc_1.bias") != std::string::npos);
    CHECK(msg.find("nan") != std::string::npos);
  }
  SUBCASE("a model built in code with NaN, or with another feature count") {
    auto m = nn::make_dreamshard_model(21, 4, 1);
    m.overall_fc_1.weight(0, 5) = std::numeric_limits<float>::infinity();
    const auto msg = message_of([&] { embplan::dreamshard_cost c(m); });
    CHECK(msg.find("overall_fc_1.weight[0, 5]") != std::string::npos);
    CHECK(msg.find("inf") != std::string::npos);
    const auto narrow =
        message_of([&] { embplan::dreamshard_cost c(nn::make_dreamshard_model(20, 4, 1)); });
    CHECK(narrow.find("table_fc_0.in_features") != std::string::npos);
    CHECK(narrow.find("= 20") != std::string::npos);
  }
  SUBCASE("an empty model") {
    const auto msg = message_of(
        [&] { embplan::dreamshard_cost{}.shard_cost(t, embplan::whole_table(t, 0, 0)); });
    CHECK(msg.find("'dreamshard_cost'") != std::string::npos);
    CHECK(msg.find("(empty)") != std::string::npos);
  }
  std::filesystem::remove(path);
}
