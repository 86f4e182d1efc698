// libFuzzer harness: task JSON (io/json_task.hpp), read both ways the library
// reads it: as a whole document (parse_json, then tasks_from_json: a task
// object or {"tasks": [...]}) and streamed, each table converted as the
// parser reaches it (parse_task_file, what `embplan plan --task` and `train`
// read with). The two must accept the same inputs and read the same tasks;
// what is accepted must come back equal through tasks_to_json.

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "embplan/io/json_file.hpp"
#include "embplan/io/json_task.hpp"
#include "fuzz_support.hpp"

namespace {

// The tasks the streamed reader reads from `text`, or none where it refuses.
std::optional<std::vector<embplan::task>> streamed(std::string_view text) {
  try {
    auto file = embplan::io::parse_task_file(text, "task.json");
    std::vector<embplan::task> out;
    const std::size_t n = std::max<std::size_t>(file.size(), 1);
    for (std::size_t i = 0; i < n; ++i)
      out.push_back(file.take(i));
    return out;
  } catch (const embplan::error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = embplan::fuzz::as_text(data, size);
  const auto by_stream = streamed(text);
  bool whole_accepted = false;
  embplan::fuzz::expect_only_embplan_errors([&] {
    const auto j = embplan::io::parse_json(text, "task.json");
    const auto tasks = embplan::io::tasks_from_json(j);
    whole_accepted = true;
    embplan::fuzz::require_equal(by_stream && *by_stream == tasks, "streamed task reader");
    const auto back = embplan::fuzz::must_succeed("task round trip", [&] {
      return embplan::io::tasks_from_json(embplan::io::tasks_to_json(tasks));
    });
    embplan::fuzz::require_equal(back == tasks, "task round trip");
  });
  if (by_stream && !whole_accepted) {
    throw std::logic_error("streamed task reader accepted what tasks_from_json refuses");
  }
  return 0;
}
