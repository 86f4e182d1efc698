#include "embplan/io/json.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/cost/detail/json_lines.hpp"

namespace {

using nlohmann::json;
namespace io = embplan::io;

// what() of the embplan::error `f` throws; fails the test if it throws nothing
// or anything else (a leaked nlohmann exception included).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const embplan::error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not an embplan::error: " << e.what());
  }
  FAIL("no error thrown");
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

embplan::reuse_histogram random_hist(embplan::rng& r) {
  std::array<double, embplan::reuse_bin_count> alpha{};
  alpha.fill(0.5);
  embplan::reuse_histogram h{};
  r.dirichlet(alpha, h);
  return h;
}

std::vector<embplan::table_spec> random_tables(std::uint64_t seed, std::size_t n) {
  embplan::rng r(seed);
  std::vector<embplan::table_spec> out;
  for (std::size_t i = 0; i < n; ++i) {
    embplan::table_spec t;
    if (i % 3 != 2) t.name = "t" + std::to_string(i);  // some unnamed
    t.rows = r.between(1, 3'000'000'000LL);            // beyond 32 bits
    t.dim = static_cast<std::int32_t>(4 * r.between(1, 64));
    t.pooling_factor = r.uniform(0.0, 200.0);
    t.reuse_hist = random_hist(r);
    t.weight_dtype = static_cast<embplan::dtype>(r.below(3));
    out.push_back(t);
  }
  return out;
}

embplan::task small_task(std::uint64_t seed) {
  embplan::task t;
  t.name = "task-" + std::to_string(seed);
  t.tables = random_tables(seed, 5);
  for (auto& spec : t.tables)
    spec.rows = 1000 + static_cast<std::int64_t>(spec.rows % 1000);  // a whole table fits
  t.cluster = embplan::uniform_topology(4, {}, 2);
  t.cluster.devices[1].memory_bytes = 8 * embplan::gib;
  t.cluster.devices[2].memory_bandwidth_gbps = 900.5;
  t.batch_size = 4096;
  t.optimizer_state = embplan::optimizer::adam;
  return t;
}

json table_json(std::int64_t rows = 100, std::int32_t dim = 8) {
  json j = {{"name", "x"}, {"rows", rows}, {"dim", dim}, {"pooling_factor", 2.5}};
  json hist = json::array();
  for (std::size_t k = 0; k < embplan::reuse_bin_count; ++k)
    hist.push_back(k == 0 ? 0.75 : (k == 1 ? 0.25 : 0.0));
  j["reuse_hist"] = hist;
  return j;
}

json task_json() {
  return json{{"name", "demo"},
              {"tables", json::array({table_json(), table_json(200, 16)})},
              {"cluster", {{"count", 2}}}};
}

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::path(EMBPLAN_BINARY_DIR) / "test_io_scratch";
  std::filesystem::create_directories(dir);
  return dir / name;
}

}  // namespace

// ------------------------------------------------------------------ parsing, files

TEST_CASE("parse_json: malformed and truncated text name the source and the byte") {
  CHECK(io::parse_json("{\"a\": [1, 2]}")["a"][1] == 2);

  const auto truncated = error_of([] { (void)io::parse_json("{\"rows\": 10,", "pool.json"); });
  CHECK(contains(truncated, "pool.json"));
  CHECK(contains(truncated, "byte 13"));  // 1-based: one past the 12 bytes read
  CHECK(contains(truncated, "unexpected end of input"));
  CHECK(contains(truncated, "expected"));
  CHECK(!contains(truncated, "[json.exception"));

  const auto malformed = error_of([] { (void)io::parse_json("{\"rows\": 1x}"); });
  CHECK(contains(malformed, "<input>"));
  CHECK(contains(malformed, "byte 11"));
  CHECK(contains(malformed, "last read: '1x'"));

  const auto empty = error_of([] { (void)io::parse_json("", "empty.json"); });
  CHECK(contains(empty, "empty.json"));
  CHECK(contains(empty, "byte 1"));

  CHECK(contains(error_of([] { (void)io::parse_json("[1] 2"); }), "byte"));
}

TEST_CASE("parse_json: a key twice in one object is refused, naming the key and its path") {
  // nlohmann keeps the last copy, other readers the first: 10 rows or 1e9.
  const auto top = error_of([] { (void)io::parse_json(R"({"rows": 10, "rows": 1e9})", "t.json"); });
  CHECK(contains(top, "t.json: duplicate key \"rows\""));
  CHECK(contains(top, "expected each key at most once in an object"));

  const auto deep = error_of([] {
    (void)io::parse_json(
        R"({"name": "a", "tables": [{"rows": 1}, {"dim": 4, "x": {}, "dim": 8}], "name": "b"})",
        "pool.json");
  });
  CHECK(contains(deep, "pool.json: duplicate key \"dim\" at \"tables[1].dim\""));

  const auto in_arrays =
      error_of([] { (void)io::parse_json(R"([[0], [1, {"a": 1, "b": [], "a": 2}]])"); });
  CHECK(contains(in_arrays, "<input>: duplicate key \"a\" at \"[1][1].a\""));

  // The same key in sibling or nested objects is no duplicate.
  CHECK(io::parse_json(
            R"({"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}], "c": {"b": 1}})")["b"][1]["a"] == 3);

  // A long key is shown cut, with its size.
  const std::string key(5000, 'k');
  const auto long_key = error_of(
      [&] { (void)io::parse_json("{\"" + key + "\": 1, \"" + key + "\": 2}", "big.json"); });
  CHECK(contains(long_key, "big.json: duplicate key \"kkkk"));
  CHECK(contains(long_key, "(5000 bytes)"));
  CHECK(long_key.size() < 700);

  // Every file reader goes through parse_json.
  const auto file = scratch("duplicate_key.json");
  {
    std::ofstream out(file);
    out << R"({"name": "t", "name": "u"})";
  }
  CHECK(contains(error_of([&] { (void)io::read_json_file(file); }),
                 file.string() + ": duplicate key \"name\""));

  // JSON lines (cost records) too: line by line, each named file:line.
  const auto records = scratch("duplicate_key.jsonl");
  {
    std::ofstream out(records, std::ios::binary);
    out << "{\"id\": 1}\n{\"id\": 2, \"id\": 3}\n";
  }
  const std::string_view known[] = {"id"};
  const auto read_records = [&] {
    return embplan::cost::detail::read_json_lines<std::int64_t>(
        records, "record", known,
        [](const json& j, const std::string&) { return j["id"].get<std::int64_t>(); });
  };
  CHECK(contains(error_of(read_records), records.string() + ":2: duplicate key \"id\""));
  {
    std::ofstream out(records, std::ios::binary);
    out << "{\"id\": 1}" << '\0' << "{\"id\": 2}\n";
  }
  CHECK(contains(error_of(read_records), records.string() + ":1: a NUL byte at byte 10"));
}

