// libFuzzer harness: safetensors (io/safetensors.hpp) and nn::load_state_dict
// (nn/serialize.hpp): the parsed file is loaded into a small MLP, strictly and
// under a prefix, and checked with the helpers the loaders use. What is
// accepted must come back equal through serialize_safetensors.

#include <cmath>
#include <cstddef>

#include "embplan/io/safetensors.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/nn/serialize.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using embplan::fuzz::expect_only_embplan_errors;
  namespace io = embplan::io;
  namespace nn = embplan::nn;
  expect_only_embplan_errors([&] {
    const auto file =
        io::parse_safetensors(embplan::fuzz::as_bytes(data, size), "model.safetensors");
    expect_only_embplan_errors([&] { io::check_finite(file); });
    expect_only_embplan_errors([&] { (void)io::require_tensor(file, "0.weight", {4, 3}); });
    // The seeds hold this MLP's state_dict, bare and under "head.".
    nn::mlp m({.sizes = {3, 4, 1}, .naming = nn::mlp_naming::module_list});
    expect_only_embplan_errors([&] { nn::load_state_dict(m, file); });
    expect_only_embplan_errors([&] { nn::load_state_dict(m, file, "head", false); });
    // Written back in each tensor's own dtype, it reads back equal.
    const auto back = embplan::fuzz::must_succeed("safetensors round trip", [&] {
      return io::parse_safetensors(io::serialize_safetensors(file));
    });
    bool equal = back.metadata == file.metadata && back.tensors.size() == file.tensors.size();
    for (auto a = file.tensors.begin(), b = back.tensors.begin(); equal && a != file.tensors.end();
         ++a, ++b) {
      equal = a->first == b->first && a->second.dtype == b->second.dtype &&
              a->second.shape == b->second.shape &&
              a->second.values.size() == b->second.values.size();
      for (std::size_t i = 0; equal && i < a->second.values.size(); ++i) {
        const float x = a->second.values[i];
        const float y = b->second.values[i];
        equal = x == y || (std::isnan(x) && std::isnan(y));
      }
    }
    embplan::fuzz::require_equal(equal, "safetensors round trip");
  });
  return 0;
}
