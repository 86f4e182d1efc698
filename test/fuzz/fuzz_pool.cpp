// libFuzzer harness: table pools (io/json_tables.hpp): embplan's {"tables": [...]}
// and NeuroShard / DreamShard table_configs.json (a bare array, "row",
// "bin_0".."bin_16", "index"), read with a default dim (DLRM configs carry
// none) and with "dim" required. What is accepted must come back equal
// through pool_to_json.

#include "embplan/io/json_file.hpp"
#include "embplan/io/json_tables.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  embplan::fuzz::expect_only_embplan_errors([&] {
    const auto j = embplan::io::parse_json(embplan::fuzz::as_text(data, size), "pool.json");
    embplan::fuzz::expect_only_embplan_errors([&] { (void)embplan::io::pool_from_json(j); });
    const auto pool = embplan::io::pool_from_json(j, 0);
    const auto back = embplan::fuzz::must_succeed("pool round trip", [&] {
      return embplan::io::pool_from_json(embplan::io::pool_to_json(pool), 0);
    });
    embplan::fuzz::require_equal(back == pool, "pool round trip");
  });
  return 0;
}