TEST_CASE("parse_json: bytes after the document, a NUL included, are refused naming the byte") {
  const auto nul =
      error_of([] { (void)io::parse_json(std::string("{\"a\": 1}\0junk", 13), "n.json"); });
  CHECK(contains(nul, "n.json: a NUL byte at byte 9"));
  const auto nul_after_space =
      error_of([] { (void)io::parse_json(std::string("[1]  \n\0", 7), "n.json"); });
  CHECK(contains(nul_after_space, "n.json: a NUL byte at byte 7"));
  const auto only_nul = error_of([] { (void)io::parse_json(std::string(1, '\0'), "n.json"); });
  CHECK(contains(only_nul, "n.json: a NUL byte at byte 1"));

  const auto second = error_of([] { (void)io::parse_json("{\"a\": 1} {\"a\": 2}", "two.json"); });
  CHECK(contains(second, "two.json: invalid JSON at byte 10"));
  CHECK(contains(second, "expected end of input"));
  CHECK(contains(error_of([] { (void)io::parse_json("[1] x", "x.json"); }), "x.json"));

  // Whitespace after the document is fine.
  CHECK(io::parse_json("{\"a\": 1}\n\n  \t\r\n")["a"] == 1);

  const auto file = scratch("trailing_nul.json");
  {
    std::ofstream out(file, std::ios::binary);
    out << "{\"n\": 3}\n" << '\0';
  }
  CHECK(contains(error_of([&] { (void)io::read_json_file(file); }),
                 file.string() + ": a NUL byte at byte 10"));
}

