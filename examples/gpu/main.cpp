// embplan_gpu: the measuring subcommands of `embplan` on the GPU meter
// (bench/cuda_meter.cuh: the CUDA embedding bag under AutoShard's protocol,
// timed with CUDA events), where the papers measured:
//
//   embplan_gpu observe                          # the three cost observations
//   embplan_gpu collect --samples 1000 --out gpu_compute.jsonl
//
// `collect` writes compute records as `embplan collect compute` does (meter
// "cuda"), so `embplan train compute --data gpu_compute.jsonl` trains on them.
// Without a CUDA device either prints why and exits 77 (ctest: skipped).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <exception>
#include <iostream>
#include <string>

#include "../embplan/collect.hpp"
#include "../embplan/observe.hpp"
#include "../embplan/options.hpp"
#include "embplan/core/error.hpp"
#include "gpu_meter.hpp"

int main(int argc, char** argv) {
  CLI::App app{"embplan's measuring subcommands on the GPU meter"};
  app.require_subcommand(1);

  embplan_cli::observe_args ob;
  ob.batch_size = 65536;
  ob.sets = 20;
  ob.halves = 10;
  std::uint64_t max_weight_gib = 8;
  auto* observe = app.add_subcommand("observe", "The papers' three cost observations");
  embplan_cli::add_observe_options(observe, ob);
  observe->add_option("--max-weight-gib", max_weight_gib, "largest shard materialised, GiB")
      ->capture_default_str();

  embplan_cli::collect_args co;
  co.kind = "compute";
  co.batch_size = 65536;
  co.max_weight_mib = 8192;
  auto* collect = app.add_subcommand(
      "collect", "Compute cost data (NeuroShard Alg. 3-4) as JSON lines; resumable");
  embplan_cli::add_collect_options(collect, co);

  CLI11_PARSE(app, argc, argv);
  try {
    std::string why;
    const std::string device = embplan_gpu::device_description(why);
    if (*observe) {
      embplan_cli::validate(ob);
      if (max_weight_gib < 1) {
        embplan::detail::fail("observe.max_weight_gib", max_weight_gib, "at least 1");
      }
    }
    if (device.empty()) {
      std::cout << "SKIPPED: no CUDA device (" << why << ")\n";
      return 77;
    }
    if (*observe) {
      // The parts too: a GPU measures them in seconds, and (1) reports them.
      embplan_gpu::gpu_meter meter(
          embplan_cli::observe_meter_options(ob, max_weight_gib << 30, /*separate=*/true));
      return embplan_cli::run_observations(ob, meter, "GPU meter (" + device + ")");
    }
    const embplan_cli::world w;  // one process: no MPI in this program
    if (!co.quiet) std::cerr << "embplan_gpu collect: " << device << '\n';
    return embplan_cli::run_collect(
        co, w, [](const embplan::bench::meter_options& o) { return embplan_gpu::gpu_meter(o); },
        "cuda");
  } catch (const std::exception& e) {
    std::cerr << "embplan_gpu: " << e.what() << '\n';
    return 1;
  }
}
