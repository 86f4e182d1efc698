#include "embplan/nn/serialize.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "embplan/core/random.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/nn/paper_models.hpp"

namespace nn = embplan::nn;
namespace io = embplan::io;

namespace {

std::string serialize_message_of(auto&& f) {
  try {
    f();
  } catch (const embplan::error& e) {
    return e.what();
  }
  return {};
}

io::safetensors_file paper_models() {
  return io::read_safetensors(std::string(EMBPLAN_SOURCE_DIR) +
                              "/test/nn/golden/paper_models.safetensors");
}

nn::mlp small_mlp(std::uint64_t seed) {
  embplan::rng gen(seed);
  return nn::mlp({.sizes = {3, 4, 1}, .naming = nn::mlp_naming::module_list}, gen);
}

}  // namespace

TEST_CASE("a model saved to safetensors loads back identically, with PyTorch's shapes") {
  embplan::rng gen(1);
  nn::compute_cost_net net({.table_features = 21}, 9);
  net.feature_norm.mean.setConstant(0.5f);
  const auto file = nn::state_dict(net, {}, {{"what", "test"}});
  // Weights are 2-D even with one output row; biases and buffers are 1-D.
  CHECK(file.tensors.at("c_hidden.1.weight").shape == std::vector<std::int64_t>{1, 64});
  CHECK(file.tensors.at("c_hidden.1.bias").shape == std::vector<std::int64_t>{1});
  CHECK(file.tensors.at("t_hidden.0.bias").shape == std::vector<std::int64_t>{128});
  CHECK(file.tensors.at("feature_means").shape == std::vector<std::int64_t>{21});

  const auto path = std::filesystem::temp_directory_path() / "embplan_serialize_test.safetensors";
  nn::save_state_dict(path, net, {{"what", "test"}});
  nn::compute_cost_net back({.table_features = 21});
  nn::load_state_dict(back, path);
  for (const auto& [name, p] : nn::named_tensors(net)) {
    INFO(name);
    const auto other = nn::named_tensors(back);
    for (const auto& [n2, q] : other) {
      if (n2 == name) CHECK(*q == *p);
    }
  }
  std::filesystem::remove(path);
}

TEST_CASE("missing and unexpected tensor names are listed together") {
  auto file = nn::state_dict(small_mlp(1), "head");
  file.tensors.erase("head.1.bias");
  file.tensors["head.2.weight"] = file.tensors.at("head.0.weight");
  file.source = "m.safetensors";
  nn::mlp m({.sizes = {3, 4, 1}, .naming = nn::mlp_naming::module_list});
  const auto msg = serialize_message_of([&] { nn::load_state_dict(m, file, "head"); });
  CHECK(msg.find("m.safetensors") != std::string::npos);
  CHECK(msg.find("missing [head.1.bias]") != std::string::npos);
  CHECK(msg.find("unexpected [head.2.weight]") != std::string::npos);
  // Not strict: extra tensors are fine, missing ones are not.
  file.tensors["head.1.bias"] = io::tensor{"F32", {1}, {0.25f}};
  CHECK_NOTHROW(nn::load_state_dict(m, file, "head", false));
  CHECK(m.layers[1].bias(0, 0) == 0.25f);
}

TEST_CASE("a shape that contradicts the architecture names tensor, shapes and file") {
  auto file = nn::state_dict(small_mlp(2));
  file.source = "arch.safetensors";
  nn::mlp wider({.sizes = {3, 5, 1}, .naming = nn::mlp_naming::module_list});
  const auto msg = serialize_message_of([&] { nn::load_state_dict(wider, file); });
  CHECK(msg.find("arch.safetensors") != std::string::npos);
  CHECK(msg.find("tensors[\"0.weight\"].shape") != std::string::npos);
  CHECK(msg.find("[4, 3]") != std::string::npos);
  CHECK(msg.find("[5, 3]") != std::string::npos);
  // A 1-D bias given as 2-D is refused too.
  file = nn::state_dict(small_mlp(2));
  file.tensors.at("0.bias").shape = {4, 1};
  nn::mlp same({.sizes = {3, 4, 1}, .naming = nn::mlp_naming::module_list});
  CHECK(serialize_message_of([&] { nn::load_state_dict(same, file); }).find("[4, 1]") !=
        std::string::npos);
}