TEST_CASE("read_json_file / write_json_file") {
  const auto file = scratch("round.json");
  const json value = {{"tables", json::array({table_json()})}, {"n", 3}};
  io::write_json_file(file, value);
  CHECK(io::read_json_file(file) == value);
  {
    std::ifstream in(file);
    std::string first_lines((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(contains(first_lines, "\n  \"n\": 3"));  // indented by 2
  }

  const auto missing = scratch("does_not_exist.json");
  std::filesystem::remove(missing);
  const auto msg = error_of([&] { (void)io::read_json_file(missing); });
  CHECK(contains(msg, missing.string()));
  CHECK(contains(msg, "an existing JSON file"));

  const auto dir_msg = error_of([] { (void)io::read_json_file(scratch("")); });
  CHECK(contains(dir_msg, "a directory is not a regular file"));

  const auto broken = scratch("broken.json");
  {
    std::ofstream out(broken);
    out << "{\"tables\": [";
  }
  const auto broken_msg = error_of([&] { (void)io::read_json_file(broken); });
  CHECK(contains(broken_msg, broken.string()));
  CHECK(contains(broken_msg, "byte 13"));

  const auto unwritable = scratch("no_such_dir") / "x.json";
  const auto write_msg = error_of([&] { io::write_json_file(unwritable, value); });
  CHECK(contains(write_msg, unwritable.string()));
  CHECK(contains(write_msg, "writable"));
}

// ------------------------------------------------------------------ hostile input

namespace {

// `depth` nested arrays: "[[[...]]]".
std::string nested_arrays(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

}  // namespace

TEST_CASE("deeply nested JSON is refused at the depth limit, not a stack overflow") {
  // 100000 levels overflowed the recursive parser (and the recursive error
  // display) with a SIGSEGV; 128 is the limit.
  const auto deep = nested_arrays(100'000);
  const auto msg = error_of([&] { (void)io::parse_json(deep, "task.json"); });
  CHECK(contains(msg, "task.json: JSON nested deeper than 128 levels at byte 129"));
  CHECK(contains(msg, "at most 128 nested arrays and objects"));

  // Inside a value of a task, and in a file read as a task or a pool.
  const auto in_task = R"({"name": "demo", "tables": )" + deep + "}";
  const auto file = scratch("deep_task.json");
  {
    std::ofstream out(file);
    out << in_task;
  }
  const auto task_msg = error_of([&] { (void)io::tasks_from_json(io::read_json_file(file)); });
  CHECK(contains(task_msg, file.string() + ": JSON nested deeper than 128 levels"));
  const auto pool_msg = error_of([&] { (void)io::pool_from_json(io::read_json_file(file)); });
  CHECK(contains(pool_msg, "nested deeper than 128"));

  // Brackets inside strings do not count; 128 levels still parse.
  const std::string in_string = "{\"name\": \"" + std::string(1000, '[') + "\\\"[\"}";
  CHECK(io::parse_json(in_string)["name"].get<std::string>().size() == 1002);
  CHECK(io::parse_json(nested_arrays(128)).is_array());
  CHECK(contains(error_of([&] { (void)io::parse_json(nested_arrays(129)); }), "byte 129"));
}

TEST_CASE("an error shows a bounded prefix of a deep or huge value") {
  json deep = json::array();
  for (int i = 0; i < 2000; ++i)
    deep = json::array({std::move(deep)});
  const auto msg = error_of([&] { io::detail::fail_value("tables", deep, "an object"); });
  CHECK(contains(msg, "field 'tables' = [[[[[[[[[[[[[[[[[...]"));
  CHECK(msg.size() < 200);

  json wide = json::array();
  for (int i = 0; i < 100'000; ++i)
    wide.push_back(i);
  const auto wide_msg = error_of([&] { io::detail::fail_value("dims", wide, "a number"); });
  CHECK(contains(wide_msg, "field 'dims' = [0,1,2,3,4,5,6,7,8,9,10,"));
  CHECK(contains(wide_msg, "...: expected a number"));
  CHECK(wide_msg.size() < 200);

  // Small values read as json::dump() writes them.
  const json small = {{"a", json::array({1, 2.5, "x"})}, {"b", nullptr}, {"c", json::object()}};
  CHECK(io::detail::display(small) == small.dump());
  CHECK(io::detail::display(json(std::string(500, 'z'))) == "\"" + std::string(76, 'z') + "...");
}

TEST_CASE("special files are refused as JSON files, naming the path") {
  for (const std::filesystem::path special : {"/dev/zero", "/dev/null"}) {
    if (!std::filesystem::exists(special)) continue;
    const auto msg = error_of([&] { (void)io::read_json_file(special); });
    CHECK(contains(msg, "field 'file' = \"" + special.string() + "\""));
    CHECK(contains(msg, "not a regular file"));
  }
  const auto dir = scratch("a_directory.json");
  std::filesystem::create_directories(dir);
  const auto msg = error_of([&] { (void)io::read_json_file(dir); });
  CHECK(contains(msg, dir.string()));
  CHECK(contains(msg, "a directory is not a regular file"));
}

// ------------------------------------------------------------------ tables, pools

TEST_CASE("table_spec and pool round trip through JSON") {
  const auto tables = random_tables(7, 20);
  const auto j = io::pool_to_json(tables);
  CHECK(j["tables"].size() == 20);
  CHECK(j["tables"][0]["name"] == "t0");
  CHECK(!j["tables"][2].contains("name"));
  CHECK(io::pool_from_json(j) == tables);
  // Through text too (doubles survive printing and parsing exactly).
  CHECK(io::pool_from_json(io::parse_json(j.dump())) == tables);
  CHECK(io::table_from_json(io::to_json(tables[4]), "t") == tables[4]);
}

TEST_CASE("NeuroShard / DreamShard table_configs.json entries are read as they are") {
  // Three entries in the published layout: "row", "bin_k" keys, and DreamShard's
  // "index" (tools/gen_dlrm_data.py writes exactly these keys).
  const char* text = R"([
    {"index": 0, "row": 4000000, "dim": 64, "pooling_factor": 12.5,
     "bin_0": 0.5, "bin_1": 0.25, "bin_2": 0.125, "bin_3": 0.125, "bin_4": 0.0, "bin_5": 0.0,
     "bin_6": 0.0, "bin_7": 0.0, "bin_8": 0.0, "bin_9": 0.0, "bin_10": 0.0, "bin_11": 0.0,
     "bin_12": 0.0, "bin_13": 0.0, "bin_14": 0.0, "bin_15": 0.0, "bin_16": 0.0},
    {"index": 1, "row": 2.0e9, "pooling_factor": 1.0,
     "bin_0": 1.0, "bin_1": 0.0, "bin_2": 0.0, "bin_3": 0.0, "bin_4": 0.0, "bin_5": 0.0,
     "bin_6": 0.0, "bin_7": 0.0, "bin_8": 0.0, "bin_9": 0.0, "bin_10": 0.0, "bin_11": 0.0,
     "bin_12": 0.0, "bin_13": 0.0, "bin_14": 0.0, "bin_15": 0.0, "bin_16": 0.0},
    {"index": 2, "row": 17, "dim": 4, "pooling_factor": 0,
     "bin_0": 0, "bin_1": 0, "bin_2": 0, "bin_3": 0, "bin_4": 0, "bin_5": 0,
     "bin_6": 0, "bin_7": 0, "bin_8": 0, "bin_9": 0, "bin_10": 0, "bin_11": 0,
     "bin_12": 0, "bin_13": 0, "bin_14": 0, "bin_15": 0, "bin_16": 0}
  ])";
  const auto pool = io::pool_from_json(io::parse_json(text), 32);
  REQUIRE(pool.size() == 3);
  CHECK(pool[0].rows == 4'000'000);
  CHECK(pool[0].dim == 64);
  CHECK(pool[0].pooling_factor == 12.5);
  CHECK(pool[0].reuse_hist[0] == 0.5);
  CHECK(pool[0].reuse_hist[3] == 0.125);
  CHECK(pool[0].name.empty());
  CHECK(pool[0].weight_dtype == embplan::dtype::fp32);
  CHECK(pool[1].rows == 2'000'000'000);                     // written as a float, integral
  CHECK(pool[1].dim == 32);                                 // no "dim": the default
  CHECK(pool[2].reuse_hist == embplan::reuse_histogram{});  // all-zero: an unused table

  // DreamShard wraps the same entries in {"tables": [...]}.
  const auto wrapped = io::pool_from_json(json{{"tables", io::parse_json(text)}}, 32);
  CHECK(wrapped == pool);

  // Without a default, a missing dim is an error.
  const auto entry = io::parse_json(text)[1];
  CHECK(contains(error_of([&] { (void)io::table_from_json(entry, "tables[1]"); }),
                 "field 'tables[1].dim' is missing"));
  CHECK(io::table_from_json(entry, "tables[1]", 8).dim == 8);
}

TEST_CASE("bad tables name the field and the value") {
  auto bad = [](json j) { return error_of([&] { (void)io::pool_from_json(json::array({j})); }); };

  auto j = table_json();
  j["rows"] = -5;
  CHECK(contains(bad(j), "field 'tables[0].rows' = -5: expected a positive integer"));
  j["rows"] = 0;
  CHECK(contains(bad(j), "field 'tables[0].rows' = 0"));
  j["rows"] = 1.5;
  CHECK(contains(bad(j), "field 'tables[0].rows' = 1.5: expected an integer"));
  j["rows"] = "1000";
  CHECK(contains(bad(j), "field 'tables[0].rows' = \"1000\": expected an integer"));
  j["rows"] = 1e30;
  CHECK(contains(bad(j), "field 'tables[0].rows' = 1e+30: expected an integer below 2^63"));
  j["rows"] = 3'000'000'000LL;  // beyond 32 bits is fine
  CHECK(io::pool_from_json(json::array({j}))[0].rows == 3'000'000'000LL);

  j = table_json();
  j["dim"] = 0;
  CHECK(contains(bad(j), "field 'tables[0].dim' = 0: expected a positive integer"));
  j["dim"] = -4;
  CHECK(contains(bad(j), "field 'tables[0].dim' = -4"));
  j["dim"] = 5'000'000'000LL;
  CHECK(contains(bad(j), "field 'tables[0].dim' = 5000000000: expected a 32-bit integer"));
  j["dim"] = true;
  CHECK(contains(bad(j), "field 'tables[0].dim' = true: expected an integer"));

  j = table_json();
  j["pooling_factor"] = -0.5;
  CHECK(contains(bad(j), "field 'tables[0].pooling_factor' = -0.5: expected a finite number >= 0"));
  j["pooling_factor"] = nullptr;  // what Python's json writes for NaN
  CHECK(contains(bad(j), "field 'tables[0].pooling_factor' = null: expected a number"));

  j = table_json();
  j["reuse_hist"][3] = -0.25;
  j["reuse_hist"][0] = 1.0;
  CHECK(contains(bad(j), "field 'tables[0].bin_3' = -0.25: expected a finite fraction >= 0"));
  j = table_json();
  j["reuse_hist"][0] = 0.5;  // sums to 0.75
  CHECK(contains(bad(j), "field 'tables[0].reuse_hist' = 0.75: expected bins summing to 1"));
  j["reuse_hist"][0] = 0.7505;  // within 1e-3
  CHECK(io::pool_from_json(json::array({j})).size() == 1);
  j["reuse_hist"] = json::array();
  for (int k = 0; k < 17; ++k)
    j["reuse_hist"].push_back(0);
  CHECK(io::pool_from_json(json::array({j}))[0].reuse_hist == embplan::reuse_histogram{});
  j["reuse_hist"].erase(16);
  CHECK(contains(bad(j), "field 'tables[0].reuse_hist' = [0,0,"));
  CHECK(contains(bad(j), "expected an array of 17 fractions"));
  j["reuse_hist"] = table_json()["reuse_hist"];
  j["reuse_hist"][5] = "0";
  CHECK(contains(bad(j), "field 'tables[0].reuse_hist[5]' = \"0\": expected a number"));

  // NeuroShard form: a missing bin, a negative bin, a string bin.
  json ns = {{"row", 10}, {"dim", 4}, {"pooling_factor", 1.0}};
  for (int k = 0; k < 17; ++k)
    ns["bin_" + std::to_string(k)] = k == 0 ? 1.0 : 0.0;
  CHECK(io::pool_from_json(json::array({ns}))[0].rows == 10);
  auto ns_bad = ns;
  ns_bad.erase("bin_9");
  CHECK(contains(bad(ns_bad), "field 'tables[0].bin_9' is missing"));
  ns_bad = ns;
  ns_bad["bin_2"] = -1;
  CHECK(contains(bad(ns_bad), "field 'tables[0].bin_2' = -1: expected a finite fraction >= 0"));
  ns_bad = ns;
  ns_bad["row"] = "ten";
  CHECK(contains(bad(ns_bad), "field 'tables[0].row' = \"ten\": expected an integer"));
  ns_bad = ns;
  ns_bad["rows"] = 10;
  CHECK(contains(bad(ns_bad), "field 'tables[0].row' = 10: expected either \"rows\" or \"row\""));
  ns_bad = ns;
  ns_bad["reuse_hist"] = table_json()["reuse_hist"];
  CHECK(contains(bad(ns_bad), "expected either \"reuse_hist\" or \"bin_0\""));

  // Missing fields, wrong shapes, dtype.
  j = table_json();
  j.erase("rows");
  CHECK(contains(bad(j), "field 'tables[0].rows' is missing: expected a positive integer"));
  j = table_json();
  j.erase("pooling_factor");
  CHECK(contains(bad(j), "field 'tables[0].pooling_factor' is missing"));
  // Without a histogram: no reuse (all in bin 0), or all zero for an unused table.
  j = table_json();
  j.erase("reuse_hist");
  auto no_hist = io::table_from_json(j, "tables[0]");
  CHECK(no_hist.reuse_hist[0] == 1.0);
  CHECK(embplan::mean_reuse(no_hist.reuse_hist) == 1.0);
  j["pooling_factor"] = 0.0;
  no_hist = io::table_from_json(j, "tables[0]");
  CHECK(no_hist.reuse_hist == embplan::reuse_histogram{});
  j = table_json();
  j["dtype"] = "bf16";
  CHECK(contains(bad(j), "field 'tables[0].dtype' = \"bf16\": expected one of"));
  j["dtype"] = "fp16";
  CHECK(io::pool_from_json(json::array({j}))[0].weight_dtype == embplan::dtype::fp16);
  j = table_json();
  j["name"] = 7;
  CHECK(contains(bad(j), "field 'tables[0].name' = 7: expected a string"));
  CHECK(contains(bad(json(42)), "field 'tables[0]' = 42: expected an object"));

  // Pools: shape and emptiness.
  CHECK(contains(error_of([] { (void)io::pool_from_json(json::array()); }),
                 "field 'tables' = 0: expected at least one table"));
  CHECK(contains(error_of([] { (void)io::pool_from_json(json::object()); }),
                 "field 'tables' is missing"));
  CHECK(contains(error_of([] {
                   (void)io::pool_from_json(json{{"table", 1}});
                 }),
                 "field 'table' = 1: expected a known key (did you mean \"tables\"?)"));
  CHECK(contains(error_of([] { (void)io::pool_from_json(json("x")); }),
                 "field 'tables' = \"x\": expected an array of tables"));
  CHECK(contains(error_of([] {
                   (void)io::pool_from_json(json{{"tables", 3}});
                 }),
                 "field 'tables' = 3: expected an array"));
}

// ------------------------------------------------------------------ tasks

TEST_CASE("tasks round trip through JSON") {
  const auto t = small_task(11);
  const auto j = io::to_json(t);
  CHECK(j["optimizer"] == "adam");
  CHECK(j["cluster"]["devices"].size() == 4);
  CHECK(j["cluster"]["devices"][1]["memory_bytes"] == 8 * embplan::gib);
  CHECK(io::task_from_json(j) == t);
  CHECK(io::task_from_json(io::parse_json(j.dump(2))) == t);

  const std::vector<embplan::task> many{small_task(1), small_task(2), small_task(3)};
  const auto mj = io::tasks_to_json(many);
  CHECK(mj["tasks"].size() == 3);
  CHECK(io::tasks_from_json(mj) == many);
  // A single task object is a list of one.
  const auto one = io::tasks_from_json(j);
  REQUIRE(one.size() == 1);
  CHECK(one[0] == t);
}

TEST_CASE("task conveniences: uniform clusters, memory_gib, defaults") {
  json j = task_json();
  j["cluster"] = {{"count", 4},
                  {"devices_per_host", 2},
                  {"device", {{"memory_gib", 1.5}, {"memory_bandwidth_gbps", 900}}}};
  const auto t = io::task_from_json(j);
  CHECK(t.name == "demo");
  CHECK(t.batch_size == 65536);
  CHECK(t.optimizer_state == embplan::optimizer::none);
  REQUIRE(t.cluster.size() == 4);
  CHECK(t.cluster.devices_per_host == 2);
  CHECK(t.cluster.devices[2].name == "cuda:2");
  CHECK(t.cluster.devices[2].memory_bytes == 3 * embplan::gib / 2);
  CHECK(t.cluster.devices[0].memory_bandwidth_gbps == 900.0);
  CHECK(t.cluster.devices[0].cache_bandwidth_gbps == embplan::device_spec{}.cache_bandwidth_gbps);

  // A device list with defaults and names filled in.
  j["cluster"] = {{"devices", json::array({json::object(), {{"name", "gpu-b"}}})}};
  const auto t2 = io::task_from_json(j);
  CHECK(t2.cluster.devices[0].name == "cuda:0");
  CHECK(t2.cluster.devices[1].name == "gpu-b");
  CHECK(t2.cluster.devices[1].memory_bytes == 4 * embplan::gib);
}

TEST_CASE("bad tasks name the field and the value") {
  auto bad = [](const json& j) { return error_of([&] { (void)io::task_from_json(j); }); };

  auto j = task_json();
  j.erase("tables");
  CHECK(contains(bad(j), "field 'task.tables' is missing: expected"));
  j = task_json();
  j.erase("cluster");
  CHECK(contains(bad(j), "field 'task.cluster' is missing: expected"));
  j = task_json();
  j["cluster"] = json::object();
  CHECK(contains(bad(j), "field 'task.cluster.devices' is missing"));
  j["cluster"] = {{"devices", json::array()}};
  CHECK(contains(bad(j), "field 'task.cluster.devices' = 0: expected at least one device"));
  j["cluster"] = {{"count", 0}};
  CHECK(contains(bad(j), "field 'task.cluster.count' = 0: expected a positive device count"));
  j["cluster"] = {{"count", "4"}};
  CHECK(contains(bad(j), "field 'task.cluster.count' = \"4\": expected an integer"));
  j["cluster"] = {{"devices", json::array({{{"memory_bytes", 0}}})}};
  CHECK(contains(bad(j),
                 "field 'task.cluster.devices[0].memory_bytes' = 0: expected a positive size"));
  j["cluster"] = {{"devices", json::array({{{"memory_bytes", -1}}})}};
  CHECK(contains(bad(j), "field 'task.cluster.devices[0].memory_bytes' = -1"));
  j["cluster"] = {{"count", 2}, {"device", {{"memory_gib", 0}}}};
  CHECK(contains(bad(j), "field 'task.cluster.device.memory_gib' = 0: expected a positive number"));
  j["cluster"] = {{"count", 2}, {"device", {{"memory_gib", 1}, {"memory_bytes", 5}}}};
  CHECK(contains(bad(j), "field 'task.cluster.device.memory_gib' = 1: expected either"));
  j["cluster"] = {{"count", 2}, {"device", {{"memory_byte", 5}}}};  // misspelt
  CHECK(contains(bad(j),
                 "field 'task.cluster.device.memory_byte' = 5: expected a known key "
                 "(did you mean \"memory_bytes\"?)"));
  j["cluster"] = {{"count", 2}, {"device", {{"memory_bandwidth_gbps", -1.0}}}};
  CHECK(contains(bad(j), "field 'task.cluster.device.memory_bandwidth_gbps' = -1.0"));
  j["cluster"] = {{"count", 2}, {"devices", json::array({json::object()})}};
  CHECK(contains(bad(j), "field 'task.cluster.devices' = [{}]: expected either"));
  j["cluster"] = {{"count", 2}, {"devices_per_host", 0}};
  CHECK(contains(bad(j), "field 'task.cluster.devices_per_host' = 0: expected a positive"));
  j["cluster"] = {{"count", 2}, {"inter_host_bandwidth_gbps", nullptr}};
  CHECK(
      contains(bad(j), "field 'task.cluster.inter_host_bandwidth_gbps' = null: expected a number"));
  j["cluster"] = {{"count", 2}, {"collective_latency_ms", -0.5}};
  CHECK(contains(bad(j), "field 'task.cluster.collective_latency_ms' = -0.5"));
  j["cluster"] = "4 gpus";
  CHECK(contains(bad(j), "field 'task.cluster' = \"4 gpus\": expected an object"));

  j = task_json();
  j["batch_size"] = 0;
  CHECK(contains(bad(j), "field 'task.batch_size' = 0: expected a positive integer"));
  j["batch_size"] = 10.5;
  CHECK(contains(bad(j), "field 'task.batch_size' = 10.5: expected an integer"));
  j = task_json();
  j["optimizer"] = "adagrad";
  CHECK(contains(bad(j), "field 'task.optimizer' = \"adagrad\": expected one of"));
  j = task_json();
  j["tables"][1]["rows"] = -5;
  CHECK(contains(bad(j), "field 'task.tables[1].rows' = -5: expected a positive integer"));
  j["tables"] = json::array();
  CHECK(contains(bad(j), "field 'task.tables' = 0: expected at least one table"));
  CHECK(contains(bad(json::array()), "field 'task' = []: expected an object"));

  // Several tasks: the path names the task.
  json many = {{"tasks", json::array({task_json(), task_json()})}};
  many["tasks"][1]["tables"][0]["dim"] = 0;
  CHECK(contains(error_of([&] { (void)io::tasks_from_json(many); }),
                 "field 'tasks[1].tables[0].dim' = 0"));
  CHECK(contains(error_of([] {
                   (void)io::tasks_from_json(json{{"tasks", json::array()}});
                 }),
                 "field 'tasks' = 0: expected at least one task"));
  CHECK(contains(error_of([] { (void)io::tasks_from_json(json(3)); }),
                 "field 'tasks' = 3: expected"));
}

TEST_CASE("a device's host DRAM: dram_bytes or dram_gib, written only where set") {
  // Not set: not limited, not written, and the task reads back the same.
  auto t = small_task(5);
  auto j = io::to_json(t);
  for (const auto& d : j["cluster"]["devices"]) {
    CHECK_FALSE(d.contains("dram_bytes"));
    CHECK_FALSE(d.contains("dram_gib"));
  }
  CHECK(io::task_from_json(j).cluster.devices[0].dram_bytes == 0);

  t.cluster.devices[2].dram_bytes = 3 * embplan::gib + 7;
  j = io::to_json(t);
  CHECK(j["cluster"]["devices"][2]["dram_bytes"] == 3 * embplan::gib + 7);
  CHECK_FALSE(j["cluster"]["devices"][1].contains("dram_bytes"));
  CHECK(io::task_from_json(j) == t);
  CHECK(io::task_from_json(io::parse_json(j.dump())) == t);

  json g = task_json();
  g["cluster"] = {{"count", 2}, {"device", {{"dram_gib", 0.5}}}};
  const auto u = io::task_from_json(g);
  CHECK(u.cluster.devices[0].dram_bytes == embplan::gib / 2);
  CHECK(u.cluster.devices[1].dram_bytes == embplan::gib / 2);
}

TEST_CASE("bad host DRAM and hosts that do not divide the devices name field and value") {
  auto bad = [](const json& j) { return error_of([&] { (void)io::task_from_json(j); }); };
  json j = task_json();
  j["cluster"] = {{"devices", json::array({json::object(), {{"dram_bytes", 0}}})}};
  CHECK(contains(bad(j),
                 "field 'task.cluster.devices[1].dram_bytes' = 0: expected a positive size in "
                 "bytes"));
  j["cluster"] = {{"devices", json::array({{{"dram_bytes", -1}}})}};
  CHECK(contains(bad(j), "field 'task.cluster.devices[0].dram_bytes' = -1"));
  j["cluster"] = {{"count", 2}, {"device", {{"dram_gib", 0}}}};
  CHECK(contains(bad(j), "field 'task.cluster.device.dram_gib' = 0: expected a positive number"));
  j["cluster"] = {{"count", 2}, {"device", {{"dram_gib", 1e12}}}};
  const auto huge = bad(j);
  CHECK(contains(huge, "field 'task.cluster.device.dram_gib' = 1"));
  CHECK(contains(huge, "expected a capacity below 2^34 GiB"));
  j["cluster"] = {{"count", 2}, {"device", {{"dram_gib", 1}, {"dram_bytes", 5}}}};
  CHECK(contains(bad(j),
                 "field 'task.cluster.device.dram_gib' = 1: expected either \"dram_bytes\" or "
                 "\"dram_gib\", not both"));
  j["cluster"] = {{"count", 2}, {"device", {{"dram_byte", 5}}}};  // misspelt
  CHECK(contains(bad(j),
                 "field 'task.cluster.device.dram_byte' = 5: expected a known key "
                 "(did you mean \"dram_bytes\"?)"));
  j["cluster"] = {{"count", 12}, {"devices_per_host", 8}};
  CHECK(contains(bad(j),
                 "field 'task.cluster.devices_per_host' = 8: expected a divisor of the 12 devices "
                 "(hosts of equal size), or at least their number (one host)"));
  j["cluster"] = {{"count", 12}};  // the default, 8, as written in the file
  CHECK(contains(bad(j), "field 'task.cluster.devices_per_host' = 8: expected a divisor"));
  j["cluster"] = {{"count", 12}, {"devices_per_host", 6}};
  CHECK(io::task_from_json(j).cluster.devices_per_host == 6);
  j["cluster"] = {{"count", 4}, {"devices_per_host", 8}};  // one partly filled host
  CHECK(io::task_from_json(j).cluster.devices_per_host == 8);
}

// ------------------------------------------------------------------ plans

TEST_CASE("plans round trip through JSON, with names and replicas") {
  const auto t = small_task(5);
  embplan::plan p;
  p.shards.push_back(embplan::whole_table(t, 0, 3));
  // Table 1 split by columns, table 2 by rows, table 3 on a grid, table 4 replicated.
  const auto& t1 = t.tables[1];
  p.shards.push_back({1, 0, 0, 4, 0, t1.rows, false});
  p.shards.push_back({1, 2, 4, t1.dim, 0, t1.rows, false});
  const auto& t2 = t.tables[2];
  p.shards.push_back({2, 1, 0, t2.dim, 0, 10, false});
  p.shards.push_back({2, 0, 0, t2.dim, 10, t2.rows, false});
  p.shards.push_back(embplan::whole_table(t, 3, 1));
  p.shards.push_back(embplan::whole_table(t, 4, 2));
  p.shards.push_back({4, 0, 0, t.tables[4].dim, 0, 5, true});
  embplan::validate(t, p, {.memory = false});

  const auto j = io::to_json(t, p);
  CHECK(j["task"] == t.name);
  CHECK(j["shards"].size() == p.shards.size());
  CHECK(j["shards"][0]["table_name"] == "t0");
  CHECK(!j["shards"][3].contains("table_name"));  // table 2 has no name
  CHECK(j["shards"][1]["columns"] == json::array({0, 4}));
  CHECK(j["shards"][4]["rows"] == json::array({10, t2.rows}));
  CHECK(j["shards"][7]["replica"] == true);
  CHECK(io::plan_from_json(j, t) == p);
  CHECK(io::plan_from_json(io::parse_json(j.dump()), t) == p);
  CHECK(io::plan_from_json(j["shards"], t) == p);  // a bare array of shards

  // Short forms: whole ranges by default, tables and devices by name.
  const json short_form = {
      {"shards", json::array({
                     {{"table_name", "t0"}, {"device", "cuda:3"}},
                     {{"table", 1}, {"device", 0}, {"columns", {0, 4}}},
                     {{"table", 1}, {"device", 2}, {"columns", {4, t1.dim}}},
                     {{"table", 2}, {"device", 1}, {"rows", {0, 10}}},
                     {{"table", 2}, {"device", 0}, {"rows", {10, t2.rows}}},
                     {{"table", 3}, {"device", 1}},
                     {{"table", 4}, {"device", 2}},
                     {{"table", 4}, {"device", 0}, {"rows", {0, 5}}, {"replica", true}},
                 })}};
  CHECK(io::plan_from_json(short_form, t) == p);
}

TEST_CASE("bad plans name the shard and the value") {
  const auto t = small_task(5);
  const auto base =
      io::to_json(t, embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3, 0}));
  auto bad = [&](const json& j) { return error_of([&] { (void)io::plan_from_json(j, t); }); };

  auto j = base;
  j["shards"][2]["table"] = 9;
  CHECK(contains(bad(j), "field 'shards[2].table' = 9: expected a table index below 5"));
  j = base;
  j["shards"][2]["table"] = -1;
  CHECK(contains(bad(j), "field 'shards[2].table' = -1"));
  j = base;
  j["shards"][1]["device"] = 4;
  CHECK(contains(bad(j), "field 'shards[1].device' = 4: expected a device index below 4"));
  j = base;
  j["shards"][1]["device"] = "cuda:9";
  CHECK(contains(bad(j), "field 'shards[1].device' = \"cuda:9\": expected the name of a device"));
  j = base;
  j["shards"][0]["table_name"] = "t3";
  CHECK(contains(bad(j), "field 'shards[0].table_name' = \"t3\": expected the name of table 0"));
  j = base;
  j["shards"][0].erase("table");
  j["shards"][0]["table_name"] = "nope";
  CHECK(contains(bad(j), "field 'shards[0].table_name' = \"nope\""));
  j = base;
  j["shards"][0].erase("table");
  j["shards"][0].erase("table_name");
  CHECK(contains(bad(j), "field 'shards[0].table' is missing"));
  j = base;
  j["shards"][0].erase("device");
  CHECK(contains(bad(j), "field 'shards[0].device' is missing"));
  j = base;
  j["shards"][0]["columns"] = {0, 1000};
  CHECK(contains(bad(j), "field 'shards[0].columns' = [0,1000]: expected a non-empty range"));
  j = base;
  j["shards"][0]["columns"] = {0};
  CHECK(contains(bad(j), "field 'shards[0].columns' = [0]: expected a range"));
  j = base;
  j["shards"][0]["rows"] = {0, "10"};
  CHECK(contains(bad(j), "field 'shards[0].rows[1]' = \"10\": expected an integer"));
  j = base;
  j["shards"][0]["replica"] = "no";
  CHECK(contains(bad(j), "field 'shards[0].replica' = \"no\": expected true or false"));
  j = base;
  j["shards"][0]["device_id"] = 1;
  CHECK(contains(bad(j),
                 "field 'shards[0].device_id' = 1: expected a known key "
                 "(did you mean \"device\"?)"));
  j = base;
  j["task"] = "other";
  CHECK(contains(bad(j), "field 'plan.task' = \"other\": expected the task's name"));
  CHECK(contains(bad(json{{"task", t.name}}), "field 'shards' is missing"));
  CHECK(contains(bad(json{{"plan", 1}}), "field 'plan.plan' = 1: expected a known key"));
  CHECK(contains(bad(json(1)), "field 'shards' = 1: expected an array"));

  // Coverage: a table left out, a piece missing, two pieces overlapping.
  j = base;
  j["shards"].erase(3);
  CHECK(contains(bad(j), "field 'tables[3]' = \"t3\": expected a table covered by at least one"));
  j = base;
  j["shards"][1]["rows"] = {0, 10};
  CHECK(contains(bad(j), "field 'tables[1]' = \"t1\": expected shards that cover all rows"));
  j = base;
  j["shards"].push_back({{"table", 1}, {"device", 3}, {"rows", {0, 10}}});
  CHECK(contains(bad(j), "shards 1 and 5 overlap"));
}

TEST_CASE("a plan records planner, seed, content hash and version, and reads them back") {
  const auto t = small_task(5);
  const auto p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3, 0});
  const auto made = embplan::provenance_of(t, p, "lookup_greedy", 42);
  const auto j = io::to_json(t, p, made);
  CHECK(j["planner"] == "lookup_greedy");
  CHECK(j["seed"] == 42);
  CHECK(j["content_hash"] == embplan::hash_hex(made.content_hash));
  CHECK(j["embplan_version"] == EMBPLAN_VERSION_STRING);
  CHECK(io::plan_from_json(io::parse_json(j.dump()), t) == p);
  CHECK(io::provenance_from_json(io::parse_json(j.dump())) == made);
  CHECK_FALSE(io::provenance_from_json(io::to_json(t, p)).has_value());  // none recorded
  CHECK_FALSE(io::provenance_from_json(j["shards"]).has_value());

  const auto bad = [](const json& x) {
    return error_of([&] { (void)io::provenance_from_json(x); });
  };
  auto part = j;
  part.erase("seed");
  CHECK(contains(bad(part),
                 "field 'plan.seed' is missing: expected the seed (a plan records "
                 "planner, seed, content_hash and embplan_version together)"));
  auto hash = j;
  hash["content_hash"] = "12345";
  CHECK(contains(bad(hash), "field 'plan.content_hash' = \"12345\": expected 16 hex digits"));
  auto seed = j;
  seed["seed"] = -1;
  CHECK(contains(bad(seed), "field 'plan.seed' = -1: expected a non-negative integer"));
}

TEST_CASE("plan_from_json_unchecked keeps what check_plan judges; syntax and names still checked") {
  const auto t = small_task(5);
  auto j = io::to_json(t, embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3, 0}));
  j["shards"][1]["device"] = 7;
  j["shards"][2]["table"] = 9;
  j["shards"][2].erase("table_name");
  j["shards"][3]["columns"] = {0, 1000};
  j["shards"].erase(4);
  const auto p = io::plan_from_json_unchecked(j, t);
  REQUIRE(p.shards.size() == 4);
  CHECK(p.shards[1].device == 7);
  CHECK(p.shards[2].table == 9);
  CHECK(p.shards[3].col_end == 1000);
  CHECK(contains(error_of([&] { (void)io::plan_from_json(j, t); }), "shards[1].device"));

  const auto bad = [&](const json& x) {
    return error_of([&] { (void)io::plan_from_json_unchecked(x, t); });
  };
  auto k = j;
  k["shards"][0]["device"] = "cuda:9";
  CHECK(contains(bad(k), "field 'shards[0].device' = \"cuda:9\": expected the name of a device"));
  k = j;
  k["shards"][0]["table"] = -1;
  CHECK(contains(bad(k), "field 'shards[0].table' = -1: expected a table index (0 .. 2^32 - 1)"));
  k = j;
  k["shards"][0]["columns"] = {0, 5000000000};
  CHECK(contains(bad(k), "field 'shards[0].columns[1]' = 5000000000: expected a 32-bit integer"));
  k = j;
  k["shards"][0]["rows"] = "all";
  CHECK(contains(bad(k), "field 'shards[0].rows' = \"all\": expected a range"));
}

