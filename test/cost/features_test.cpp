#include "embplan/cost/features.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "embplan/core/table_spec.hpp"

TEST_CASE("neuroshard20 follows NeuroShard's string-sorted table_configs keys") {
  using embplan::feature_set;
  const auto names = embplan::feature_names(feature_set::neuroshard20);
  // sorted(table_config.items()) in neuroshard/utils.py dict2tensor.
  std::vector<std::string> keys{"row", "pooling_factor", "dim"};
  for (int k = 0; k < 17; ++k)
    keys.push_back("bin_" + std::to_string(k));
  std::sort(keys.begin(), keys.end());
  CHECK(names == keys);
  CHECK(names[2] == "bin_10");
  CHECK(names[9] == "bin_2");

  embplan::table_spec t;
  t.rows = 1000;
  t.dim = 8;
  t.pooling_factor = 3.5;
  for (std::size_t k = 0; k < embplan::reuse_bin_count; ++k)
    t.reuse_hist[k] = static_cast<double>(k) / 100.0;
  std::vector<float> f(20);
  embplan::table_features(t, feature_set::neuroshard20, f);
  for (std::size_t i = 0; i < 17; ++i) {
    const auto bin = std::stoul(names[i].substr(4));
    CHECK(f[i] == static_cast<float>(t.reuse_hist[bin]));
  }
  CHECK(f[17] == 8.0f);
  CHECK(f[18] == 3.5f);
  CHECK(f[19] == 1000.0f);
  // embplan21 keeps the bins in order after dim, rows, pooling, size.
  std::vector<float> g(21);
  embplan::table_features(t, feature_set::embplan21, g);
  for (std::size_t k = 0; k < 17; ++k)
    CHECK(g[4 + k] == static_cast<float>(t.reuse_hist[k]));
  CHECK(embplan::feature_names(feature_set::embplan21)[5] == "bin_1");
}

TEST_CASE("a learned model's features refuse a table off hbm, naming the table and tier") {
  embplan::table_spec t;
  t.name = "clicks";
  t.rows = 100;
  t.dim = 8;
  t.pooling_factor = 1.0;
  std::vector<float> out(embplan::feature_count(embplan::feature_set::embplan21));
  CHECK_NOTHROW(embplan::table_features(t, embplan::feature_set::embplan21, out));
  t.placement = {embplan::memory_tier::uvm_caching, 0.5};
  try {
    embplan::table_features(t, embplan::feature_set::embplan21, out);
    CHECK(false);
  } catch (const embplan::error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("field 'tables.clicks.tier' = \"uvm_caching\"") != std::string::npos);
    CHECK(msg.find("analytic") != std::string::npos);
  }
}
