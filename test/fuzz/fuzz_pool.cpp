// libFuzzer harness: table pools (io/json_tables.hpp): embplan's {"tables": [...]}
// and NeuroShard / DreamShard table_configs.json (a bare array, "row",
// "bin_0".."bin_16", "index"), read with a default dim (DLRM configs carry
// none) and with "dim" required, both as a whole document (parse_json, then
// pool_from_json) and streamed, each table converted as the parser reaches it
// (parse_pool_file, what the CLI's --pool reads with): the two must accept
// the same inputs and read the same tables. What is accepted must come back
// equal through pool_to_json.

#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "embplan/io/json_file.hpp"
#include "embplan/io/json_tables.hpp"
#include "fuzz_support.hpp"

namespace {

// The tables the streamed reader reads from `text`, or none where it refuses.
std::optional<std::vector<embplan::table_spec>> streamed(std::string_view text,
                                                         std::int32_t default_dim) {
  try {
    return embplan::io::parse_pool_file(text, "pool.json", default_dim);
  } catch (const embplan::error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = embplan::fuzz::as_text(data, size);
  for (const std::int32_t default_dim : {16, 0}) {
    const auto by_stream = streamed(text, default_dim);
    bool whole_accepted = false;
    embplan::fuzz::expect_only_embplan_errors([&] {
      const auto pool =
          embplan::io::pool_from_json(embplan::io::parse_json(text, "pool.json"), default_dim);
      whole_accepted = true;
      embplan::fuzz::require_equal(by_stream && *by_stream == pool, "streamed pool reader");
      const auto back = embplan::fuzz::must_succeed("pool round trip", [&] {
        return embplan::io::pool_from_json(embplan::io::pool_to_json(pool), default_dim);
      });
      embplan::fuzz::require_equal(back == pool, "pool round trip");
    });
    if (by_stream && !whole_accepted) {
      throw std::logic_error("streamed pool reader accepted what pool_from_json refuses");
    }
  }
  return 0;
}