// ------------------------------------------------------------------ unknown keys

TEST_CASE("unknown keys: \"weight_dtype\": \"fp16\" is refused, not planned at fp32") {
  // weight_dtype is table_spec's C++ name; the JSON key is "dtype".
  json tables = json::array({table_json(), table_json(), table_json(), table_json()});
  tables[3]["weight_dtype"] = "fp16";
  const auto msg = error_of([&] { (void)io::pool_from_json(json{{"tables", tables}}); });
  CHECK(contains(msg, "field 'tables[3].weight_dtype' = \"fp16\": expected a known key"));
  CHECK(contains(msg, "(did you mean \"dtype\"?)"));
  CHECK(contains(msg,
                 "one of \"name\", \"rows\", \"dim\", \"pooling_factor\", \"reuse_hist\", "
                 "\"dtype\", \"row\", \"index\", \"bin_0\"..\"bin_16\""));

  json t = task_json();
  t["tables"][1]["weight_dtype"] = "fp16";
  const auto in_task = error_of([&] { (void)io::task_from_json(t); });
  CHECK(contains(in_task, "field 'task.tables[1].weight_dtype' = \"fp16\""));
  CHECK(contains(in_task, "did you mean \"dtype\"?"));

  // The same table with the right key is read at fp16.
  tables[3].erase("weight_dtype");
  tables[3]["dtype"] = "fp16";
  CHECK(io::pool_from_json(json{{"tables", tables}})[3].weight_dtype == embplan::dtype::fp16);
}

