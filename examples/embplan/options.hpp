#pragma once
// The options several subcommands of `embplan` (and `embplan_gpu`, examples/gpu)
// share, each defined here once with one help text, and their checks. A
// subcommand adds the groups it takes; the checks name the flag and the value.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/io/json.hpp"

namespace embplan_cli {

// Every numeric option has a range, checked by CLI11 before the value is
// converted and before any work: CLI11 turns "-1" into 2^64 - 1 for an
// unsigned option without a word, and an unbounded count costs minutes or
// gigabytes before it fails. The value is read as a long double first (exact
// for every 64-bit integer), so a negative is refused for an unsigned option.
// The range is appended to the help text; an error names the flag and the value.
inline std::string range_text(long double lo, long double hi) {
  const auto text = [](long double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e20L) {
      return v < 0 ? "-" + std::to_string(static_cast<std::uint64_t>(-v))
                   : std::to_string(static_cast<std::uint64_t>(v));
    }
    std::string s = std::to_string(static_cast<double>(v));
    while (s.size() > 1 && s.back() == '0')
      s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
  };
  return "[" + text(lo) + ", " + text(hi) + "]";
}

// Whether `s` is written as a decimal number: an integer is digits with an
// optional leading '-' and no leading zero ("010" would be octal 8 to CLI11,
// "0x10" hex 16, "1e3" a real); a real is a decimal with an optional fraction
// and exponent ("1.5", ".5", "2e-3"), never "inf", "nan" or a hex float.
inline bool is_decimal(std::string_view s, bool integer) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || (!integer && s[i] == '+'))) ++i;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9')
      ++i;
    return i - start;
  };
  const std::size_t int_start = i;
  const std::size_t whole = digits();
  if (integer) {
    return whole > 0 && i == s.size() && (whole == 1 || s[int_start] != '0');
  }
  std::size_t fraction = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    fraction = digits();
  }
  if (whole + fraction == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// Its message is the library's ("field '--count' = -1: expected ..."); main.cpp
// drops the "--count: " CLI11 puts before it. Values are decimal only (is_decimal).
inline CLI::Validator number_range(const std::string& name, long double lo, long double hi,
                                   bool integer) {
  const std::string range = range_text(lo, hi);
  const std::string kind =
      integer ? "a decimal integer (digits, no leading zero)" : "a decimal number";
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        long double v = 0;
        const bool ok = is_decimal(s, integer) && CLI::detail::lexical_cast(s, v) &&
                        std::isfinite(v) && (!integer || v == std::floor(v)) && v >= lo && v <= hi;
        return ok ? std::string{}
                  : embplan::detail::field_message(
                        name,
                        s.size() <= 64
                            ? s
                            : s.substr(0, 64) + "... (" + std::to_string(s.size()) + " bytes)",
                        kind + " in " + range);
      },
      "", "range " + range);
}

// An integer option (or a list of them) whose values must lie in [lo, hi].
template <class T>
CLI::Option* add_int_option(CLI::App* app, const std::string& name, T& value, std::string help,
                            long double lo, long double hi) {
  help += " (range " + range_text(lo, hi) + ")";
  return app->add_option(name, value, help)->check(number_range(name, lo, hi, true));
}

// A real-valued option whose value must be finite and in [lo, hi].
template <class T>
CLI::Option* add_real_option(CLI::App* app, const std::string& name, T& value, std::string help,
                             long double lo, long double hi) {
  help += " (range " + range_text(lo, hi) + ")";
  return app->add_option(name, value, help)->check(number_range(name, lo, hi, false));
}

// The common ranges (documented in --help and docs/cli.md).
inline constexpr long double max_seed = 18446744073709551615.0L;  // 2^64 - 1
inline constexpr long double max_devices = 65536;
inline constexpr long double max_task_count = 1'000'000;
inline constexpr long double max_tables = 1'000'000;

// --seed (and the like): any unsigned 64-bit value; a negative is refused.
inline CLI::Option* add_seed_option(CLI::App* app, std::uint64_t& seed,
                                    const std::string& name = "--seed",
                                    const std::string& help = "random seed") {
  return add_int_option(app, name, seed, help, 0, max_seed)->capture_default_str();
}

// --pool: the table pool.
inline void add_pool_option(CLI::App* app, std::string& pool) {
  app->add_option("--pool", pool, "table pool JSON (default: the synthetic pool, seed 0)");
}

inline std::vector<embplan::table_spec> load_pool(const std::string& path) {
  if (path.empty()) return embplan::data::synthetic_pool({.seed = 0});
  return embplan::io::read_pool_file(path);
}

