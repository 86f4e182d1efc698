#pragma once
// String metadata of the learned models' safetensors files: numbers and MLP
// size lists written as text ("20,128,32") and read back with the file and
// key named in every error.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "embplan/core/error.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::cost::detail {

// "in,out1,out2,...": the sizes of an MLP, input first.
inline std::string sizes_text(const nn::mlp& m) {
  std::string out = std::to_string(m.in_features());
  for (const auto& layer : m.layers)
    out += "," + std::to_string(layer.out_features());
  return out;
}

template <class T>
T parse_number(const std::string& text, const std::string& field) {
  try {
    std::size_t used = 0;
    T v{};
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::stod(text, &used));
    } else {
      v = static_cast<T>(std::stoll(text, &used));
    }
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  embplan::detail::fail(field, text, "a number");
}

inline std::vector<Eigen::Index> parse_sizes(const std::string& text, const std::string& field) {
  std::vector<Eigen::Index> out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const auto end = std::min(text.find(',', begin), text.size());
    out.push_back(parse_number<Eigen::Index>(text.substr(begin, end - begin), field));
    begin = end + 1;
  }
  for (const auto s : out) {
    if (s < 1) embplan::detail::fail(field, text, "positive sizes separated by commas");
    if (s > nn::max_width) {
      embplan::detail::fail(field, text,
                            "sizes of at most " + std::to_string(nn::max_width) + " (2^20)");
    }
  }
  return out;
}

// metadata[key] of a file, or an error naming the file and the key.
inline const std::string& require_key(const std::map<std::string, std::string>& metadata,
                                      const std::string& source, const std::string& key,
                                      std::string_view written_by) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) {
    embplan::detail::fail(source + ": metadata." + key, "(missing)", written_by);
  }
  return it->second;
}

}  // namespace embplan::inline EMBPLAN_ABI::cost::detail
