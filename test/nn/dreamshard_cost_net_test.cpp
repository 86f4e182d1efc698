#include "embplan/nn/dreamshard_cost_net.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/serialize.hpp"
#include "gradient_check.hpp"
#include "support/message_of.hpp"

namespace fs = std::filesystem;
using embplan::nn::dreamshard_cost_batch;
using embplan::nn::dreamshard_cost_tape;
using embplan::nn::dreamshard_model;
using embplan::nn::matrix;

namespace {

// Two placements: 3 devices (tables 0-1 | 2 | none), 2 devices (3-5 | 6).
dreamshard_cost_batch small_batch(Eigen::Index features, embplan::rng& gen) {
  dreamshard_cost_batch b;
  b.features = nn_test::random_matrix(7, features, gen, 2.0);
  b.group = {0, 0, 1, 3, 3, 3, 4};
  b.placement_of = {0, 0, 0, 1, 1};
  b.device_targets = nn_test::random_matrix(5, 3, gen);
  b.overall_targets = nn_test::random_matrix(2, 1, gen);
  return b;
}

double loss_of(const dreamshard_model& m, const dreamshard_cost_batch& b) {
  dreamshard_cost_tape t;
  embplan::nn::dreamshard_cost_forward(m, b.features, b.group, b.placement_of,
                                       b.overall_targets.rows(), t);
  return embplan::nn::dreamshard_cost_loss(t, b, nullptr, nullptr);
}

}  // namespace

TEST_CASE("dreamshard cost network: sum over a device's tables, max over a placement's devices") {
  embplan::rng gen(3);
  const auto m = embplan::nn::make_dreamshard_model(4, 4, 11);
  const auto b = small_batch(4, gen);
  dreamshard_cost_tape t;
  embplan::nn::dreamshard_cost_forward(m, b.features, b.group, b.placement_of, 2, t);
  REQUIRE(t.device_costs.rows() == 5);
  REQUIRE(t.device_costs.cols() == 3);
  REQUIRE(t.out[3].rows() == 2);
  // By hand for device 0 (tables 0, 1) and placement 1 (devices 3, 4).
  const auto table = [&](Eigen::Index r) {
    const matrix h = m.table_fc_0(b.features.row(r)).cwiseMax(0.0f);
    return matrix(m.table_fc_1(h).cwiseMax(0.0f));
  };
  const matrix d0 = table(0) + table(1);
  const matrix d3 = table(3) + table(4) + table(5);
  const matrix d4 = table(6);
  const auto head = [](const embplan::nn::linear& a, const embplan::nn::linear& z,
                       const matrix& x) { return z(a(x).cwiseMax(0.0f))(0, 0); };
  CHECK(t.device_costs(0, 0) == doctest::Approx(head(m.forward_fc_0, m.forward_fc_1, d0)));
  CHECK(t.device_costs(0, 1) ==
        doctest::Approx(head(m.communication_fc_0, m.communication_fc_1, d0)));
  CHECK(t.device_costs(0, 2) == doctest::Approx(head(m.backward_fc_0, m.backward_fc_1, d0)));
  const matrix overall = d3.cwiseMax(d4);
  CHECK(t.out[3](1, 0) == doctest::Approx(head(m.overall_fc_0, m.overall_fc_1, overall)));
  // A device without tables has the heads' cost of a zero representation.
  const matrix zero = matrix::Zero(1, 32);
  CHECK(t.device_costs(2, 0) == doctest::Approx(head(m.forward_fc_0, m.forward_fc_1, zero)));
}

