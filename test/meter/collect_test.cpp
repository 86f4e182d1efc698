#include "embplan/meter/collect.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "embplan/data/synthetic_pool.hpp"
#include "support/message_of.hpp"

namespace eb = embplan::meter;
namespace fs = std::filesystem;

namespace {
using embplan::test::message_of;

const std::vector<embplan::table_spec>& pool() {
  static const auto p = embplan::data::synthetic_pool({.tables = 40, .seed = 3});
  return p;
}
}  // namespace

TEST_CASE("augment (NeuroShard Alg. 3): every table at every dim, pool-major") {
  const std::vector<std::int32_t> dims{4, 16};
  const auto a = eb::augment(3, dims);
  REQUIRE(a.size() == 6);
  CHECK(a[0] == eb::augmented_table{0, 4});
  CHECK(a[1] == eb::augmented_table{0, 16});
  CHECK(a[5] == eb::augmented_table{2, 16});
}

TEST_CASE("compute samples (Alg. 4): 1..15 distinct augmented tables, by seed and id") {
  const eb::collect_options o{.seed = 11};
  const auto aug = eb::augment(pool().size(), o.dims);
  std::set<std::size_t> sizes;
  for (std::int64_t id = 0; id < 200; ++id) {
    const auto s = eb::make_compute_sample(aug, o, id);
    CHECK(s.id == id);
    REQUIRE(s.tables.size() >= 1);
    REQUIRE(s.tables.size() <= 15);
    sizes.insert(s.tables.size());
    std::set<std::pair<std::size_t, std::int32_t>> distinct;
    for (const auto& t : s.tables)
      distinct.insert({t.table, t.dim});
    CHECK(distinct.size() == s.tables.size());
  }
  CHECK(sizes.size() == 15);  // every count occurs in 200 draws
  CHECK(eb::make_compute_sample(aug, o, 7).tables == eb::make_compute_sample(aug, o, 7).tables);
  CHECK(eb::make_compute_sample(aug, o, 7).tables != eb::make_compute_sample(aug, o, 8).tables);
  const auto specs = eb::sample_specs(pool(), eb::make_compute_sample(aug, o, 7).tables);
  const auto s7 = eb::make_compute_sample(aug, o, 7);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    CHECK(specs[i].dim == s7.tables[i].dim);
    CHECK(specs[i].rows == pool()[s7.tables[i].table].rows);
  }
}

TEST_CASE("placement samples (Alg. 5): sorted by dim, legal, consistent, skewed starts") {
  eb::collect_options o{.devices = 4,
                        .min_place = 10,
                        .max_place = 30,
                        .max_start_ms = 20.0,
                        .device_memory_bytes = std::uint64_t{2} << 30,
                        .seed = 5};
  const auto aug = eb::augment(pool().size(), o.dims);
  double min_p = 1.0;
  double max_p = 0.0;
  for (std::int64_t id = 0; id < 50; ++id) {
    const auto s = eb::make_placement_sample(pool(), aug, o, id);
    REQUIRE(s.tables.size() >= 1);  // tables that fit nowhere are left out
    REQUIRE(s.tables.size() <= 30);
    REQUIRE(s.device_of.size() == s.tables.size());
    std::vector<std::int64_t> dim_sum(4, 0);
    std::vector<std::uint64_t> memory(4, 0);
    for (std::size_t i = 0; i < s.tables.size(); ++i) {
      if (i > 0) CHECK(s.tables[i - 1].dim >= s.tables[i].dim);
      const auto d = static_cast<std::size_t>(s.device_of[i]);
      REQUIRE(d < 4);
      dim_sum[d] += s.tables[i].dim;
      memory[d] +=
          embplan::block_bytes(static_cast<std::uint64_t>(pool()[s.tables[i].table].rows),
                               static_cast<std::uint64_t>(s.tables[i].dim), embplan::dtype::fp32);
    }
    CHECK(dim_sum == s.dim_sum);
    for (const auto m : memory)
      CHECK(m <= o.device_memory_bytes);
    REQUIRE(s.start_ms.size() == 4);
    for (const auto t : s.start_ms) {
      CHECK(t >= 0.0);
      CHECK(t <= 20.0);
    }
    min_p = std::min(min_p, s.greedy_probability);
    max_p = std::max(max_p, s.greedy_probability);
  }
  CHECK(min_p < 0.2);
  CHECK(max_p > 0.8);
  // Same id, same placement; another id, another one.
  const auto s3 = eb::make_placement_sample(pool(), aug, o, 3);
  CHECK(eb::make_placement_sample(pool(), aug, o, 3).device_of == s3.device_of);
  CHECK(eb::make_placement_sample(pool(), aug, o, 3).start_ms == s3.start_ms);
  CHECK(eb::make_placement_sample(pool(), aug, o, 4).start_ms != s3.start_ms);
}

