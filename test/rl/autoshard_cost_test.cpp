#include "embplan/rl/autoshard_cost.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/init.hpp"
#include "support/kink_fd.hpp"
#include "support/message_of.hpp"

namespace autoshard_cost_test {

using embplan::nn::matrix;

embplan::nn::autoshard_net random_net(Eigen::Index features, std::uint64_t seed) {
  embplan::nn::autoshard_net net(features, 1, 1);
  embplan::rng gen(seed);
  for (auto& [name, p] : net.named_parameters())
    for (Eigen::Index i = 0; i < p->size(); ++i)
      p->data()[i] = static_cast<float>(gen.uniform(-0.3, 0.3));
  return net;
}

// PyTorch's default initialisation, as a fresh AutoShard network starts.
embplan::nn::autoshard_net default_net(Eigen::Index features, std::uint64_t seed) {
  embplan::nn::autoshard_net n(features, 1, 1);
  embplan::rng gen(seed);
  for (embplan::nn::linear* l : {&n.t_fc_0, &n.t_fc_1, &n.s_fc_0, &n.a_fc_0, &n.p_fc_0, &n.p_fc_1,
                                 &n.p_fc_2, &n.p_fc_3, &n.b_fc_0, &n.b_fc_1, &n.c_fc_0, &n.c_fc_1})
    *l = embplan::nn::linear(l->in_features(), l->out_features(), gen);
  n.core = embplan::nn::lstm(64, 64, 2, gen);
  return n;
}

matrix random_tables(Eigen::Index rows, Eigen::Index features, embplan::rng& gen, double lo,
                     double hi) {
  matrix m(rows, features);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<float>(gen.uniform(lo, hi));
  return m;
}

bool is_cost_parameter(std::string_view name) {
  return name.rfind("t_fc", 0) == 0 || name.rfind("c_fc", 0) == 0;
}

bool contains(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

}  // namespace autoshard_cost_test

TEST_CASE("autoshard_cost_forward: the inference cost head on each group's summed latents") {
  using namespace autoshard_cost_test;
  const auto net = random_net(6, 3);
  embplan::rng gen(11);
  const std::vector<std::int64_t> offset{1, 3, 2};
  const matrix tables = random_tables(6, 6, gen, -1.0, 1.0);
  embplan::rl::autoshard_cost_tape tape;
  embplan::rl::autoshard_cost_forward(net, tables, offset, tape);
  REQUIRE(tape.pred.rows() == 3);
  REQUIRE(tape.pred.cols() == 1);
  const embplan::rl::autoshard_inference run(net);
  matrix latent;
  run.table_latent(tables, latent);
  matrix sums = matrix::Zero(3, latent.cols());
  sums.row(0) = latent.row(0);
  sums.row(1) = latent.row(1) + latent.row(2) + latent.row(3);
  sums.row(2) = latent.row(4) + latent.row(5);
  matrix expected;
  run.cost(sums, expected);
  for (Eigen::Index g = 0; g < 3; ++g)
    CHECK(tape.pred(g, 0) == doctest::Approx(expected(g, 0)).epsilon(1e-6));
}

TEST_CASE("autoshard_cost_backward: gradients against central differences") {
  // A central difference is a derivative only where no ReLU flips between
  // w - eps and w + eps: such an entry is not judged; every judged entry must
  // agree, and most entries must be judged.
  using namespace autoshard_cost_test;
  auto net = random_net(5, 17);
  embplan::rng gen(23);
  const std::vector<std::int64_t> offset{2, 1, 4, 3};
  const matrix tables = random_tables(10, 5, gen, -1.0, 1.0);
  matrix w(4, 1);
  for (Eigen::Index g = 0; g < 4; ++g)
    w(g, 0) = static_cast<float>(gen.uniform(-1.0, 1.0));
  const auto run = [&](std::vector<bool>& active) {
    embplan::rl::autoshard_cost_tape t;
    embplan::rl::autoshard_cost_forward(net, tables, offset, t);
    active.clear();
    for (const matrix* m : {&t.t0, &t.e, &t.c0})
      for (Eigen::Index k = 0; k < m->size(); ++k)
        active.push_back(m->data()[k] > 0.0f);
    return (w.cast<double>().array() * t.pred.cast<double>().array()).sum();
  };
  embplan::rl::autoshard_cost_tape tape;
  embplan::rl::autoshard_cost_forward(net, tables, offset, tape);
  auto grad = embplan::nn::zeros_like(net);
  embplan::rl::autoshard_cost_backward(net, tables, offset, tape, w, grad);
  // The policy and value parts are not on this loss.
  const auto n = embplan::test::check_kink_fd(net, grad, run, is_cost_parameter, 12, gen);
  CHECK(n.tensors == 8);  // t_fc_0, t_fc_1, c_fc_0, c_fc_1: weight and bias
  CHECK(n.judged * 2 >= n.sampled);
  MESSAGE("judged " << n.judged << " of " << n.sampled << " entries");
}

TEST_CASE("autoshard_cost_step: loss and gradients of a tiny network, by hand") {
  // Every parameter 0 but a few, so that
  //   e0 = relu(relu(x0) + 2 relu(x1)),  pred = 3 relu(m0 + 0.5) - 1.
  // Group A {(1, 2)}: m0 = 5, pred 15.5, cost 15.
  // Group B {(0.5, -1), (2, 0)}: m0 = 0.5 + 2 = 2.5, pred 8, cost 10.
  // Loss ((0.5)^2 + (-2)^2) / 2 = 2.125; dL/dpred = (pred - cost) = (0.5, -2).
  using namespace autoshard_cost_test;
  embplan::nn::autoshard_net net(2, 1, 1);
  net.t_fc_0.weight(0, 0) = 1.0f;
  net.t_fc_0.weight(1, 1) = 1.0f;
  net.t_fc_1.weight(0, 0) = 1.0f;
  net.t_fc_1.weight(0, 1) = 2.0f;
  net.c_fc_0.weight(0, 0) = 1.0f;
  net.c_fc_0.bias(0, 0) = 0.5f;
  net.c_fc_1.weight(0, 0) = 3.0f;
  net.c_fc_1.bias(0, 0) = -1.0f;
  embplan::rl::autoshard_cost_batch b;
  b.tables.resize(3, 2);
  b.tables << 1.0f, 2.0f, 0.5f, -1.0f, 2.0f, 0.0f;
  b.offset = {1, 2};
  b.cost = {15.0, 10.0};

  embplan::rl::autoshard_cost_tape tape;
  embplan::rl::autoshard_cost_forward(net, b.tables, b.offset, tape);
  CHECK(tape.pred(0, 0) == 15.5f);
  CHECK(tape.pred(1, 0) == 8.0f);
  auto grad = embplan::nn::zeros_like(net);
  matrix dpred(2, 1);
  dpred << 0.5f, -2.0f;
  embplan::rl::autoshard_cost_backward(net, b.tables, b.offset, tape, dpred, grad);
  // dc0 = 3 dpred = (1.5, -6); dm0 = dc0; per table row de0 = (1.5, -6, -6);
  // hidden unit 1 is active in group A's row only (x1 = 2).
  CHECK(grad.c_fc_1.bias(0, 0) == -1.5f);
  CHECK(grad.c_fc_1.weight(0, 0) == doctest::Approx(0.5 * 5.5 - 2.0 * 3.0));
  CHECK(grad.c_fc_0.bias(0, 0) == doctest::Approx(1.5 - 6.0));
  CHECK(grad.c_fc_0.weight(0, 0) == doctest::Approx(1.5 * 5.0 - 6.0 * 2.5));
  CHECK(grad.t_fc_1.bias(0, 0) == doctest::Approx(1.5 - 12.0));
  CHECK(grad.t_fc_1.weight(0, 0) == doctest::Approx(1.5 * 1.0 - 6.0 * 0.5 - 6.0 * 2.0));
  CHECK(grad.t_fc_1.weight(0, 1) == doctest::Approx(1.5 * 2.0));
  CHECK(grad.t_fc_0.weight(0, 0) == doctest::Approx(-13.5));
  CHECK(grad.t_fc_0.weight(0, 1) == doctest::Approx(1.5 * 2.0 + 6.0));
  CHECK(grad.t_fc_0.bias(0, 0) == doctest::Approx(-10.5));
  CHECK(grad.t_fc_0.weight(1, 0) == doctest::Approx(3.0));
  CHECK(grad.t_fc_0.weight(1, 1) == doctest::Approx(6.0));
  CHECK(grad.t_fc_0.bias(0, 1) == doctest::Approx(3.0));
  const std::vector<double> nonzero{-1.5,  -3.25, -4.5,  -7.5, -10.5, -13.5, 3.0,
                                    -13.5, 9.0,   -10.5, 3.0,  6.0,   3.0};
  double squared = 0.0;
  for (const double v : nonzero)
    squared += v * v;
  CHECK(embplan::nn::squared_norm(grad) == doctest::Approx(squared));

  // The step reports the same loss and norm (lr 0: nothing moves).
  embplan::nn::adam opt(embplan::nn::adam_options{.lr = 0.0});
  const auto before = net;
  const auto stats = embplan::rl::autoshard_cost_step(net, opt, b, 0.0);
  CHECK(stats.loss == doctest::Approx(2.125).epsilon(1e-12));
  CHECK(stats.grad_norm == doctest::Approx(std::sqrt(squared)));
  CHECK(stats.groups == 2);
  CHECK(net.t_fc_0.weight == before.t_fc_0.weight);
  // Clipping to 1 leaves the norm it reports as it was.
  embplan::nn::adam opt2(embplan::nn::adam_options{.lr = 0.0});
  CHECK(embplan::rl::autoshard_cost_step(net, opt2, b, 1.0).grad_norm ==
        doctest::Approx(std::sqrt(squared)));
}

TEST_CASE("autoshard_cost_step: learns a toy latency; only t_fc_* and c_fc_* move") {
  // Latency of a shard = 2 x the sum of its tables' first feature.
  using namespace autoshard_cost_test;
  constexpr Eigen::Index features = 4;
  auto net = default_net(features, 5);
  const auto start = net;
  embplan::rng gen(42);
  embplan::rl::autoshard_cost_buffer buffer(256, 32);
  for (int k = 0; k < 256; ++k) {
    const auto rows = static_cast<Eigen::Index>(1 + gen.below(4));
    const matrix group = random_tables(rows, features, gen, 0.0, 1.0);
    buffer.append(group, 2.0 * static_cast<double>(group.col(0).sum()));
  }
  embplan::rl::autoshard_cost_batch eval;
  buffer.sample(gen, eval);
  const auto eval_loss = [&] {
    embplan::rl::autoshard_cost_tape t;
    embplan::rl::autoshard_cost_forward(net, eval.tables, eval.offset, t);
    double loss = 0.0;
    for (std::size_t g = 0; g < eval.cost.size(); ++g) {
      const double d = t.pred(static_cast<Eigen::Index>(g), 0) - eval.cost[g];
      loss += d * d / static_cast<double>(eval.cost.size());
    }
    return loss;
  };
  const double before = eval_loss();
  embplan::nn::adam opt;  // the paper's lr 1e-3
  embplan::rl::autoshard_cost_batch b;
  double first = 0.0;
  double last = 0.0;
  for (int step = 0; step < 200; ++step) {
    buffer.sample(gen, b);
    const auto stats = embplan::rl::autoshard_cost_step(net, opt, b);
    REQUIRE(std::isfinite(stats.loss));
    if (step == 0) first = stats.loss;
    last = stats.loss;
  }
  const double after = eval_loss();
  MESSAGE("eval loss " << before << " -> " << after << "; batch loss " << first << " -> " << last);
  CHECK(after < 0.1 * before);
  CHECK(last < 0.1 * first);
  // Only the cost loss's parameters moved, and Adam stepped only them.
  const auto moved = net.named_parameters();
  const auto fixed = start.named_parameters();
  const auto& steps = opt.parameter_steps();
  REQUIRE(steps.size() == moved.size());
  for (std::size_t p = 0; p < moved.size(); ++p) {
    CAPTURE(moved[p].first);
    if (is_cost_parameter(moved[p].first)) {
      CHECK(*moved[p].second != *fixed[p].second);
      CHECK(steps[p] == 200);
    } else {
      CHECK(*moved[p].second == *fixed[p].second);
      CHECK(steps[p] == 0);
    }
  }
}

TEST_CASE("autoshard_cost_step: deterministic for the same network, optimizer and batch") {
  using namespace autoshard_cost_test;
  embplan::rng gen(3);
  embplan::rl::autoshard_cost_batch b;
  b.tables = random_tables(5, 3, gen, 0.0, 1.0);
  b.offset = {2, 3};
  b.cost = {1.0, 2.5};
  auto x = default_net(3, 1);
  auto y = x;
  embplan::nn::adam ox, oy;
  for (int k = 0; k < 3; ++k) {
    const auto sx = embplan::rl::autoshard_cost_step(x, ox, b);
    const auto sy = embplan::rl::autoshard_cost_step(y, oy, b);
    CHECK(sx.loss == sy.loss);
  }
  CHECK(x.t_fc_0.weight == y.t_fc_0.weight);
  CHECK(x.c_fc_1.bias == y.c_fc_1.bias);
}

TEST_CASE("autoshard_cost_buffer: a ring that overwrites its oldest group") {
  using namespace autoshard_cost_test;
  embplan::rl::autoshard_cost_buffer buffer(3, 2);
  CHECK(buffer.capacity() == 3);
  CHECK(buffer.batch_size() == 2);
  CHECK(buffer.empty());
  CHECK(buffer.features() == 0);
  for (int k = 0; k < 5; ++k) {
    // Group k: k + 1 tables whose features are all k.
    buffer.append(matrix::Constant(k + 1, 2, static_cast<float>(k)), static_cast<double>(k));
    CHECK(buffer.size() == std::min<std::size_t>(static_cast<std::size_t>(k) + 1, 3));
  }
  CHECK(buffer.features() == 2);
  // Appends 3 and 4 overwrote slots 0 and 1; slot 2 still holds group 2.
  const std::vector<double> want{3.0, 4.0, 2.0};
  for (std::size_t s = 0; s < 3; ++s) {
    CAPTURE(s);
    CHECK(buffer.cost_ms(s) == want[s]);
    CHECK(buffer.tables(s).rows() == static_cast<Eigen::Index>(want[s]) + 1);
    CHECK(buffer.tables(s)(0, 0) == static_cast<float>(want[s]));
  }
  buffer.append(matrix::Constant(1, 2, 5.0f), 5.0);
  CHECK(buffer.cost_ms(2) == 5.0);
  CHECK(buffer.size() == 3);

  const embplan::rl::autoshard_cost_buffer defaults;
  CHECK(defaults.capacity() == 5000);
  CHECK(defaults.batch_size() == 512);
}

TEST_CASE("autoshard_cost_buffer: sampling is uniform with replacement and seeded") {
  using namespace autoshard_cost_test;
  embplan::rl::autoshard_cost_buffer buffer(8, 400);
  for (int k = 0; k < 5; ++k)
    buffer.append(matrix::Constant(1 + k % 3, 3, static_cast<float>(k)), 10.0 * k);
  embplan::rl::autoshard_cost_batch a, b, c;
  embplan::rng ga(7), gb(7), gc(8);
  buffer.sample(ga, a);
  buffer.sample(gb, b);
  buffer.sample(gc, c);
  CHECK(a.offset == b.offset);
  CHECK(a.cost == b.cost);
  CHECK(a.tables == b.tables);
  CHECK(a.cost != c.cost);
  REQUIRE(a.offset.size() == 400);
  REQUIRE(a.cost.size() == 400);
  // Each drawn group is a held one, whole: its rows, features and cost agree.
  std::vector<int> seen(5, 0);
  Eigen::Index row = 0;
  for (std::size_t k = 0; k < 400; ++k) {
    const auto group = static_cast<int>(a.cost[k] / 10.0);
    REQUIRE(group >= 0);
    REQUIRE(group < 5);
    ++seen[static_cast<std::size_t>(group)];
    CHECK(a.offset[k] == 1 + group % 3);
    CHECK(a.tables.middleRows(row, a.offset[k]).isConstant(static_cast<float>(group)));
    row += a.offset[k];
  }
  CHECK(row == a.tables.rows());
  CHECK(a.tables.cols() == 3);
  for (const int n : seen)
    CHECK(n > 40);  // 80 expected of each
  // A reused output's earlier contents do not matter.
  embplan::rl::autoshard_cost_batch fresh;
  embplan::rng ge(9), gf(9);
  buffer.sample(ge, a);
  buffer.sample(gf, fresh);
  CHECK(a.offset == fresh.offset);
  CHECK(a.cost == fresh.cost);
  CHECK(a.tables == fresh.tables);
}

TEST_CASE("autoshard_cost: bad input names the field and the value") {
  using namespace autoshard_cost_test;
  using embplan::rl::autoshard_cost_buffer;
  using embplan::test::message_of;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();

  // The buffer.
  CHECK(contains(message_of([] { autoshard_cost_buffer bad(0, 4); }),
                 "'autoshard_cost_buffer.capacity' = 0"));
  CHECK(contains(message_of([] { autoshard_cost_buffer bad(4, 0); }),
                 "'autoshard_cost_buffer.batch_size' = 0"));
  autoshard_cost_buffer buffer(4, 2);
  embplan::rl::autoshard_cost_batch out;
  embplan::rng gen(1);
  CHECK(contains(message_of([&] { buffer.sample(gen, out); }), "'autoshard_cost_buffer.size' = 0"));
  CHECK(contains(message_of([&] { buffer.append(matrix::Zero(0, 3), 1.0); }),
                 "'autoshard_cost_buffer.append.tables.rows' = 0"));
  CHECK(contains(message_of([&] { buffer.append(matrix::Zero(2, 0), 1.0); }),
                 "'autoshard_cost_buffer.append.tables.cols' = 0"));
  CHECK(message_of([&] { buffer.append(matrix::Zero(2, 3), 1.0); }) == "no error");
  CHECK(contains(message_of([&] { buffer.append(matrix::Zero(1, 4), 1.0); }),
                 "'autoshard_cost_buffer.append.tables.cols' = 4: expected 3 table features"));
  CHECK(contains(message_of([&] { buffer.append(matrix::Zero(1, 3), -1.0); }),
                 "'autoshard_cost_buffer.append.cost_ms' = -1"));
  CHECK(contains(message_of([&] { buffer.append(matrix::Zero(1, 3), nan); }),
                 "'autoshard_cost_buffer.append.cost_ms' = nan"));
  CHECK(contains(message_of([&] { buffer.append(matrix::Zero(1, 3), inf); }),
                 "'autoshard_cost_buffer.append.cost_ms' = inf"));
  CHECK(buffer.size() == 1);  // nothing refused was kept
  CHECK(contains(message_of([&] { (void)buffer.cost_ms(1); }), "'autoshard_cost_buffer.slot' = 1"));
  CHECK(contains(message_of([&] { (void)buffer.tables(7); }), "'autoshard_cost_buffer.slot' = 7"));

  // The forward pass and the step.
  auto net = random_net(3, 2);
  embplan::nn::adam opt;
  embplan::rl::autoshard_cost_batch b;
  b.tables = matrix::Zero(3, 3);
  b.offset = {1, 2};
  b.cost = {1.0, 2.0};
  const auto step = [&](const embplan::rl::autoshard_cost_batch& batch, double clip = 40.0) {
    return message_of([&] { (void)embplan::rl::autoshard_cost_step(net, opt, batch, clip); });
  };
  CHECK(step(b) == "no error");
  auto bad = b;
  bad.offset = {1, 0, 2};
  bad.cost = {1.0, 2.0, 3.0};
  CHECK(contains(step(bad), "'autoshard_cost_batch.offset[1]' = 0: expected a table count >= 1"));
  bad.offset = {1, -2};
  bad.cost = {1.0, 2.0};
  CHECK(contains(step(bad), "'autoshard_cost_batch.offset[1]' = -2"));
  bad = b;
  bad.offset = {};
  bad.cost = {};
  CHECK(contains(step(bad), "'autoshard_cost_batch.offset.size' = 0"));
  bad = b;
  bad.tables = matrix::Zero(4, 3);
  CHECK(contains(step(bad), "'autoshard_cost_batch.tables.shape' = \"[4, 3]\": expected [3, 3]"));
  bad = b;
  bad.tables = matrix::Zero(3, 2);
  CHECK(contains(step(bad), "'autoshard_cost_batch.tables.shape' = \"[3, 2]\": expected [3, 3]"));
  bad = b;
  bad.cost = {1.0};
  CHECK(contains(step(bad), "'autoshard_cost_batch.cost.size' = 1: expected 2"));
  bad.cost = {1.0, nan};
  CHECK(contains(step(bad), "'autoshard_cost_batch.cost[1]' = nan"));
  bad.cost = {-0.5, 1.0};
  CHECK(contains(step(bad), "'autoshard_cost_batch.cost[0]' = -0.5"));
  CHECK(contains(step(b, -1.0), "'autoshard_cost_step.max_grad_norm' = -1"));
  CHECK(contains(step(b, nan), "'autoshard_cost_step.max_grad_norm' = nan"));
  const embplan::nn::autoshard_net empty;
  embplan::rl::autoshard_cost_tape tape;
  CHECK(contains(
      message_of([&] { embplan::rl::autoshard_cost_forward(empty, b.tables, b.offset, tape); }),
      "'autoshard_cost_forward.net' = \"(empty)\""));

  // The backward pass.
  embplan::rl::autoshard_cost_forward(net, b.tables, b.offset, tape);
  auto grad = embplan::nn::zeros_like(net);
  const auto backward = [&](const matrix& tables, const std::vector<std::int64_t>& offset,
                            const matrix& dpred) {
    return message_of(
        [&] { embplan::rl::autoshard_cost_backward(net, tables, offset, tape, dpred, grad); });
  };
  CHECK(backward(b.tables, b.offset, matrix::Zero(2, 1)) == "no error");
  CHECK(contains(backward(b.tables, b.offset, matrix::Zero(3, 1)),
                 "'autoshard_cost_backward.dpred.rows' = 3: expected 2"));
  CHECK(contains(backward(b.tables, {3}, matrix::Zero(1, 1)),
                 "'autoshard_cost_backward.tape.pred.rows' = 2: expected 1"));
  CHECK(contains(backward(matrix::Zero(4, 3), {1, 3}, matrix::Zero(2, 1)),
                 "'autoshard_cost_backward.tape.e.rows' = 3: expected 4"));
}