TEST_CASE("unknown keys: every JSON reader refuses one, naming the key, its path and the keys") {
  // Tables, in both forms, and the pool around them.
  json j = table_json();
  j["colour"] = "red";
  auto msg = error_of([&] { (void)io::pool_from_json(json::array({table_json(), j})); });
  CHECK(contains(msg, "field 'tables[1].colour' = \"red\": expected a known key, one of \"name\""));
  CHECK(!contains(msg, "did you mean"));
  const json neuroshard = {{"row", 10}, {"pooling_factor", 1.0}, {"size", 160}};
  msg = error_of([&] { (void)io::table_from_json(neuroshard, "tables[0]", 16); });
  CHECK(contains(msg, "field 'tables[0].size' = 160: expected a known key, one of"));
  msg = error_of([] {
    (void)io::pool_from_json(json{{"tables", json::array({table_json()})}, {"version", 2}});
  });
  CHECK(contains(msg, "field 'version' = 2: expected a known key, one of \"tables\""));

  // Tasks, the list around them, clusters and devices.
  auto bad_task = [](const json& doc) { return error_of([&] { (void)io::task_from_json(doc); }); };
  j = task_json();
  j["seed"] = 3;
  CHECK(contains(bad_task(j),
                 "field 'task.seed' = 3: expected a known key, one of \"name\", "
                 "\"batch_size\", \"optimizer\", \"tables\", \"cluster\""));
  msg = error_of([] {
    (void)io::tasks_from_json(json{{"tasks", json::array({task_json()})}, {"protocol", "x"}});
  });
  CHECK(contains(msg, "field 'protocol' = \"x\": expected a known key, one of \"tasks\""));
  j = task_json();
  j["cluster"]["bandwidth"] = 1;
  CHECK(contains(bad_task(j), "field 'task.cluster.bandwidth' = 1: expected a known key"));
  CHECK(contains(bad_task(j),
                 "one of \"devices\", \"count\", \"device\", \"devices_per_host\", "
                 "\"intra_host_bandwidth_gbps\", \"inter_host_bandwidth_gbps\", "
                 "\"collective_latency_ms\""));
  j["cluster"] = {{"devices", json::array({json::object(), {{"gpu", "h100"}}})}};
  CHECK(contains(bad_task(j),
                 "field 'task.cluster.devices[1].gpu' = \"h100\": expected a known "
                 "key, one of \"name\", \"memory_bytes\", \"memory_gib\", "
                 "\"memory_bandwidth_gbps\", \"cache_bandwidth_gbps\", \"cache_bytes\""));
  // A uniform cluster's one device has no name of its own.
  j["cluster"] = {{"count", 2}, {"device", {{"name", "gpu"}}}};
  msg = bad_task(j);
  CHECK(contains(msg,
                 "field 'task.cluster.device.name' = \"gpu\": expected a known key, one of "
                 "\"memory_bytes\", \"memory_gib\""));
  CHECK(!contains(msg, "\"name\","));

  // Plans and shards.
  const auto t = small_task(5);
  json p = io::to_json(t, embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3, 0}));
  auto bad_plan = [&](const json& doc) {
    return error_of([&] { (void)io::plan_from_json(doc, t); });
  };
  p["cost_ms"] = 3.5;
  CHECK(contains(bad_plan(p),
                 "field 'plan.cost_ms' = 3.5: expected a known key, one of \"task\", \"shards\""));
  p.erase("cost_ms");
  p["shards"][4]["col_begin"] = 0;
  CHECK(contains(bad_plan(p), "field 'shards[4].col_begin' = 0: expected a known key"));
  CHECK(contains(bad_plan(p),
                 "one of \"table\", \"table_name\", \"device\", \"columns\", "
                 "\"rows\", \"replica\""));
}

