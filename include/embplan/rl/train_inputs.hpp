#pragma once
// What a training run was started with besides its options: the tasks file's
// content, the meter, the pool, ... (the caller's inputs, named as the caller
// names them, e.g. the CLI's flags "--tasks", "--meter"), as text. A
// checkpoint records them (metadata "embplan.train.inputs", a JSON object of
// strings; rl/dreamshard_train.hpp, rl/autoshard_train.hpp) and a resume
// with other inputs is refused, naming the field and both values: a resumed
// run continues the run it was started as, or not at all.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "embplan/core/content_hash.hpp"
#include "embplan/core/error.hpp"
#include "embplan/io/detail/input_guard.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// Field -> value; empty: none recorded, none checked.
using train_inputs = std::map<std::string, std::string>;

// A file's content as an input: "fnv1a64:" and the FNV-1a 64 of its bytes (16
// hex digits), so a resume binds to what the file holds, not to its name.
inline std::string content_fingerprint(const std::filesystem::path& file) {
  const std::string bytes =
      io::detail::read_regular_file(file, "input file", std::uint64_t{1} << 32);
  embplan::detail::canonical_hasher h;
  for (const char c : bytes)
    h.u8(static_cast<std::uint8_t>(c));
  return "fnv1a64:" + hash_hex(h.value());
}

namespace detail {

inline constexpr const char* train_inputs_key = "embplan.train.inputs";

inline void put_train_inputs(std::map<std::string, std::string>& metadata,
                             const train_inputs& inputs) {
  if (inputs.empty()) return;
  metadata[train_inputs_key] = nlohmann::json(inputs).dump();
}

// Refuses a checkpoint whose recorded inputs are not `expected`, naming the
// field, this run's value and the checkpoint's. A checkpoint that records none
// (written before inputs were recorded, or by a caller that passed none) is
// refused when inputs are expected: it cannot show it was started with them.
inline void require_train_inputs(const std::map<std::string, std::string>& metadata,
                                 const std::string& source, const train_inputs& expected) {
  if (expected.empty()) return;
  const auto it = metadata.find(train_inputs_key);
  if (it == metadata.end()) {
    embplan::detail::fail_missing(source + ": metadata." + train_inputs_key,
                                  "the inputs the run was started with (this checkpoint does not "
                                  "record them, so a resume cannot be bound to them: start the "
                                  "run again)");
  }
  train_inputs recorded;
  try {
    recorded = nlohmann::json::parse(it->second).get<train_inputs>();
  } catch (const nlohmann::json::exception&) {
    embplan::detail::fail(source + ": metadata." + train_inputs_key, it->second,
                          "a JSON object of strings (the inputs the run was started with)");
  }
  const std::string started = "what the checkpoint " + source + " was started with";
  const std::string keeps = " (a resume keeps the run's inputs)";
  for (const auto& [field, value] : expected) {
    const auto r = recorded.find(field);
    if (r == recorded.end()) {
      embplan::detail::fail(field, value, "no value, " + started + keeps);
    }
    if (r->second != value) {
      embplan::detail::fail(field, value, "\"" + r->second + "\", " + started + keeps);
    }
  }
  for (const auto& [field, value] : recorded) {
    if (!expected.contains(field)) {
      embplan::detail::fail(field, "(none)", "\"" + value + "\", " + started + keeps);
    }
  }
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::rl
