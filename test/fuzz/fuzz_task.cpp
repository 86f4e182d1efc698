// libFuzzer harness: task JSON (io/json_task.hpp), as `embplan plan --task`
// reads it: parse_json, then tasks_from_json (a task object or {"tasks": [...]}).
// What is accepted must come back equal through tasks_to_json.

#include "embplan/io/json_file.hpp"
#include "embplan/io/json_task.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  embplan::fuzz::expect_only_embplan_errors([&] {
    const auto j = embplan::io::parse_json(embplan::fuzz::as_text(data, size), "task.json");
    const auto tasks = embplan::io::tasks_from_json(j);
    const auto back = embplan::fuzz::must_succeed("task round trip", [&] {
      return embplan::io::tasks_from_json(embplan::io::tasks_to_json(tasks));
    });
    embplan::fuzz::require_equal(back == tasks, "task round trip");
  });
  return 0;
}