TEST_CASE("NaN / Inf weights and integer dtypes are refused with the tensor name") {
  auto file = nn::state_dict(small_mlp(3));
  file.tensors.at("1.weight").values[2] = std::numeric_limits<float>::quiet_NaN();
  nn::mlp m({.sizes = {3, 4, 1}, .naming = nn::mlp_naming::module_list});
  const nn::mlp before = m;
  auto msg = serialize_message_of([&] { nn::load_state_dict(m, file); });
  CHECK(msg.find("tensors[\"1.weight\"][2]") != std::string::npos);
  CHECK(msg.find("nan") != std::string::npos);
  CHECK(m.layers[0].weight == before.layers[0].weight);  // nothing written on failure

  file = nn::state_dict(small_mlp(3));
  file.tensors.at("0.bias").values[0] = std::numeric_limits<float>::infinity();
  CHECK(serialize_message_of([&] { nn::load_state_dict(m, file); }).find("0.bias") !=
        std::string::npos);

  file = nn::state_dict(small_mlp(3));
  file.tensors.at("0.bias").dtype = "I64";
  msg = serialize_message_of([&] { nn::load_state_dict(m, file); });
  CHECK(msg.find("0.bias\"].dtype' = \"I64\"") != std::string::npos);
}

TEST_CASE("the papers' checkpoints load under their PyTorch names") {
  const auto file = paper_models();
  // DreamShard's Model and AutoShard's Net (stored as F16): strict, every name and shape.
  nn::dreamshard_model dream(21, 4);
  CHECK_NOTHROW(nn::load_state_dict(dream, file, "dreamshard"));
  CHECK(dream.value_net.weight.cols() == 256);
  CHECK(nn::parameter_count(dream) > 20000);
  nn::autoshard_net autoshard(21, 4, 3);
  CHECK_NOTHROW(nn::load_state_dict(autoshard, file, "autoshard"));
  CHECK(autoshard.core.num_layers() == 2);
  CHECK(autoshard.core.hidden_size() == 64);
  CHECK(autoshard.core.layers[1].bias_hh.cols() == 256);
  // A DreamShard model built for another device count does not load.
  nn::dreamshard_model eight(21, 8);
  CHECK(serialize_message_of([&] {
          nn::load_state_dict(eight, file, "dreamshard");
        }).find("dreamshard.value_net.weight") != std::string::npos);

  // NeuroShard's CommCostNet: load the raw state_dict (no normaliser) and
  // compare the forward with PyTorch's.
  nn::comm_cost_net comm({.features = 8, .outputs = 4});
  nn::load_state_dict(comm.hidden, file, "neuroshard_comm.hidden", false);
  const auto& in = file.tensors.at("neuroshard_comm.input");
  const auto& out = file.tensors.at("neuroshard_comm.output");
  const nn::matrix x = Eigen::Map<const nn::matrix>(in.values.data(), 8, 8);
  const nn::matrix y = comm(x);
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    CHECK(std::abs(y.data()[i] - out.values[static_cast<std::size_t>(i)]) <= 1e-5f);
  }
}

TEST_CASE("declared sizes the file's weights do not hold are refused, naming the declaration") {
  const auto file = nn::state_dict(small_mlp(3));  // 0.weight [4, 3], 1.weight [1, 4]
  const auto declared = [](std::vector<Eigen::Index> sizes) {
    return nn::mlp::weight_shapes(
        {.sizes = std::move(sizes), .naming = nn::mlp_naming::module_list});
  };
  CHECK(serialize_message_of([&] {
          nn::require_declared_weights(file, declared({3, 4, 1}), "meta.sizes", "3,4,1");
        }).empty());
  auto msg = serialize_message_of([&] {
    nn::require_declared_weights(file, declared({3, 1000000, 1}), "meta.sizes", "3,1000000,1");
  });
  CHECK(msg.find("'meta.sizes' = \"3,1000000,1\"") != std::string::npos);
  CHECK(msg.find("tensors[\"0.weight\"] has shape [4, 3], not [1000000, 3]") != std::string::npos);
  msg = serialize_message_of([&] {
    nn::require_declared_weights(file, declared({3, 4, 5, 1}), "meta.sizes", "3,4,5,1");
  });
  CHECK(msg.find("'meta.sizes' = \"3,4,5,1\"") != std::string::npos);
  CHECK(msg.find("tensors[\"1.weight\"] has shape [1, 4], not [5, 4]") != std::string::npos);
  msg = serialize_message_of([&] {
    nn::require_declared_weights(file, declared({3, 4, 1, 1}), "meta.sizes", "3,4,1,1");
  });
  CHECK(msg.find("tensors[\"2.weight\"], shape [1, 1], is missing") != std::string::npos);
}
