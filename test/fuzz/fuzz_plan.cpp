// libFuzzer harness: plan JSON (io/json_plan.hpp). A plan is read against a
// task: the input is "<task JSON>\0<plan JSON>", or, with no NUL byte, a plan
// for a fixed 3-table, 2-device task (so most inputs reach the plan reader).
// What is accepted must come back equal through to_json(task, plan).

#include <cstring>
#include <string_view>

#include "embplan/io/json_file.hpp"
#include "embplan/io/json_plan.hpp"
#include "embplan/io/json_task.hpp"
#include "fuzz_support.hpp"

namespace {

constexpr std::string_view fixed_task_json = R"({"name": "fuzz",
  "tables": [{"name": "a", "rows": 1000, "dim": 16, "pooling_factor": 2},
             {"name": "b", "rows": 50, "dim": 64, "pooling_factor": 1},
             {"name": "c", "rows": 7, "dim": 4, "pooling_factor": 0}],
  "cluster": {"devices": [{"name": "cuda:0", "memory_gib": 1},
                          {"name": "cuda:1", "memory_gib": 1}]}})";

const embplan::task& fixed_task() {
  static const embplan::task t =
      embplan::io::task_from_json(embplan::io::parse_json(fixed_task_json));
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = embplan::fuzz::as_text(data, size);
  embplan::fuzz::expect_only_embplan_errors([&] {
    const auto nul = text.find('\0');
    const auto t = nul == std::string_view::npos
                       ? fixed_task()
                       : embplan::io::task_from_json(
                             embplan::io::parse_json(text.substr(0, nul), "task.json"));
    const auto plan_text = nul == std::string_view::npos ? text : text.substr(nul + 1);
    const auto p = embplan::io::plan_from_json(embplan::io::parse_json(plan_text, "plan.json"), t);
    const auto back = embplan::fuzz::must_succeed("plan round trip", [&] {
      return embplan::io::plan_from_json(embplan::io::to_json(t, p), t);
    });
    embplan::fuzz::require_equal(back == p, "plan round trip");
  });
  return 0;
}
