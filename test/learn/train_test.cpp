// Reading `embplan collect` records (learn/train.hpp, learn/train_comm.hpp):
// every key the collector writes is read, any other key is an error naming it.
#include "embplan/learn/train.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/data/synthetic_pool.hpp"
#include "embplan/learn/train_comm.hpp"
#include "embplan/meter/collect.hpp"
#include "support/message_of.hpp"

namespace {

namespace fs = std::filesystem;
using embplan::test::message_of;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A scratch file of the given lines, removed with its folder at scope exit.
struct scratch_file {
  fs::path dir;
  fs::path path;
  explicit scratch_file(const std::vector<std::string>& lines) {
    dir = fs::temp_directory_path() / ("embplan-train-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    path = dir / "records.jsonl";
    std::ofstream out(path);
    for (const auto& line : lines)
      out << line << '\n';
  }
  scratch_file(const scratch_file&) = delete;
  scratch_file& operator=(const scratch_file&) = delete;
  ~scratch_file() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

const std::string compute_line =
    R"({"id":0,"tables":[1],"dims":[4],"forward_ms":1,"backward_ms":1,"total_ms":2,)"
    R"("batch_size":64,"meter":"cpu","cv":0.01,"reference_ms":0.25})";

// compute_line (or `base`) with `key` set to the JSON text `value`.
std::string with(const std::string& base, const std::string& key, const std::string& value) {
  auto j = nlohmann::json::parse(base);
  j[key] = nlohmann::json::parse(value);
  return j.dump();
}

const std::string comm_line =
    R"({"id":0,"tables":[1,2],"dims":[8,4],"device_of":[0,1],"dim_sum":[8,4],)"
    R"("start_ms":[0,1],"greedy_probability":0.5,"forward_ms":[1,2],"backward_ms":[1,1],)"
    R"("batch_size":64,"meter":"analytic"})";

}  // namespace

TEST_CASE("compute records: every key collect writes is read, an unknown key is refused") {
  {
    const scratch_file f({compute_line});
    const auto records = embplan::learn::read_compute_records(f.path);
    REQUIRE(records.size() == 1);
    CHECK(records[0].total_ms == 2.0);
  }
  // What meter/collect.hpp writes, as the CLI writes it with --reference.
  {
    const auto pool = embplan::data::synthetic_pool({.seed = 0});
    const std::vector<std::int32_t> dims{4, 8};
    const auto augmented = embplan::meter::augment(pool.size(), dims);
    const auto sample = embplan::meter::make_compute_sample(augmented, {}, 3);
    embplan::meter::shard_measurement m;
    m.forward.mean_ms = 1.0;
    m.backward.mean_ms = 2.0;
    m.total.mean_ms = 3.0;
    auto record = embplan::meter::compute_record(sample, m, "cpu", 256);
    record["reference_ms"] = 0.5;
    const scratch_file f({record.dump()});
    const auto records = embplan::learn::read_compute_records(f.path);
    REQUIRE(records.size() == 1);
    CHECK(records[0].id == 3);
    CHECK(records[0].tables.size() == sample.tables.size());
  }

  std::string line = compute_line;
  line.insert(1, R"("weight":1.5,)");
  const scratch_file f({compute_line, line});
  const auto msg = message_of([&] { (void)embplan::learn::read_compute_records(f.path); });
  CHECK(contains(msg, "field '" + f.path.string() + ":2.weight' = 1.5: expected a known key"));
  CHECK(contains(msg,
                 "one of \"id\", \"tables\", \"dims\", \"forward_ms\", \"backward_ms\", "
                 "\"total_ms\", \"batch_size\", \"meter\", \"cv\", \"reference_ms\""));
  CHECK(!contains(msg, "did you mean"));

  line = compute_line;
  line.insert(1, R"("total_msec":2,)");
  const scratch_file near({line});
  CHECK(contains(message_of([&] { (void)embplan::learn::read_compute_records(near.path); }),
                 ":1.total_msec' = 2: expected a known key (did you mean \"total_ms\"?)"));
}

TEST_CASE("comm records: every key collect writes is read, an unknown key is refused") {
  {
    const scratch_file f({comm_line});
    const auto records = embplan::learn::read_comm_records(f.path);
    REQUIRE(records.size() == 1);
    CHECK(records[0].dim_sum.size() == 2);
  }
  // What meter/collect.hpp writes.
  {
    const auto pool = embplan::data::synthetic_pool({.seed = 0});
    const std::vector<std::int32_t> dims{4, 8};
    const auto augmented = embplan::meter::augment(pool.size(), dims);
    const auto sample = embplan::meter::make_placement_sample(pool, augmented, {}, 5);
    const auto costs = embplan::meter::analytic_comm(sample, 1024);
    const scratch_file f({embplan::meter::comm_record(sample, costs, "analytic", 1024).dump()});
    const auto records = embplan::learn::read_comm_records(f.path);
    REQUIRE(records.size() == 1);
    CHECK(records[0].id == 5);
    CHECK(records[0].dim_sum == sample.dim_sum);
  }

  std::string line = comm_line;
  line.insert(1, R"("start_time_ms":[0,1],)");
  const scratch_file f({line});
  const auto msg = message_of([&] { (void)embplan::learn::read_comm_records(f.path); });
  CHECK(contains(msg, "field '" + f.path.string() +
                          ":1.start_time_ms' = [0,1]: expected a known key (did you mean "
                          "\"start_ms\"?)"));
  CHECK(contains(msg, "\"device_of\", \"greedy_probability\""));
}

TEST_CASE("the bundled cost records still load") {
  const fs::path dir = fs::path(EMBPLAN_SOURCE_DIR) / "data" / "cost";
  for (const char* name : {"cpu_compute_train_half.jsonl", "cpu_compute_test_half.jsonl",
                           "gpu_compute_train_half.jsonl", "gpu_compute_test_half.jsonl"}) {
    CAPTURE(name);
    CHECK(embplan::learn::read_compute_records(dir / name).size() >= 200);
  }
  CHECK(embplan::learn::read_comm_records(dir / "cpu_comm_4dev.jsonl").size() == 1000);
}

TEST_CASE("compute records: numbers out of range name the file:line, the field and the value") {
  struct bad {
    const char* key;
    const char* value;
    const char* shown;  // "field '<file>:1.<shown>: expected ..."
  };
  // Each was misread before: UB converting 1e32, fractions truncated, -1
  // wrapped, dims 0 trained, 1e300 accepted, -8 an "overflow" in table bytes.
  const bad cases[] = {
      {"dims", "[1e32]", "dims[0]' = 1e+32: expected an integer below 2^63"},
      {"dims", "[3000000000]", "dims[0]' = 3000000000: expected a positive 32-bit integer"},
      {"dims", "[4.5]", "dims[0]' = 4.5: expected an integer"},
      {"dims", "[0]", "dims[0]' = 0: expected a positive 32-bit integer"},
      {"dims", "[-8]", "dims[0]' = -8: expected a positive 32-bit integer"},
      {"dims", "4", "dims' = 4: expected an array"},
      {"id", "1e300", "id' = 1e+300: expected an integer below 2^63"},
      {"id", "-1", "id' = -1: expected a non-negative integer"},
      {"id", "2.5", "id' = 2.5: expected an integer"},
      {"tables", "[-1]", "tables[0]' = -1: expected a non-negative integer (a pool index)"},
      {"tables", "[1.5]", "tables[0]' = 1.5: expected an integer"},
      {"forward_ms", "-1", "forward_ms' = -1: expected a finite time >= 0"},
      {"backward_ms", "\"1\"", "backward_ms' = \"1\": expected a finite time >= 0"},
      {"total_ms", "0", "total_ms' = 0: expected a finite time > 0"},
      {"batch_size", "0", "batch_size' = 0: expected a positive integer"},
      {"batch_size", "64.5", "batch_size' = 64.5: expected an integer"},
      {"meter", "3", "meter' = 3: expected a string"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.key);
    CAPTURE(c.value);
    const scratch_file f({with(compute_line, c.key, c.value)});
    const auto msg = message_of([&] { (void)embplan::learn::read_compute_records(f.path); });
    CHECK(contains(msg, "field '" + f.path.string() + ":1." + c.shown));
  }
  // The audit's line, as written.
  const scratch_file f({compute_line, R"({"dims":[1e32],"id":5,"tables":[]})"});
  CHECK(contains(message_of([&] { (void)embplan::learn::read_compute_records(f.path); }),
                 ":2.dims[0]' = 1e+32: expected an integer below 2^63"));
  const scratch_file missing({R"({"id":5,"tables":[1],"dims":[4]})"});
  CHECK(contains(message_of([&] { (void)embplan::learn::read_compute_records(missing.path); }),
                 ":1.forward_ms' is missing: expected a time in ms"));
}

TEST_CASE("comm records: numbers out of range name the file:line, the field and the value") {
  struct bad {
    const char* key;
    const char* value;
    const char* shown;
  };
  const bad cases[] = {
      {"id", "1e300", "id' = 1e+300: expected an integer below 2^63"},
      {"id", "-1", "id' = -1: expected a non-negative integer"},
      {"dim_sum", "[8,-1]", "dim_sum[1]' = -1: expected a non-negative dim sum"},
      {"dim_sum", "[8,1e32]", "dim_sum[1]' = 1e+32: expected an integer below 2^63"},
      {"dim_sum", "[8,4.5]", "dim_sum[1]' = 4.5: expected an integer"},
      {"start_ms", "[0,-1]", "start_ms[1]' = -1: expected a finite time >= 0"},
      {"forward_ms", "[1,null]", "forward_ms[1]' = null: expected a finite time >= 0"},
      {"backward_ms", "[1,-0.5]", "backward_ms[1]' = -0.5: expected a finite time >= 0"},
      {"batch_size", "-64", "batch_size' = -64: expected a positive integer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.key);
    CAPTURE(c.value);
    const scratch_file f({with(comm_line, c.key, c.value)});
    const auto msg = message_of([&] { (void)embplan::learn::read_comm_records(f.path); });
    CHECK(contains(msg, "field '" + f.path.string() + ":1." + c.shown));
  }
}

TEST_CASE("records: deeply nested lines are refused at the depth limit, not a stack overflow") {
  const std::size_t depth = 100'000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  const scratch_file f({compute_line, deep, R"({"id": )" + deep + "}"});
  const auto msg = message_of([&] { (void)embplan::learn::read_compute_records(f.path); });
  CHECK(contains(msg, f.path.string() + ":2: JSON nested deeper than 128 levels at byte 129"));
  const scratch_file g({R"({"dim_sum": )" + deep + "}"});
  CHECK(contains(message_of([&] { (void)embplan::learn::read_comm_records(g.path); }),
                 ":1: JSON nested deeper than 128 levels at byte 140"));
}

TEST_CASE("records: special files and directories are refused, naming the path") {
  // /dev/zero was one endless line; an empty device read as "0 records".
  for (const std::string special : {"/dev/zero", "/dev/null"}) {
    if (!fs::exists(special)) continue;
    const auto msg = message_of([&] { (void)embplan::learn::read_compute_records(special); });
    CHECK(contains(msg, "field 'file' = \"" + special + "\""));
    CHECK(contains(msg, "a compute records file; a device, pipe or socket is not a regular file"));
    CHECK(contains(message_of([&] { (void)embplan::learn::read_comm_records(special); }),
                   "a comm records file; a device, pipe or socket is not a regular file"));
  }
  const scratch_file f({compute_line});
  const auto msg = message_of([&] { (void)embplan::learn::read_compute_records(f.dir); });
  CHECK(contains(msg, "field 'file' = \"" + f.dir.string() + "\""));
  CHECK(contains(msg, "a directory is not a regular file"));
}

TEST_CASE("records: a binary line is shown escaped, never as raw bytes") {
  const std::string binary{"\x01\x02PK\x03\x04\x7f\xff", 8};
  const scratch_file f({binary});
  const auto msg = message_of([&] { (void)embplan::learn::read_compute_records(f.path); });
  CHECK(contains(msg, R"("\x01\x02PK\x03\x04\x7f\xff")"));
  for (const char c : msg)
    CHECK((static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f));
}