// The message of the library's error `what` about its field `field` (or an
// element of it: "collect.dims[2]", named "--dims[2]") with that field named as the flag the user
// typed, and its value as `shown` where given (the flag's own units); empty
// where the error is about another field. The CLI names flags, not the
// library's structs.
inline std::string renamed_field(std::string_view what, std::string_view field,
                                 std::string_view flag, const std::string* shown = nullptr) {
  const std::string head = "field '" + std::string(field);
  if (!what.starts_with(head)) return {};
  const auto rest = what.substr(head.size());
  if (!rest.starts_with("' = ") && !rest.starts_with("[")) return {};
  const auto eq = what.find("' = ", head.size());
  if (eq == std::string_view::npos) return {};
  const auto colon = what.find(": expected ", eq);
  if (colon == std::string_view::npos) return {};
  const std::string value =
      shown != nullptr ? *shown : std::string(what.substr(eq + 4, colon - eq - 4));
  // An element keeps its index: "collect.dims[1]" is "--dims[1]".
  const auto element = what.substr(head.size(), eq - head.size());
  return "field '" + std::string(flag) + std::string(element) + "' = " + value +
         std::string(what.substr(colon));
}

// Runs `body`; an embplan::error about one of the library's fields in
// `flags` ({field, flag} pairs) is thrown again naming the flag (renamed_field).
template <class Body>
decltype(auto) naming_flags(
    std::initializer_list<std::pair<std::string_view, std::string_view>> flags, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const embplan::error& e) {
    for (const auto& [field, flag] : flags) {
      if (auto text = renamed_field(e.what(), field, flag); !text.empty()) {
        throw embplan::error(text);
      }
    }
    throw;
  }
}

// A file a subcommand writes after its work: checked before the work, so a
// typo in the path does not cost a long run. It must be a regular file that
// can be replaced (the writers write a temporary file beside it and rename it
// over the target, io/detail/atomic_file.hpp), or a new name in an existing
// directory this process may write: a directory, a device such as /dev/full,
// a FIFO or an unwritable place is refused, naming the flag and the path.
inline void check_output_path(std::string_view flag, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code ec;
  // A symlink is followed: the file it names is the one replaced.
  const fs::path target = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec)
    embplan::detail::fail(flag, path, "a path this process can resolve (" + ec.message() + ")");
  const auto status = fs::status(target, ec);
  if (fs::exists(status)) {
    if (fs::is_directory(status)) {
      embplan::detail::fail(flag, path, "a file to write, not a directory");
    }
    if (!fs::is_regular_file(status)) {
      embplan::detail::fail(flag, path, "a regular file to write, not a device, FIFO or socket");
    }
    if (::access(target.c_str(), W_OK) != 0) {
      embplan::detail::fail(flag, path, "a file this process may write");
    }
  }
  const fs::path parent = target.parent_path();
  if (!fs::is_directory(parent, ec)) {
    embplan::detail::fail(flag, path, "a file in an existing directory");
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    embplan::detail::fail(flag, path,
                          "a file in a directory this process may write (the file is written "
                          "beside its target and renamed over it)");
  }
}

// The outputs of one run, checked as above and for two flags naming one file
// (the second write would replace the first).
inline void check_output_paths(
    std::initializer_list<std::pair<std::string_view, const std::string*>> outputs) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string_view, fs::path>> seen;
  for (const auto& [flag, path] : outputs) {
    if (path->empty()) continue;
    check_output_path(flag, *path);
    std::error_code ec;
    const fs::path target = fs::weakly_canonical(fs::absolute(*path), ec);
    for (const auto& [other_flag, other] : seen) {
      if (other == target) {
        embplan::detail::fail(flag, *path, "a file other than " + std::string(other_flag) + "'s");
      }
    }
    seen.emplace_back(flag, target);
  }
}

// --split-seed: DreamShard's split of the pool into disjoint train and test halves.
inline void add_split_seed_option(CLI::App* app, std::uint64_t& split_seed) {
  add_seed_option(app, split_seed, "--split-seed",
                  "seed of the pool's split into disjoint train and test halves");
}

// --half (+ --split-seed): which tables of the pool a subcommand draws from.
inline void add_half_options(CLI::App* app, std::string& half, std::uint64_t& split_seed) {
  app->add_option("--half", half,
                  "tables from: whole (the pool) | train | test (one half, split by "
                  "--split-seed) | default (the protocol's: train for dreamshard, else whole) | "
                  "auto (compare: the half the learned model did not train on)")
      ->capture_default_str();
  add_split_seed_option(app, split_seed);
}

// --unseen-share: tasks of tables partly unseen by a policy trained on the train half.
inline void add_unseen_share_option(CLI::App* app, std::optional<double>& share) {
  add_real_option(app, "--unseen-share", share,
                  "AutoShard §5.5: this share of each task's tables from the pool's test half, "
                  "the rest from its train half (split by --split-seed; --half default)",
                  0, 1);
}

// A --half value other than "auto" (which compare resolves itself); the error
// lists "auto" where the subcommand takes it.
inline embplan::data::pool_half pool_half_of(const std::string& half, bool takes_auto = false) {
  if (half != "default" && half != "whole" && half != "train" && half != "test") {
    embplan::detail::fail("--half", half,
                          std::string("one of ") + (takes_auto ? "\"auto\", " : "") +
                              "\"default\", \"whole\", \"train\", \"test\"");
  }
  return embplan::data::parse_pool_half(half, "--half");
}

