#pragma once
// The subcommands of `embplan`, one translation unit each (<name>.cpp). Each
// add_<name> adds its subcommand and options to the app and returns how to run
// it once the command line is parsed; main.cpp runs the one that was given.
// Every check of the options comes before the first line of output.
#include <functional>

namespace CLI {
class App;
}

namespace embplan_cli {

// The exit codes: 0, 2 for bad input (one line on stderr), 1 for a bug.
inline constexpr int exit_bad_input = 2;

struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

command add_pool(CLI::App& app);
command add_tasks(CLI::App& app);
command add_plan(CLI::App& app);
command add_compare(CLI::App& app);
command add_collect(CLI::App& app);
command add_skew(CLI::App& app);
command add_size(CLI::App& app);
command add_observe(CLI::App& app);
command add_train(CLI::App& app);

}  // namespace embplan_cli
