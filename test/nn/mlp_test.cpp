#include "embplan/nn/mlp.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/module.hpp"

#include "nn/gradient_check.hpp"

using embplan::nn::matrix;
using embplan::nn::mlp;
using embplan::nn::mlp_naming;

namespace {

std::vector<std::string> names(const mlp& m, std::string_view prefix) {
  std::vector<std::string> out;
  for (const auto& [name, p] : m.named_parameters(prefix))
    out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("mlp state names follow the PyTorch container") {
  const mlp seq({.sizes = {4, 8, 8, 1}});
  CHECK(names(seq, "") ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"});
  CHECK(names(seq, "policy")[2] == "policy.2.weight");
  const mlp list({.sizes = {20, 128, 32}, .naming = mlp_naming::module_list});
  CHECK(names(list, "t_hidden") == std::vector<std::string>{"t_hidden.0.weight", "t_hidden.0.bias",
                                                            "t_hidden.1.weight",
                                                            "t_hidden.1.bias"});
  const mlp numbered({.sizes = {20, 128, 32}, .naming = mlp_naming::numbered});
  CHECK(names(numbered, "table_fc") ==
        std::vector<std::string>{"table_fc_0.weight", "table_fc_0.bias", "table_fc_1.weight",
                                 "table_fc_1.bias"});
  CHECK(list.layers[0].weight.rows() == 128);
  CHECK(list.layers[0].weight.cols() == 20);
  CHECK(embplan::nn::parameter_count(list) == 20 * 128 + 128 + 128 * 32 + 32);
}

TEST_CASE("mlp: ReLU between layers, and after the last one only when asked") {
  mlp m({.sizes = {1, 1, 1}});
  m.layers[0].weight(0, 0) = 1.0f;
  m.layers[1].weight(0, 0) = 1.0f;
  m.layers[1].bias(0, 0) = -5.0f;
  matrix x(2, 1);
  x << -3, 2;
  const matrix y = m(x);
  CHECK(y(0, 0) == -5.0f);  // relu(-3) = 0, then 0 - 5, no final ReLU
  CHECK(y(1, 0) == -3.0f);
  m.relu_after_last = true;
  const matrix z = m(x);
  CHECK(z(0, 0) == 0.0f);
  CHECK(z(1, 0) == 0.0f);
}

TEST_CASE("mlp gradients match central finite differences") {
  for (const bool relu_after_last : {false, true}) {
    CAPTURE(relu_after_last);
    embplan::rng gen(5);
    mlp m({.sizes = {3, 6, 5, 2}, .relu_after_last = relu_after_last}, gen);
    matrix x = nn_test::random_matrix(4, 3, gen, 2.0);
    const matrix w = nn_test::random_matrix(4, 2, gen);
    auto loss = [&] { return nn_test::weighted_sum(w, m(x)); };

    embplan::nn::mlp_tape tape;
    m.forward(x, tape);
    mlp grad = embplan::nn::zeros_like(m);
    matrix dx;
    m.backward(x, tape, w, grad, &dx);
    auto gp = grad.named_parameters();
    auto mp = m.named_parameters();
    for (std::size_t i = 0; i < mp.size(); ++i) {
      CAPTURE(mp[i].first);
      CHECK(nn_test::relative_error(*gp[i].second,
                                    nn_test::numeric_gradient(*mp[i].second, loss, 1e-3f)) < 1e-2);
    }
    CHECK(nn_test::relative_error(dx, nn_test::numeric_gradient(x, loss, 1e-3f)) < 1e-2);
  }
}

TEST_CASE("a reused tape gives the same output") {
  embplan::rng gen(8);
  const mlp m({.sizes = {3, 16, 1}}, gen);
  const matrix a = nn_test::random_matrix(10, 3, gen);
  const matrix b = nn_test::random_matrix(4, 3, gen);
  embplan::nn::mlp_tape tape;
  m.forward(a, tape);
  m.forward(b, tape);
  CHECK(tape.output() == m(b));
  m.forward(a, tape);
  CHECK(tape.output() == m(a));
}

TEST_CASE("mlp refuses bad sizes and inputs, naming the field") {
  CHECK_THROWS_WITH_AS(mlp({.sizes = {4}}), doctest::Contains("'mlp_options.sizes' = 1"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(mlp({.sizes = {4, 0, 1}}),
                       doctest::Contains("'mlp_options.sizes[1]' = 0: expected a positive integer"),
                       embplan::error);
  const mlp m({.sizes = {4, 8, 1}});
  CHECK_THROWS_WITH_AS(m(matrix::Zero(2, 3)),
                       doctest::Contains("'mlp.input' = \"[2, 3]\": expected [*, 4]"),
                       embplan::error);
  embplan::nn::mlp_tape tape;
  m.forward(matrix::Zero(2, 4), tape);
  mlp grad = embplan::nn::zeros_like(m);
  CHECK_THROWS_WITH_AS(m.backward(matrix::Zero(2, 4), tape, matrix::Zero(2, 2), grad, nullptr),
                       doctest::Contains("'mlp.output_grad' = \"[2, 2]\": expected [2, 1]"),
                       embplan::error);
}

TEST_CASE("mlp refuses absurd sizes before allocating any layer, naming the size") {
  CHECK_THROWS_WITH_AS(mlp({.sizes = {4, 8, 1000000000, 1}}),
                       doctest::Contains("'mlp_options.sizes[2]' = 1000000000: expected at most"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(mlp({.sizes = {4, 20000, 20000}}),
                       doctest::Contains("'mlp_options.sizes[2]' = \"20000 x 20000\""),
                       embplan::error);
  // The weights such an mlp would hold, computed without building it.
  const auto shapes =
      mlp::weight_shapes({.sizes = {3, 4, 1}, .naming = embplan::nn::mlp_naming::module_list}, "h");
  REQUIRE(shapes.size() == 2);
  CHECK(shapes[0].first == "h.0.weight");
  CHECK(shapes[0].second == std::vector<std::int64_t>{4, 3});
  CHECK(shapes[1].first == "h.1.weight");
  CHECK(shapes[1].second == std::vector<std::int64_t>{1, 4});
  CHECK_THROWS_WITH_AS(mlp::weight_shapes({.sizes = {3, 1 << 21}}),
                       doctest::Contains("'mlp_options.sizes[1]' = 2097152"), embplan::error);
}
