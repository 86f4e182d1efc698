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
#include "support/kink_fd.hpp"
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

namespace autoshard_net_test {

// An episode of `steps` steps on `shards` shards with random tables and a
// random assignment, in the learner's layout.
embplan::rl::autoshard_episode random_episode(Eigen::Index steps, Eigen::Index shards,
                                              embplan::rng& gen) {
  embplan::rl::autoshard_episode ep;
  ep.tables.resize(steps, 21);
  for (Eigen::Index i = 0; i < ep.tables.size(); ++i)
    ep.tables.data()[i] = static_cast<float>(gen.uniform(-1.0, 1.0));
  ep.state_other.resize(steps, 1);
  std::vector<Eigen::Index> shard_of;
  std::vector<Eigen::Index> rows;
  for (Eigen::Index t = 0; t < steps; ++t) {
    ep.state_other(t, 0) = static_cast<float>(steps - t) / static_cast<float>(steps);
    ep.action_count.push_back(shards);
    for (Eigen::Index s = 0; s < shards; ++s) {
      std::int64_t count = 0;
      for (Eigen::Index i = 0; i < t; ++i) {
        if (shard_of[static_cast<std::size_t>(i)] == s) {
          rows.push_back(i);
          ++count;
        }
      }
      ep.held_count.push_back(count);
    }
    shard_of.push_back(static_cast<Eigen::Index>(gen.uniform(0.0, double(shards))) % shards);
  }
  ep.held_tables.resize(static_cast<Eigen::Index>(rows.size()), 21);
  for (std::size_t r = 0; r < rows.size(); ++r)
    ep.held_tables.row(static_cast<Eigen::Index>(r)) = ep.tables.row(rows[r]);
  ep.actions_other.resize(steps * shards, 1);
  for (Eigen::Index i = 0; i < ep.actions_other.rows(); ++i)
    ep.actions_other(i, 0) = static_cast<float>(gen.uniform(0.0, 3.0));
  return ep;
}

}  // namespace autoshard_net_test

TEST_CASE("autoshard_forward: the episode's logits and values are the step-by-step ones") {
  using namespace autoshard_net_test;
  const auto net = random_net(21);
  embplan::rng gen(4);
  const auto ep = random_episode(5, 3, gen);
  embplan::rl::autoshard_tape tape;
  embplan::rl::autoshard_forward(net, ep, tape);
  REQUIRE(tape.logits.rows() == 15);
  REQUIRE(tape.values.rows() == 5);
  embplan::rl::autoshard_inference run(net);
  Eigen::Index held_row = 0;
  for (Eigen::Index t = 0; t < 5; ++t) {
    CAPTURE(t);
    std::int64_t held = 0;
    for (Eigen::Index s = 0; s < 3; ++s)
      held += ep.held_count[static_cast<std::size_t>(3 * t + s)];
    const matrix rows = ep.held_tables.middleRows(held_row, held);
    held_row += held;
    const matrix other = ep.actions_other.middleRows(3 * t, 3);
    const auto out = run.step({.table = ep.tables.row(t),
                               .state_other = ep.state_other.row(t),
                               .held_tables = rows,
                               .shard_tables = std::span<const std::int64_t>(ep.held_count)
                                                   .subspan(static_cast<std::size_t>(3 * t), 3),
                               .actions_other = other});
    CHECK(out.value == doctest::Approx(tape.values(t, 0)).epsilon(1e-5));
    for (Eigen::Index s = 0; s < 3; ++s)
      CHECK(out.logits[static_cast<std::size_t>(s)] ==
            doctest::Approx(tape.logits(3 * t + s, 0)).epsilon(1e-5));
  }
}