TEST_CASE("dreamshard cost network gradients match finite differences") {
  // The cost branch at small widths (F 3 -> 6 -> 4, heads 4 -> 5 -> 1), as the
  // other nn/ gradient checks do: few ReLUs near their kinks, gradients large
  // against float rounding, and every entry checked.
  embplan::rng gen(5);
  dreamshard_model m(3, 4);
  m.table_fc_0 = embplan::nn::linear(3, 6, gen);
  m.table_fc_1 = embplan::nn::linear(6, 4, gen);
  for (int h = 0; h < 4; ++h) {
    embplan::nn::detail::head_layer(m, h, 0) = embplan::nn::linear(4, 5, gen);
    embplan::nn::detail::head_layer(m, h, 1) = embplan::nn::linear(5, 1, gen);
  }
  const auto b = small_batch(3, gen);
  dreamshard_cost_tape tape;
  embplan::nn::dreamshard_cost_forward(m, b.features, b.group, b.placement_of, 2, tape);
  matrix ddev;
  matrix dall;
  (void)embplan::nn::dreamshard_cost_loss(tape, b, &ddev, &dall);
  auto grad = embplan::nn::zeros_like(m);
  embplan::nn::dreamshard_cost_backward(m, b.features, tape, ddev, dall, grad);
  auto gp = grad.named_parameters();
  auto np = m.named_parameters();
  REQUIRE(gp.size() == np.size());
  const auto loss = [&] { return loss_of(m, b); };
  int checked = 0;
  for (std::size_t i = 0; i < np.size(); ++i) {
    const std::string& name = np[i].first;
    CAPTURE(name);
    const bool cost_branch = name.rfind("rl_", 0) != 0 && name.rfind("cost_fc", 0) != 0 &&
                             name.rfind("policy", 0) != 0 && name.rfind("value", 0) != 0;
    if (!cost_branch) {  // the RL branch gets no gradient from the cost loss
      CHECK(gp[i].second->squaredNorm() == 0.0f);
      continue;
    }
    CHECK(nn_test::relative_error(*gp[i].second,
                                  nn_test::numeric_gradient(*np[i].second, loss, 1e-3f)) < 1e-2);
    ++checked;
  }
  CHECK(checked == 20);  // table_fc_0/1 and the four heads' two layers, weight and bias each
}

