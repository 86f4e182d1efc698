// Documents read and written a piece at a time (issue 51, class 8: memory
// grows with what is kept, not with what is produced): json_writer writes the
// bytes nlohmann's dump(2) writes; the streamed plan, pool and tasks writers
// write the bytes of the whole-document ones; read_task_file and
// read_pool_file read what the whole-document readers read, hand each table
// over as it is complete, and refuse what they refuse with the same messages.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/content_hash.hpp"
#include "embplan/core/random.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/io/json.hpp"
#include "support/message_of.hpp"

namespace streamed_json_test {

using nlohmann::json;
namespace io = embplan::io;
using embplan::test::message_of;

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::path(EMBPLAN_BINARY_DIR) / "test_io_streamed";
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
}

// What write_json_file writes for `value`.
std::string dumped(const json& value) {
  return value.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

// `value` written into `w` container by container, down to `depth` levels
// (below, whole values), so that every kind of step of the writer is used.
void write_walk(io::detail::json_writer& w, const json& value, int depth) {
  if (depth == 0 || !value.is_structured()) {
    w.value(value);
    return;
  }
  if (value.is_object()) {
    w.begin_object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      w.key(it.key());
      write_walk(w, *it, depth - 1);
    }
    w.end_object();
  } else {
    w.begin_array();
    for (const auto& e : value)
      write_walk(w, e, depth - 1);
    w.end_array();
  }
}

std::vector<embplan::task> some_tasks() {
  std::vector<embplan::task> out;
  for (std::uint64_t seed : {1U, 2U, 3U}) {
    embplan::task t;
    t.name = "task-" + std::to_string(seed);
    t.tables =
        embplan::data::synthetic_pool({.tables = static_cast<std::size_t>(6 + seed), .seed = seed});
    t.tables[1].name.clear();  // unnamed tables are written without "name"
    t.tables[2].placement = {embplan::memory_tier::uvm_caching, 0.25};
    t.cluster = embplan::uniform_topology(4, {}, 2);
    t.batch_size = 4096;
    t.optimizer_state = embplan::optimizer::adam;
    out.push_back(std::move(t));
  }
  return out;
}

// A sink that streams "list" of the root object and "inner" of the second
// element of "other", and keeps what it is handed.
struct recording_sink {
  static constexpr bool streams_any = true;
  std::vector<std::pair<std::size_t, json>> seen;
  std::optional<std::size_t> streams(std::span<const io::detail::json_step> path) const {
    if (path.size() == 1 && path[0].key == "list") return 1;
    if (path.size() == 3 && path[0].key == "other" && path[1].is_index() && path[1].index == 1 &&
        path[2].key == "inner") {
      return 2;
    }
    return std::nullopt;
  }
  void take(std::size_t id, std::size_t i, json&& element) {
    seen.emplace_back(id * 100 + i, std::move(element));
  }
};

TEST_CASE("json_writer: the bytes of dump(2), built container by container") {
  const json doc = {
      {"a", 1},
      {"empty_object", json::object()},
      {"empty_array", json::array()},
      {"nested", {{"x", json::array({1, 2.5, "s", nullptr, true})}, {"y", {{"z", json::array()}}}}},
      {"text", "line\nbreak \"quoted\" \x01 caf\xc3\xa9"},
      {"bad_utf8", std::string("\xff\xfe")},
      {"list", json::array({json::object(), json::array({json::array()}), {{"k", "v"}}})}};
  for (int depth = 0; depth <= 4; ++depth) {
    CAPTURE(depth);
    const auto file = scratch("walk.json");
    io::write_json_file_streamed(file,
                                 [&](io::detail::json_writer& w) { write_walk(w, doc, depth); });
    CHECK(slurp(file) == dumped(doc));
  }
  // Top-level scalars and empty containers.
  for (const json& v : {json(3), json("x"), json::object(), json::array()}) {
    const auto file = scratch("scalar.json");
    io::write_json_file_streamed(file, [&](io::detail::json_writer& w) { write_walk(w, v, 2); });
    CHECK(slurp(file) == dumped(v));
  }
}

