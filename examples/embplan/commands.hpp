#pragma once
// The subcommands of `embplan`, one translation unit each (<name>.cpp). Each
// add_<name> adds its subcommand and options to the app and returns how to run
// it once the command line is parsed; main.cpp runs the one that was given.
// Every check of the options comes before the first line of output.
#include <functional>
#include <memory>
#include <stdexcept>

namespace CLI {
class App;
}

namespace embplan_cli {

struct program_meter;  // models.hpp

// The exit codes (docs/cli.md, "Exit codes"): 0 done; 1 an internal error
// (a bug) or a search that found no plan for a task that may have one
// (no_plan_found); 2 bad input (one line on stderr); 3 a plan `plan --check`
// found wrong (each problem on stdout).
inline constexpr int exit_internal = 1;
inline constexpr int exit_no_plan = 1;
inline constexpr int exit_bad_input = 2;
inline constexpr int exit_plan_rejected = 3;

// A planner that found no plan where the input was valid: not the user's
// error (exit_no_plan, "embplan: no plan: ..."), unlike embplan::error.
class no_plan_found : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

command add_pool(CLI::App& app);
command add_tasks(CLI::App& app);
command add_plan(CLI::App& app);
// `own`: a meter of the calling program's (embplan_gpu: cuda), which becomes
// the default --meter, and its bundled model the default --model.
command add_compare(CLI::App& app, std::shared_ptr<const program_meter> own = nullptr);
command add_collect(CLI::App& app);
command add_skew(CLI::App& app);
command add_size(CLI::App& app);
command add_observe(CLI::App& app);
// `own`: as for compare; train dreamshard|autoshard then take --meter own->name
// too (embplan_gpu: cuda), and it is their default meter.
command add_train(CLI::App& app, std::shared_ptr<const program_meter> own = nullptr);

}  // namespace embplan_cli