TEST_CASE("dreamshard cost network trains (summed head MSEs), saves and loads by PyTorch names") {
  // Placements of 4 devices whose costs follow the tables' features.
  embplan::rng gen(9);
  dreamshard_cost_batch b;
  const Eigen::Index placements = 12;
  std::vector<std::vector<float>> rows;
  Eigen::Index device = 0;
  b.device_targets.resize(placements * 4, 3);
  b.overall_targets.resize(placements, 1);
  for (Eigen::Index p = 0; p < placements; ++p) {
    float worst = 0.0f;
    for (int d = 0; d < 4; ++d, ++device) {
      b.placement_of.push_back(p);
      const auto n = gen.between(1, 4);
      float fwd = 0.1f;
      float comm = 0.2f;
      for (std::int64_t k = 0; k < n; ++k) {
        const auto a = static_cast<float>(gen.uniform());
        const auto c = static_cast<float>(gen.uniform());
        rows.push_back({a, c, a * c});
        b.group.push_back(device);
        fwd += a;
        comm += 0.5f * c;
      }
      b.device_targets(device, 0) = fwd;
      b.device_targets(device, 1) = comm;
      b.device_targets(device, 2) = 2.0f * fwd;
      worst = std::max(worst, 3.0f * fwd + comm);
    }
    b.overall_targets(p, 0) = worst;
  }
  b.features.resize(static_cast<Eigen::Index>(rows.size()), 3);
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (Eigen::Index c = 0; c < 3; ++c)
      b.features(static_cast<Eigen::Index>(r), c) = rows[r][static_cast<std::size_t>(c)];

  auto train = [&] {
    auto m = embplan::nn::make_dreamshard_model(3, 4, 21);
    auto grad = embplan::nn::zeros_like(m);
    embplan::nn::adam opt(embplan::nn::adam_options{.lr = 1e-2});
    dreamshard_cost_tape tape;
    std::vector<double> losses;
    for (int step = 0; step < 40; ++step)
      losses.push_back(embplan::nn::dreamshard_cost_train_step(m, b, opt, grad, tape));
    return std::pair{m, losses};
  };
  const auto [m, losses] = train();
  MESSAGE("loss " << losses.front() << " -> " << losses.back());
  CHECK(losses.back() < losses.front() / 10.0);
  CHECK(train().second.back() == losses.back());  // deterministic

  const auto dir = fs::temp_directory_path() / ("embplan-dreamshard-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / "dreamshard.safetensors";
  embplan::nn::save_state_dict(path, m);
  const auto file = embplan::io::read_safetensors(path);
  CHECK(file.tensors.count("table_fc_0.weight") == 1);
  CHECK(file.tensors.count("forward_fc_1.bias") == 1);
  CHECK(file.tensors.count("overall_fc_0.weight") == 1);
  CHECK(file.tensors.at("value_net.weight").shape == std::vector<std::int64_t>{1, 256});
  dreamshard_model back(3, 4);
  embplan::nn::load_state_dict(back, path);
  CHECK(loss_of(back, b) == loss_of(m, b));
  // A checkpoint of another table feature count is refused, naming the tensor.
  dreamshard_model other(21, 4);
  const auto msg = embplan::test::message_of([&] { embplan::nn::load_state_dict(other, path); });
  CHECK(msg.find("table_fc_0.weight") != std::string::npos);
  CHECK(msg.find("[128, 3]") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("dreamshard cost network: bad input names the field and value") {
  embplan::rng gen(1);
  const auto m = embplan::nn::make_dreamshard_model(3, 4, 2);
  auto b = small_batch(3, gen);
  dreamshard_cost_tape t;
  using embplan::test::message_of;
  auto msg = message_of([&] {
    embplan::nn::dreamshard_cost_forward(m, matrix::Ones(7, 5), b.group, b.placement_of, 2, t);
  });
  CHECK(msg.find("dreamshard_cost.features") != std::string::npos);
  msg = message_of(
      [&] { embplan::nn::dreamshard_cost_forward(m, b.features, b.group, b.placement_of, 0, t); });
  CHECK(msg.find("dreamshard_cost.placements") != std::string::npos);
  CHECK(msg.find("= 0") != std::string::npos);
  auto bad_group = b.group;
  bad_group[2] = 9;
  msg = message_of([&] {
    embplan::nn::dreamshard_cost_forward(m, b.features, bad_group, b.placement_of, 2, t);
  });
  CHECK(msg.find("set_reduce.group[2]") != std::string::npos);
  CHECK(msg.find("= 9") != std::string::npos);
  embplan::nn::dreamshard_cost_forward(m, b.features, b.group, b.placement_of, 2, t);
  b.device_targets = matrix::Zero(5, 2);
  msg = message_of([&] { (void)embplan::nn::dreamshard_cost_loss(t, b, nullptr, nullptr); });
  CHECK(msg.find("dreamshard_cost_batch.device_targets") != std::string::npos);
  b.device_targets = matrix::Zero(5, 3);
  b.overall_targets(1, 0) = NAN;
  msg = message_of([&] { (void)embplan::nn::dreamshard_cost_loss(t, b, nullptr, nullptr); });
  CHECK(msg.find("dreamshard_cost_batch.overall_targets") != std::string::npos);
  CHECK(msg.find("nan") != std::string::npos);
}

TEST_CASE("dreamshard cost network matches PyTorch (tools/make_dreamshard_cost.py)") {
  const auto file = embplan::io::read_safetensors(
      std::string(EMBPLAN_SOURCE_DIR) + "/test/nn/golden/dreamshard_cost_golden.safetensors");
  dreamshard_model m(5, 4);
  embplan::nn::load_state_dict(m, file, "model", false);
  const auto& f = file.tensors.at("features");
  const matrix x = Eigen::Map<const matrix>(f.values.data(), f.shape[0], f.shape[1]);
  std::vector<std::int64_t> lengths;
  for (const float v : file.tensors.at("lengths").values)
    lengths.push_back(static_cast<std::int64_t>(v));
  const auto group = embplan::nn::group_ids_from_lengths(lengths);
  std::vector<std::int64_t> placement_of;
  for (std::size_t d = 0; d < lengths.size(); ++d)
    placement_of.push_back(static_cast<std::int64_t>(d / 4));
  dreamshard_cost_tape t;
  embplan::nn::dreamshard_cost_forward(m, x, group, placement_of, 3, t);
  double worst = 0.0;
  const auto& overall = file.tensors.at("overall").values;
  const char* heads[] = {"forward", "communication", "backward"};
  for (int h = 0; h < 3; ++h) {
    const auto& want = file.tensors.at(heads[h]).values;
    REQUIRE(want.size() == 12);
    for (Eigen::Index d = 0; d < 12; ++d)
      worst = std::max(worst, static_cast<double>(std::abs(t.device_costs(d, h) -
                                                           want[static_cast<std::size_t>(d)])));
  }
  for (Eigen::Index p = 0; p < 3; ++p)
    worst = std::max(worst, static_cast<double>(
                                std::abs(t.out[3](p, 0) - overall[static_cast<std::size_t>(p)])));
  MESSAGE("max abs difference to PyTorch " << worst);
  CHECK(worst <= 1e-5);
}