// --memory-gib: the memory of every device.
inline void add_memory_option(CLI::App* app, double& memory_gib) {
  add_real_option(app, "--memory-gib", memory_gib, "memory per device for embedding tables, GiB", 0,
                  1e9)
      ->capture_default_str();
}

inline std::uint64_t memory_bytes_of(double gib_value) {
  if (!(gib_value > 0.0) || gib_value > 1e9) {
    embplan::detail::fail("--memory-gib", gib_value, "a positive number of GiB");
  }
  return static_cast<std::uint64_t>(gib_value * static_cast<double>(embplan::gib));
}

// --model: the learned compute-cost model NeuroShard's planners search on (models.hpp).
inline void add_model_option(CLI::App* app, std::string& model,
                             const std::string& default_text = {}) {
  app->add_option(
      "--model", model,
      "learned compute-cost model neuroshard plans on: a file of `embplan train "
      "compute`, or none (analytic); default: " +
          (default_text.empty() ? std::string("the bundled CPU-meter model") : default_text));
}

// --meter, --reference, --reference-ms: what prices every finished plan (models.hpp).
struct meter_args {
  std::string name = "simulated";
  bool reference = false;    // the measured meter's drift reference
  double reference_ms = 0.;  // its time; 0: measured once before the first plan
  // The measured meter's batch (bags per table per timed run); 0: the
  // planning model's when a CPU meter measured its data, else the meter's
  // default (models.cpp, measured_batch).
  std::int64_t batch = 0;
  // The measured meter's cache-flush buffer, MiB; 0: twice the last-level
  // cache (meter_options::flush_bytes).
  std::int64_t flush_mib = 0;
  // A meter of the program's own (embplan_gpu: "cuda"), taken by --meter
  // besides the four above; empty: none (models.hpp, program_meter).
  std::string own{};
  std::string own_help{};
};

// --flush-mib: the CPU meter's cache-flush buffer (meter_options::flush_bytes),
// written before every timed run; `scope` says when it applies ("--meter
// measured: ").
inline void add_flush_option(CLI::App* app, std::int64_t& flush_mib, const std::string& scope) {
  add_int_option(app, "--flush-mib", flush_mib,
                 scope +
                     "the CPU meter's cache-flush buffer, written before every timed run, MiB "
                     "(0: twice the last-level cache, AutoShard's protocol; less leaves part of "
                     "the cache warm, for quick runs on a machine that reports a large cache)",
                 0, 1 << 20)
      ->capture_default_str();
}

// meter_options::flush_bytes of --flush-mib.
inline std::uint64_t flush_bytes_of(std::int64_t flush_mib) {
  return static_cast<std::uint64_t>(flush_mib) << 20;
}

inline void add_meter_options(CLI::App* app, meter_args& m, bool dreamshard = false) {
  app->add_option("--meter", m.name,
                  std::string("simulated (the learned model, else analytic) | analytic | torchrec "
                              "(TorchRec v0.3.2's perf estimator, max over ranks) | measured "
                              "(CPU meter; slow: keep the task count small)") +
                      (dreamshard ? " | dreamshard (the --policy's cost network: its overall "
                                    "head prices a plan)"
                                  : "") +
                      (m.own.empty() ? std::string() : " | " + m.own + " (" + m.own_help + ")"))
      ->capture_default_str();
  app->add_flag("--reference", m.reference,
                "--meter measured: pair every timed run with a fixed reference shard and scale "
                "by it (cancels a shared machine's slow and fast spells)");
  add_real_option(app, "--reference-ms", m.reference_ms,
                  "--meter measured: the reference shard's time to scale to (implies "
                  "--reference; default: measured once at the start)",
                  0, 1e6);
  add_int_option(app, "--meter-batch", m.batch,
                 "--meter measured: bags per table per timed run (times scaled to the task's "
                 "batch; default: the --model's batch when the CPU meter measured its data, "
                 "so model and meter agree, else 4096)",
                 1, std::int64_t{1} << 24);
  add_flush_option(app, m.flush_mib, "--meter measured: ");
}

// --quiet: no progress line (progress.hpp; shown only when stderr is a terminal).
inline void add_quiet_option(CLI::App* app, bool& quiet) {
  app->add_flag("--quiet", quiet, "no progress line on stderr (shown only on a terminal)");
}

// --warmup, --runs, --drop: AutoShard's measuring protocol (meter/protocol.hpp).
inline void add_protocol_options(CLI::App* app, int& warmup, int& runs, int& drop) {
  add_int_option(app, "--warmup", warmup, "protocol: warm-up runs", 0, 1000)->capture_default_str();
  add_int_option(app, "--runs", runs, "protocol: measured runs", 1, 1000)->capture_default_str();
  add_int_option(app, "--drop", drop, "protocol: highest and lowest runs dropped", 0, 499)
      ->capture_default_str();
}

}  // namespace embplan_cli