TEST_CASE("json_writer: members() merges streamed members into key order") {
  json whole = {{"b", 2}, {"d", {{"x", 1}}}, {"f", "six"}};
  const auto file = scratch("members.json");
  io::write_json_file_streamed(file, [&](io::detail::json_writer& w) {
    w.begin_object();
    w.members(whole, {{"e", [](io::detail::json_writer& out) { out.value(5); }},
                      {"a",
                       [](io::detail::json_writer& out) {
                         out.begin_array();
                         out.value(1);
                         out.value(json::object({{"q", 0}}));
                         out.end_array();
                       }},
                      {"g", [](io::detail::json_writer& out) { out.value(json::array()); }}});
    w.end_object();
  });
  whole["a"] = json::array({1, {{"q", 0}}});
  whole["e"] = 5;
  whole["g"] = json::array();
  CHECK(slurp(file) == dumped(whole));

  // A misuse is a bug, thrown before the file is replaced.
  const auto kept = scratch("kept.json");
  spit(kept, "old");
  CHECK(message_of([&] {
          io::write_json_file_streamed(kept, [&](io::detail::json_writer& w) {
            w.begin_object();
            w.members(whole, {{"b", [](io::detail::json_writer& out) { out.value(0); }}});
          });
        }).find("member b given twice") != std::string::npos);
  CHECK(message_of([&] {
          io::write_json_file_streamed(kept, [](io::detail::json_writer& w) { w.begin_array(); });
        }).find("finished with a container open") != std::string::npos);
  CHECK(slurp(kept) == "old");
}

TEST_CASE("streamed writers: plans, pools and tasks, byte for byte the whole-document ones") {
  const auto tasks = some_tasks();
  const auto& t = tasks[0];

  const auto tasks_file = scratch("tasks.json");
  io::write_tasks_file(tasks_file, tasks);
  CHECK(slurp(tasks_file) == dumped(io::tasks_to_json(tasks)));

  const auto pool_file = scratch("pool.json");
  io::write_pool_file(pool_file, t.tables);
  CHECK(slurp(pool_file) == dumped(io::pool_to_json(t.tables)));

  embplan::plan p;
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    embplan::shard s;
    s.table = static_cast<std::uint32_t>(i);
    s.device = static_cast<std::uint32_t>(i % t.cluster.size());
    s.col_end = t.tables[i].dim;
    s.row_end = t.tables[i].rows;
    s.data_parallel = i == 3;
    p.shards.push_back(s);
  }
  const auto made = embplan::provenance_of(t, p, "lookup_greedy", 7);
  const auto plan_file = scratch("plan.json");
  io::write_plan_file(plan_file, t, p, &made);
  CHECK(slurp(plan_file) == dumped(io::to_json(t, p, made)));
  io::write_plan_file(plan_file, t, p);
  CHECK(slurp(plan_file) == dumped(io::to_json(t, p)));
  // Read back as any plan is.
  CHECK(io::plan_from_json_unchecked(io::read_json_file(plan_file), t) == p);
}

TEST_CASE("read_task_file: the tasks tasks_from_json reads, each table handed over once") {
  const auto tasks = some_tasks();
  const auto many = scratch("many.json");
  io::write_tasks_file(many, tasks);
  CHECK(io::read_tasks_file(many) == tasks);
  CHECK(io::read_tasks_file(many) == io::tasks_from_json(io::read_json_file(many)));

  // One task of the file: only its tables are read, the others left as nulls.
  auto f = io::read_task_file(many, 1);
  CHECK_FALSE(f.lone());
  CHECK(f.size() == 3);
  REQUIRE(f.task_json(0) != nullptr);
  CHECK((*f.task_json(0))["tables"].size() == tasks[0].tables.size());
  CHECK((*f.task_json(0))["tables"][0].is_null());
  CHECK(f.take(1) == tasks[1]);

  // A lone task object.
  const auto lone = scratch("lone.json");
  io::write_json_file(lone, io::to_json(tasks[2]));
  auto g = io::read_task_file(lone);
  CHECK(g.lone());
  CHECK(g.size() == 1);
  CHECK(g.take(0) == tasks[2]);
  CHECK(message_of([&] { (void)io::read_task_file(lone).take(1); }) ==
        "field 'index' = 1: expected 0 (the file holds one task)");
  CHECK(message_of([&] { (void)io::read_task_file(many).take(3); }) ==
        "field 'index' = 3: expected an index below the 3 tasks");
  // From text, as the fuzz harness reads.
  CHECK(io::parse_task_file(slurp(many), "many.json").take(2) == tasks[2]);
}

