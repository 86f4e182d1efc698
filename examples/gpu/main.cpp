// embplan_gpu: the measuring subcommands of `embplan` on the GPU meter
// (meter/cuda_meter.cuh: the CUDA embedding bag under AutoShard's protocol,
// timed with CUDA events), where the papers measured:
//
//   embplan_gpu observe                          # the three cost observations
//   embplan_gpu collect --samples 1000 --out gpu_compute.jsonl
//   embplan_gpu compare --devices 4 --max-dim 32 --count 50 --planners ...
//   embplan_gpu train dreamshard --tasks train_tasks.json --out policy.safetensors
//
// `collect` writes compute records as `embplan collect compute` does (meter
// "cuda"), so `embplan train compute --data gpu_compute.jsonl` trains on them.
// `compare` is `embplan compare` with one more meter, the default: --meter
// cuda prices each device's shard on the GPU meter at batch 65,536, with
// communication from the analytic all-to-all (gpu_meter_cost.hpp), and
// NeuroShard's planners plan on the bundled GPU-meter model
// (data/cost/gpu_compute_model.safetensors) unless --model says otherwise.
// `train` is `embplan train`; its dreamshard and autoshard kinds measure the
// placements they collect on the GPU meter (--meter cuda, the default;
// communication from the analytic all-to-all), so a policy learns the GPU.
// Without a CUDA device each prints why and exits 77 (ctest: skipped); compare
// on another meter runs anyway.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "../embplan/collect.hpp"
#include "../embplan/commands.hpp"
#include "../embplan/exit.hpp"
#include "../embplan/models.hpp"
#include "../embplan/observe.hpp"
#include "../embplan/options.hpp"
#include "embplan/core/error.hpp"
#include "gpu_meter.hpp"
#include "gpu_meter_cost.hpp"

namespace {

// Thrown by --meter cuda's factory where there is no device: main prints it
// as a skip (exit 77), not an error.
struct no_device {
  std::string why;
};

}  // namespace