TEST_CASE("unknown keys: a near miss gets a did-you-mean") {
  using io::detail::closest_key;
  // Case and separator variants, typos, and a key whose words hold a known one.
  CHECK(closest_key("Dtype", io::detail::table_keys) == "dtype");
  CHECK(closest_key("poolingFactor", io::detail::table_keys) == "pooling_factor");
  CHECK(closest_key("pooling-factor", io::detail::table_keys) == "pooling_factor");
  CHECK(closest_key("pooling_facotr", io::detail::table_keys) == "pooling_factor");
  CHECK(closest_key("reuse_hsit", io::detail::table_keys) == "reuse_hist");
  CHECK(closest_key("dims", io::detail::table_keys) == "dim");
  CHECK(closest_key("weight_dtype", io::detail::table_keys) == "dtype");
  CHECK(closest_key("weightDtype", io::detail::table_keys) == "dtype");
  CHECK(closest_key("BIN_3", io::detail::table_keys) == "bin_3");
  CHECK(closest_key("optimizer_state", io::detail::task_keys) == "optimizer");
  CHECK(closest_key("batchsize", io::detail::task_keys) == "batch_size");
  CHECK(closest_key("memory_bandwidth", io::detail::device_keys) == "memory_bandwidth_gbps");
  CHECK(closest_key("memory_GiB", io::detail::device_keys) == "memory_gib");
  // Nothing close: no suggestion rather than a wrong one.
  CHECK(closest_key("colour", io::detail::table_keys).empty());
  CHECK(closest_key("size", io::detail::table_keys).empty());
  CHECK(closest_key("x", io::detail::task_keys).empty());

  // Through the readers.
  json j = task_json();
  j["optimiser"] = "adam";
  CHECK(contains(error_of([&] { (void)io::task_from_json(j); }),
                 "field 'task.optimiser' = \"adam\": expected a known key (did you mean "
                 "\"optimizer\"?), one of"));
  j = task_json();
  j["cluster"]["devices_per_hosts"] = 2;
  CHECK(contains(error_of([&] { (void)io::task_from_json(j); }),
                 "field 'task.cluster.devices_per_hosts' = 2: expected a known key (did you mean "
                 "\"devices_per_host\"?)"));
  j = table_json();
  j["poolingFactor"] = 3.0;
  CHECK(contains(error_of([&] { (void)io::table_from_json(j, "t"); }),
                 "field 't.poolingFactor' = 3.0: expected a known key (did you mean "
                 "\"pooling_factor\"?)"));

  // Runs of numbered keys are listed first..last.
  constexpr std::string_view keys[] = {"a_1", "a_2", "a_3", "b", "c_1", "c_2"};
  CHECK(io::detail::known_keys_text(keys) == R"("a_1".."a_3", "b", "c_1", "c_2")");
}