TEST_CASE("read_task_file and read_pool_file refuse what the whole-document readers refuse") {
  const auto tasks = some_tasks();
  const auto good = io::to_json(tasks[0]);
  // Each bad file: the whole-document reader's message, and the streamed one's.
  const auto both = [](const std::filesystem::path& file) {
    return std::pair{message_of([&] { (void)io::tasks_from_json(io::read_json_file(file)); }),
                     message_of([&] { (void)io::read_tasks_file(file); })};
  };
  const auto file = scratch("bad_task.json");
  const auto same = [&](const std::string& text, const std::string& expected) {
    spit(file, text);
    const auto [whole, streamed] = both(file);
    CAPTURE(text.substr(0, 200));
    CHECK(streamed == whole);
    CHECK(streamed.find(expected) != std::string::npos);
  };

  auto bad_rows = good;
  bad_rows["tables"][2]["rows"] = -5;
  same(bad_rows.dump(2), "field 'task.tables[2].rows' = -5");
  auto in_tasks = io::tasks_to_json(tasks);
  in_tasks["tasks"][1]["tables"][0]["dim"] = "8";
  same(in_tasks.dump(), "field 'tasks[1].tables[0].dim' = \"8\"");
  auto no_tables = good;
  no_tables["tables"] = json::array();
  same(no_tables.dump(), "field 'task.tables' = 0: expected at least one table");
  no_tables["tables"] = json::object();
  same(no_tables.dump(), "field 'task.tables'");
  same(good.dump() + std::string(1, '\0'),
       file.string() + ": a NUL byte at byte " + std::to_string(good.dump().size() + 1));
  same(good.dump().substr(0, 100), file.string() + ": invalid JSON at byte 101");
  same(R"({"name": "x", "name": "y"})", "duplicate key \"name\"");
  same(R"({"tables": )" + std::string(200, '[') + std::string(200, ']') + "}",
       file.string() + ": JSON nested deeper than 128 levels at byte 139");
  // A NUL and a nesting past the limit beyond the reader's first block (1 MiB).
  const std::string padding(std::size_t{3} << 20, ' ');
  same(good.dump() + padding + std::string(1, '\0'),
       ": a NUL byte at byte " + std::to_string(good.dump().size() + padding.size() + 1));
  same("{\"name\": \"" + padding + "\", \"tables\": " + std::string(200, '[') +
           std::string(200, ']') + "}",
       ": JSON nested deeper than 128 levels at byte " + std::to_string(padding.size() + 151));
  CHECK(message_of([] { (void)io::read_tasks_file("/dev/zero"); }).find("not a regular file") !=
        std::string::npos);

  // Pools: both forms, a bad table, and the default dim.
  const auto pool = scratch("pool_forms.json");
  io::write_json_file(pool, io::pool_to_json(tasks[0].tables));
  CHECK(io::read_pool_file(pool) == tasks[0].tables);
  json bare = json::array();
  for (const auto& spec : tasks[0].tables) {
    auto j = io::to_json(spec);
    j.erase("dim");
    bare.push_back(j);
  }
  io::write_json_file(pool, bare);
  CHECK(io::read_pool_file(pool, 32) == io::pool_from_json(io::read_json_file(pool), 32));
  CHECK(io::read_pool_file(pool, 32)[0].dim == 32);
  bare[3]["pooling_factor"] = -1;
  io::write_json_file(pool, bare);
  const auto whole = message_of([&] { (void)io::pool_from_json(io::read_json_file(pool)); });
  CHECK(message_of([&] { (void)io::read_pool_file(pool); }) == whole);
  CHECK(whole.find("tables[3].pooling_factor") != std::string::npos);
}

TEST_CASE("read_json_file_streamed: a streamed array's elements reach the sink one by one") {
  recording_sink s;
  const auto file = scratch("sink.json");
  spit(file,
       R"({"list": [{"a": [1, 2]}, 3, [4]], "keep": [5],
           "other": [{"inner": [6]}, {"inner": [7, {"b": 8}]}]})");
  const auto j = io::read_json_file_streamed(file, s);
  CHECK(j["list"] == json::array({nullptr, nullptr, nullptr}));
  CHECK(j["keep"] == json::array({5}));
  CHECK(j["other"][0]["inner"] == json::array({6}));
  CHECK(j["other"][1]["inner"] == json::array({nullptr, nullptr}));
  REQUIRE(s.seen.size() == 5);
  CHECK(s.seen[0] == std::pair<std::size_t, json>{100, {{"a", {1, 2}}}});
  CHECK(s.seen[1] == std::pair<std::size_t, json>{101, 3});
  CHECK(s.seen[2] == std::pair<std::size_t, json>{102, json::array({4})});
  CHECK(s.seen[3] == std::pair<std::size_t, json>{200, 7});
  CHECK(s.seen[4] == std::pair<std::size_t, json>{201, {{"b", 8}}});
}

}  // namespace streamed_json_test