TEST_CASE("collect options: bad values name the field and value") {
  const auto aug_size = pool().size();
  auto msg = message_of([&] { eb::validate(eb::collect_options{.max_tables = 0}, aug_size); });
  CHECK(msg.find("collect.max_tables") != std::string::npos);
  msg = message_of([&] { eb::validate(eb::collect_options{.dims = {4, -8}}, aug_size); });
  CHECK(msg.find("collect.dims[1]") != std::string::npos);
  CHECK(msg.find("-8") != std::string::npos);
  // The planners place only multiples of 4 columns: another dim is refused.
  msg = message_of([&] { eb::validate(eb::collect_options{.dims = {4, 8, 3}}, aug_size); });
  CHECK(msg.find("collect.dims[2]") != std::string::npos);
  CHECK(msg.find("= 3") != std::string::npos);
  CHECK(msg.find("multiple of 4") != std::string::npos);
  msg = message_of([&] { eb::validate(eb::collect_options{.devices = 0}, aug_size); });
  CHECK(msg.find("collect.devices") != std::string::npos);
  msg = message_of([&] { eb::validate(eb::collect_options{.max_start_ms = -1.0}, aug_size); });
  CHECK(msg.find("collect.max_start_ms") != std::string::npos);
  // No device can hold any table: named, with the memory value.
  const eb::collect_options tiny{.device_memory_bytes = 16};
  const auto aug = eb::augment(pool().size(), tiny.dims);
  msg = message_of([&] { (void)eb::make_placement_sample(pool(), aug, tiny, 0); });
  CHECK(msg.find("collect.device_memory_bytes") != std::string::npos);
  CHECK(msg.find("16") != std::string::npos);
}