TEST_CASE("unknown keys: files with every known key still load") {
  json table = table_json();  // name, rows, dim, pooling_factor, reuse_hist
  table["dtype"] = "fp16";
  const json listed = {{"name", "all"},
                       {"batch_size", 1024},
                       {"optimizer", "adam"},
                       {"tables", json::array({table})},
                       {"cluster",
                        {{"devices", json::array({{{"name", "gpu0"},
                                                   {"memory_bytes", 8 * embplan::gib},
                                                   {"memory_bandwidth_gbps", 900.0},
                                                   {"cache_bandwidth_gbps", 3000.0},
                                                   {"cache_bytes", 1 << 20},
                                                   {"dram_bytes", 64 * embplan::gib}},
                                                  {{"memory_gib", 4}, {"dram_gib", 32}}})},
                         {"devices_per_host", 2},
                         {"intra_host_bandwidth_gbps", 100.0},
                         {"inter_host_bandwidth_gbps", 10.0},
                         {"collective_latency_ms", 0.01}}}};
  const auto t = io::task_from_json(listed);
  CHECK(t.tables[0].weight_dtype == embplan::dtype::fp16);
  CHECK(t.cluster.devices[1].memory_bytes == 4 * embplan::gib);
  CHECK(io::tasks_from_json(json{{"tasks", json::array({listed})}}).size() == 1);

  json uniform = listed;
  uniform["cluster"] = {{"count", 2},
                        {"device",
                         {{"memory_gib", 2},
                          {"memory_bandwidth_gbps", 900.0},
                          {"cache_bandwidth_gbps", 3000.0},
                          {"cache_bytes", 0},
                          {"dram_gib", 1.5}}}};
  CHECK(io::task_from_json(uniform).cluster.size() == 2);

  const json plan = {{"task", "all"},
                     {"shards", json::array({{{"table", 0},
                                              {"table_name", "x"},
                                              {"device", 1},
                                              {"columns", {0, 8}},
                                              {"rows", {0, 100}},
                                              {"replica", false}}})}};
  CHECK(io::plan_from_json(plan, t).shards.size() == 1);
}