int main(int argc, char** argv) {
  const embplan_cli::program_streams streams;
  CLI::App app{"embplan's measuring subcommands on the GPU meter"};
  app.require_subcommand(1);

  embplan_cli::observe_args ob;
  ob.batch_size = 65536;
  ob.sets = 20;
  ob.halves = 10;
  std::uint64_t max_weight_gib = 8;
  auto* observe = app.add_subcommand("observe", "The papers' three cost observations");
  embplan_cli::add_observe_options(observe, ob);
  embplan_cli::add_int_option(observe, "--max-weight-gib", max_weight_gib,
                              "largest shard materialised, GiB", 1, 1 << 20)
      ->capture_default_str();

  embplan_cli::collect_args co;
  co.kind = "compute";
  co.batch_size = 65536;
  co.max_weight_mib = 8192;
  auto* collect = app.add_subcommand(
      "collect", "Compute cost data (NeuroShard Alg. 3-4) as JSON lines; resumable");
  embplan_cli::add_collect_options(collect, co);

  // compare: the CLI's, with the GPU meter as its default meter.
  int warmup = 2;
  int runs = 10;
  int drop = 2;
  auto own = std::make_shared<embplan_cli::program_meter>();
  own->name = "cuda";
  own->help =
      "the GPU meter: each device's shard run as one fused CUDA embedding bag at batch 65,536 "
      "and timed with CUDA events, AutoShard protocol; communication from the analytic "
      "all-to-all model";
  own->bundled_model = "cost/gpu_compute_model.safetensors";
  own->bundled_policy = "rl/dreamshard_gpu_4dev.safetensors";
  own->make = [&]() -> embplan_cli::meter_choice {
    std::string why;
    const std::string device = embplan_gpu::device_description(why);
    if (device.empty()) throw no_device{why};
    auto o = embplan_gpu::meter_defaults();
    o.protocol = {.warmup = warmup, .runs = runs, .drop = drop, .flush = true};
    embplan::meter::validate(o);
    return {embplan_cli::any_meter(embplan_gpu::gpu_meter_cost(o)),
            "GPU meter on " + device +
                " (each device's shard run as one fused CUDA embedding "
                "bag at batch " +
                std::to_string(o.batch_size) +
                ", forward and backward timed "
                "with CUDA events, AutoShard protocol: " +
                std::to_string(warmup) + " warm-up, " + std::to_string(runs) + " runs, " +
                std::to_string(drop) +
                " highest and lowest dropped, L2 flushed; each table's trace shared by every "
                "plan of its task); communication from the analytic all-to-all model"};
  };
  own->options = {{"--warmup", [&] { return std::to_string(warmup); }},
                  {"--runs", [&] { return std::to_string(runs); }},
                  {"--drop", [&] { return std::to_string(drop); }}};
  const auto compare = embplan_cli::add_compare(app, own);
  embplan_cli::add_protocol_options(compare.app, warmup, runs, drop);
  // train: the CLI's, with the GPU meter as the default meter of dreamshard
  // and autoshard (compute and comm train on records, as `embplan train`).
  const auto train = embplan_cli::add_train(app, own);
  embplan_cli::add_protocol_options(train.app, warmup, runs, drop);
  // --warmup, --runs and --drop set how the GPU meter times: refused where it
  // does not run (another --meter; train compute and comm train on records).
  const auto check_timing_options = [&](CLI::App& sub, bool meter_runs, const std::string& why) {
    if (meter_runs) return;
    for (const auto& [flag, value] : own->options) {
      const CLI::Option* opt = sub.get_option_no_throw(flag);
      if (opt == nullptr || opt->count() == 0) continue;
      throw embplan::error(embplan::detail::field_message(
          flag, value(), "only where the cuda meter times (" + why + ")"));
    }
  };
  const auto value_of = [](CLI::App& sub, const std::string& name, const std::string& fallback) {
    const CLI::Option* opt = sub.get_option_no_throw(name);
    return opt != nullptr && opt->count() > 0 ? opt->results().front() : fallback;
  };

  if (const auto code = embplan_cli::parse_command_line(app, argc, argv, "embplan_gpu")) {
    return *code;
  }
  // Without a device a GPU subcommand is skipped (77), not failed; every
  // other outcome follows the CLI's exit codes (exit.hpp).
  return embplan_cli::run_guarded("embplan_gpu", [&]() -> int {
    try {
      if (*compare.app) {
        const std::string meter = value_of(*compare.app, "--meter", own->name);
        check_timing_options(*compare.app, meter == own->name,
                             "compare --meter " + own->name + "; not --meter " + meter);
        return compare.run();
      }
      if (*train.app) {
        const std::string kind = value_of(*train.app, "kind", "");
        const std::string meter = value_of(*train.app, "--meter", own->name);
        const bool measured = kind == "dreamshard" || kind == "autoshard";
        check_timing_options(
            *train.app, measured && meter == own->name,
            "train dreamshard or autoshard with --meter " + own->name +
                (measured ? "; not --meter " + meter : "; train " + kind + " trains on records"));
        return train.run();
      }
      std::string why;
      const std::string device = embplan_gpu::device_description(why);
      if (*observe) embplan_cli::validate(ob);
      if (device.empty()) throw no_device{why};
      if (*observe) {
        // The parts too: a GPU measures them in seconds, and (1) reports them.
        embplan_gpu::gpu_meter meter(
            embplan_cli::observe_meter_options(ob, max_weight_gib << 30, /*separate=*/true));
        return embplan_cli::run_observations(ob, meter, "GPU meter (" + device + ")");
      }
      const embplan_cli::world w;  // one process: no MPI in this program
      if (!co.quiet) std::cerr << "embplan_gpu collect: " << device << '\n';
      return embplan_cli::run_collect(
          co, w, [](const embplan::meter::meter_options& o) { return embplan_gpu::gpu_meter(o); },
          "cuda");
    } catch (const no_device& e) {
      std::cout << "SKIPPED: no CUDA device (" << e.why << ")\n";
      return 77;
    }
  });
}