TEST_CASE("autoshard_backward: gradients against central differences") {
  // A central difference is only a derivative where no ReLU flips between
  // w - eps and w + eps (at a kink it measures the jump): an entry whose
  // perturbation flips one, anywhere in the network, is not judged; every
  // judged entry must agree, and most entries must be judged.
  using namespace autoshard_net_test;
  auto net = random_net(33);
  embplan::rng gen(8);
  const auto ep = random_episode(4, 3, gen);
  matrix wl(12, 1), wv(4, 1);
  for (Eigen::Index i = 0; i < 12; ++i)
    wl(i, 0) = static_cast<float>(gen.uniform(-1.0, 1.0));
  for (Eigen::Index i = 0; i < 4; ++i)
    wv(i, 0) = static_cast<float>(gen.uniform(-1.0, 1.0));
  // The loss, and which ReLU outputs are positive.
  const auto run = [&](std::vector<bool>& active) {
    embplan::rl::autoshard_tape t;
    embplan::rl::autoshard_forward(net, ep, t);
    active.clear();
    for (const matrix* m : {&t.t0, &t.e, &t.o, &t.b0, &t.ht0, &t.he, &t.q, &t.p0, &t.p1, &t.p2})
      for (Eigen::Index k = 0; k < m->size(); ++k)
        active.push_back(m->data()[k] > 0.0f);
    return (wl.cast<double>().array() * t.logits.cast<double>().array()).sum() +
           (wv.cast<double>().array() * t.values.cast<double>().array()).sum();
  };
  embplan::rl::autoshard_tape tape;
  embplan::rl::autoshard_forward(net, ep, tape);
  auto grad = embplan::nn::zeros_like(net);
  embplan::rl::autoshard_backward(net, ep, tape, wl, wv, grad);
  // The cost head is not on this loss.
  const auto n = embplan::test::check_kink_fd(
      net, grad, run, [](std::string_view name) { return name.rfind("c_fc", 0) != 0; }, 8, gen);
  CHECK(n.judged * 2 >= n.sampled);
  MESSAGE("judged " << n.judged << " of " << n.sampled << " entries");
}

TEST_CASE("autoshard_backward: PyTorch's gradients on the golden episode") {
  using namespace autoshard_net_test;
  const auto f = golden();
  embplan::nn::autoshard_net net(21, 1, 1);
  embplan::nn::load_state_dict(net, f, "net");
  // The golden episode in the learner's layout.
  const matrix tables = tensor(f, "tables");
  const matrix actions_other = tensor(f, "actions_other");  // [7, 4]
  std::vector<std::int64_t> assignment;
  for (const float a : f.tensors.at("assignment").values)
    assignment.push_back(static_cast<std::int64_t>(a));
  embplan::rl::autoshard_episode ep;
  ep.tables = tables;
  ep.state_other = tensor(f, "state_other");
  ep.actions_other.resize(28, 1);
  std::vector<Eigen::Index> rows;
  for (Eigen::Index t = 0; t < 7; ++t) {
    ep.action_count.push_back(4);
    for (Eigen::Index s = 0; s < 4; ++s) {
      ep.actions_other(4 * t + s, 0) = actions_other(t, s);
      std::int64_t count = 0;
      for (Eigen::Index i = 0; i < t; ++i) {
        if (assignment[static_cast<std::size_t>(i)] == s) {
          rows.push_back(i);
          ++count;
        }
      }
      ep.held_count.push_back(count);
    }
  }
  ep.held_tables.resize(static_cast<Eigen::Index>(rows.size()), 21);
  for (std::size_t r = 0; r < rows.size(); ++r)
    ep.held_tables.row(static_cast<Eigen::Index>(r)) = tables.row(rows[r]);
  embplan::rl::autoshard_tape tape;
  embplan::rl::autoshard_forward(net, ep, tape);
  const matrix logits = tensor(f, "logits");
  for (Eigen::Index i = 0; i < 28; ++i)
    CHECK(tape.logits(i, 0) == doctest::Approx(logits(i / 4, i % 4)).epsilon(1e-5).scale(1.0));
  const matrix wl4 = tensor(f, "w_logits");
  matrix wl(28, 1);
  for (Eigen::Index i = 0; i < 28; ++i)
    wl(i, 0) = wl4(i / 4, i % 4);
  auto grad = embplan::nn::zeros_like(net);
  embplan::rl::autoshard_backward(net, ep, tape, wl, tensor(f, "w_value"), grad);
  std::size_t checked = 0;
  for (const auto& [name, g] : grad.named_parameters()) {
    CAPTURE(name);
    if (name.rfind("c_fc", 0) == 0) continue;
    const auto& idx = f.tensors.at("grad_index." + name).values;
    const auto& val = f.tensors.at("grad_value." + name).values;
    REQUIRE(idx.size() == static_cast<std::size_t>(std::min<Eigen::Index>(16, g->size())));
    float scale = 0.0f;
    for (const float v : val)
      scale = std::max(scale, std::abs(v));
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const auto i = static_cast<Eigen::Index>(idx[k]);
      CHECK(std::abs(g->data()[i] - val[k]) <= 1e-4f * scale + 1e-6f);
    }
    ++checked;
  }
  CHECK(checked == 28);  // every parameter tensor but the cost head's four
}