TEST_CASE(
    "any corrupted field gives an embplan::error or a valid result, never another exception") {
  const auto t = small_task(9);
  const json task_doc = io::to_json(t);
  const json plan_doc =
      io::to_json(t, embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3, 0}));
  const std::vector<json> junk{
      nullptr, "x", -1, 0, 1.5, 1e300, true, json::array(), json::object(), json::array({1, 2}),
      -1e19};
  embplan::rng r(2024);
  for (int trial = 0; trial < 300; ++trial) {
    const bool corrupt_task = trial % 2 == 0;
    json doc = corrupt_task ? task_doc : plan_doc;
    const auto leaves = doc.flatten();
    auto it = leaves.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(r.below(leaves.size())));
    doc[json::json_pointer(it.key())] = junk[r.below(junk.size())];
    CAPTURE(it.key());
    try {
      if (corrupt_task) {
        (void)io::task_from_json(doc);
      } else {
        (void)io::plan_from_json(doc, t);
      }
    } catch (const embplan::error& e) {
      CHECK(contains(e.what(), "field '"));
    } catch (const std::exception& e) {
      FAIL("escaped: " << e.what());
    }
  }
}

TEST_CASE("a table's memory tier: read, validated, written only off hbm") {
  auto bad = [](json j) { return error_of([&] { (void)io::pool_from_json(json::array({j})); }); };
  const json plain = table_json();
  // hbm is the default and is not written: files from before tiers round trip.
  const auto hbm = io::pool_from_json(json::array({plain}))[0];
  CHECK(hbm.placement == embplan::tier_placement{});
  CHECK(!io::to_json(hbm).contains("tier"));
  CHECK(!io::to_json(hbm).contains("load_factor"));

  json j = plain;
  j["tier"] = "uvm_caching";
  j["load_factor"] = 0.25;
  const auto uvm = io::pool_from_json(json::array({j}))[0];
  CHECK(uvm.placement.tier == embplan::memory_tier::uvm_caching);
  CHECK(uvm.placement.load_factor == 0.25);
  CHECK(io::to_json(uvm)["tier"] == "uvm_caching");
  CHECK(io::table_from_json(io::to_json(uvm), "t") == uvm);

  j = plain;
  j["tier"] = "host";
  const auto host = io::pool_from_json(json::array({j}))[0];
  CHECK(host.placement.tier == embplan::memory_tier::host);
  CHECK(!io::to_json(host).contains("load_factor"));
  CHECK(io::table_from_json(io::to_json(host), "t") == host);

  j = plain;
  j["tier"] = "ssd";
  CHECK(contains(bad(j), "field 'tables[0].tier' = \"ssd\": expected one of \"hbm\""));
  j["tier"] = "uvm_caching";
  CHECK(contains(bad(j), "field 'tables[0].load_factor'"));
  j["load_factor"] = 1.5;
  CHECK(contains(bad(j), "field 'tables[0].load_factor' = 1.5: expected a cache load factor"));
  j["load_factor"] = 0;
  CHECK(contains(bad(j), "field 'tables[0].load_factor' = 0"));
  j["tier"] = "host";
  j["load_factor"] = 0.5;
  CHECK(contains(bad(j), "field 'tables[0].load_factor' = 0.5: expected a load factor only with"));
}
