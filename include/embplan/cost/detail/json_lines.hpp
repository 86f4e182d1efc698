#pragma once
// The reading loop of `embplan collect` records (JSON lines, README "Cost
// data"): one object per line, blank lines skipped, every error naming the
// file and line. A key outside `known` is an error naming it (a record read
// without a field it meant to carry is misread). `parse(json, where)` turns
// one object into a record; an nlohmann exception it throws becomes an error
// naming `what` and the line.
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::cost::detail {

template <class Record, class Parse>
std::vector<Record> read_json_lines(const std::filesystem::path& path, const std::string& what,
                                    std::span<const std::string_view> known, Parse&& parse) {
  std::ifstream in(path);
  if (!in) embplan::detail::fail(what + "s", path.string(), "a readable file");
  std::vector<Record> out;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      embplan::detail::fail(where, line.substr(0, 60), "a JSON object (one record per line)");
    }
    io::detail::check_keys(j, known, where);
    try {
      out.push_back(parse(j, where));
    } catch (const nlohmann::json::exception& e) {
      embplan::detail::fail(where, line.substr(0, 60), "a " + what + " (" + e.what() + ")");
    }
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::cost::detail