TEST_CASE("records, resume and torn tails") {
  const auto dir =
      fs::temp_directory_path() / ("embplan-collect-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / "data.jsonl";
  CHECK(eb::recorded_ids(path).empty());  // no file yet

  const eb::collect_options o{.seed = 2};
  const auto aug = eb::augment(pool().size(), o.dims);
  const auto s = eb::make_compute_sample(aug, o, 4);
  eb::shard_measurement m;
  m.forward.mean_ms = 1.5;
  m.backward.mean_ms = 2.5;
  m.total.mean_ms = 4.25;
  const auto rec = eb::compute_record(s, m, "cpu", 512);
  CHECK(rec["id"] == 4);
  CHECK(rec["meter"] == "cpu");
  CHECK(rec["batch_size"] == 512);
  CHECK(rec["tables"].size() == s.tables.size());
  CHECK(rec["dims"].size() == s.tables.size());
  CHECK(rec["total_ms"] == 4.25);

  const eb::collect_options po{.devices = 2, .min_place = 10, .max_place = 12};
  const auto placement = eb::make_placement_sample(pool(), aug, po, 9);
  const auto costs = eb::analytic_comm(placement, 4096);
  REQUIRE(costs.size() == 2);
  // The device that starts last waits least in the forward all-to-all.
  const std::size_t late = placement.start_ms[0] > placement.start_ms[1] ? 0 : 1;
  CHECK(costs[late].fwd_ms <= costs[1 - late].fwd_ms);
  const auto crec = eb::comm_record(placement, costs, "analytic", 4096);
  CHECK(crec["forward_ms"].size() == 2);
  CHECK(crec["device_of"].size() == placement.tables.size());

  {
    std::ofstream out(path);
    out << rec.dump() << '\n' << R"({"id": 7, "total_ms": 1})" << '\n' << R"({"id": 8, "tot)";
  }
  CHECK(eb::recorded_ids(path) == std::set<std::int64_t>{4, 7});  // torn tail dropped
  eb::truncate_torn_tail(path);
  {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.back() == '\n');
    CHECK(text.find("\"id\": 8") == std::string::npos);
  }
  {
    std::ofstream out(path, std::ios::app);
    out << "garbage\n"
        << R"({"id": 9})" << '\n';
  }
  const auto msg = message_of([&] { (void)eb::recorded_ids(path); });
  CHECK(msg.find("data.jsonl:3") != std::string::npos);
  CHECK(msg.find("garbage") != std::string::npos);
  // A key twice in a record is refused (it was read as the last copy).
  {
    std::ofstream out(path);
    out << R"({"id": 1, "total_ms": 1, "id": 2})" << '\n' << R"({"id": 3})" << '\n';
  }
  const auto twice = message_of([&] { (void)eb::recorded_ids(path); });
  CHECK(twice.find("data.jsonl:1") != std::string::npos);
  CHECK(twice.find("duplicate key \"id\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("records carry their settings; reading with others names the field and both values") {
  const auto dir =
      fs::temp_directory_path() / ("embplan-collect-settings-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / "data.jsonl";
  const eb::collect_options o{.seed = 2};
  const auto aug = eb::augment(pool().size(), o.dims);
  eb::shard_measurement m;
  m.total.mean_ms = 4.25;
  auto referenced = eb::compute_record(eb::make_compute_sample(aug, o, 1), m, "cpu", 512);
  referenced["reference_ms"] = 2.5;
  {
    std::ofstream out(path);
    out << eb::compute_record(eb::make_compute_sample(aug, o, 0), m, "cpu", 512).dump() << '\n';
  }
  eb::record_settings s{.kind = "compute", .meter = "cpu", .batch_size = 512};
  CHECK(eb::recorded_ids(path, &s) == std::set<std::int64_t>{0});
  // Another batch size, meter or kind: refused, naming this run's value and the file's.
  s.batch_size = 1024;
  auto msg = message_of([&] { (void)eb::recorded_ids(path, &s); });
  CHECK(msg.find("field '--batch-size' = 1024: expected 512, what the records of ") !=
        std::string::npos);
  CHECK(msg.find("data.jsonl (line 1)") != std::string::npos);
  s = {.kind = "compute", .meter = "cuda", .batch_size = 512};
  CHECK(message_of([&] {
          (void)eb::recorded_ids(path, &s);
        }).find("field 'collect.meter' = \"cuda\": expected \"cpu\"") != std::string::npos);
  s = {.kind = "comm", .meter = "cpu", .batch_size = 512};
  CHECK(message_of([&] {
          (void)eb::recorded_ids(path, &s);
        }).find("field 'collect.kind' = \"comm\": expected \"compute\"") != std::string::npos);
  // A drift reference where the file has none, and the reverse.
  s = {.kind = "compute", .meter = "cpu", .batch_size = 512, .reference_ms = 2.5};
  CHECK(message_of([&] {
          (void)eb::recorded_ids(path, &s);
        }).find("field '--reference-ms' = 2.5: expected no drift reference") != std::string::npos);
  {
    std::ofstream out(path);
    out << referenced.dump() << '\n';
  }
  CHECK(eb::recorded_ids(path, &s) == std::set<std::int64_t>{1});
  s.reference_ms = 3.0;
  CHECK(message_of([&] {
          (void)eb::recorded_ids(path, &s);
        }).find("field '--reference-ms' = 3: expected 2.5, what the records") != std::string::npos);
  s.reference_ms = 0.0;  // to be measured anew: it cannot be the file's
  CHECK(message_of([&] {
          (void)eb::recorded_ids(path, &s);
        }).find("field '--reference-ms' = \"(measured anew)\": expected --reference-ms 2.5") !=
        std::string::npos);
  s.reference_ms.reset();
  CHECK(message_of([&] { (void)eb::recorded_ids(path, &s); })
            .find("field '--reference-ms' = \"(no drift reference)\": expected --reference-ms "
                  "2.5") != std::string::npos);
  // Inputs the records name: an append must match each; a record naming none
  // cannot be checked.
  s = {.kind = "compute", .meter = "cpu", .batch_size = 512, .reference_ms = 2.5};
  s.inputs = {{"--seed", "2"}, {"--dims", "4,8"}};
  const auto unchecked = message_of([&] { (void)eb::recorded_ids(path, &s); });
  INFO(unchecked);
  CHECK(unchecked.find("data.jsonl:1'") != std::string::npos);
  CHECK(unchecked.find("a record without") != std::string::npos);
  CHECK(unchecked.find("expected records that name the options they were made with") !=
        std::string::npos);
  referenced["inputs"] = {{"--seed", "2"}, {"--dims", "4,8"}};
  {
    std::ofstream out(path);
    out << referenced.dump() << '\n';
  }
  CHECK(eb::recorded_ids(path, &s) == std::set<std::int64_t>{1});
  s.inputs["--seed"] = "7";
  CHECK(message_of([&] {
          (void)eb::recorded_ids(path, &s);
        }).find("field '--seed' = 7: expected 2, what the records of") != std::string::npos);
  s.inputs = {{"--seed", "2"}, {"--dims", "4,8"}, {"--flush-mib", "0"}};
  CHECK(message_of([&] {
          (void)eb::recorded_ids(path, &s);
        }).find("field '--flush-mib' = 0: expected (none), what the records of") !=
        std::string::npos);
  // A directory is not a records file: refused naming it (not a stream error).
  const auto not_file = message_of([&] { (void)eb::recorded_ids(dir); });
  CHECK(not_file.find("field 'file' = \"" + dir.string()) != std::string::npos);
  CHECK(not_file.find("a directory is not a regular file") != std::string::npos);
  fs::remove_all(dir);
}
