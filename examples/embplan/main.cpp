// embplan — the command-line face of the library (docs/cli.md; the main job
// is `embplan compare`). Each subcommand lives in its own file
// (commands.hpp); this one parses and dispatches. Every error becomes one line
// on stderr and its exit code (exit.hpp; docs/cli.md, "Exit codes").
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exit.hpp"
#include "printable.hpp"

int main(int argc, char** argv) {
  namespace ec = embplan_cli;
  const ec::program_streams streams;
  CLI::App app{"embplan: plan where embedding tables live across devices"};
  app.require_subcommand(1);
  const std::vector<ec::command> commands{
      ec::add_pool(app),    ec::add_tasks(app),   ec::add_plan(app),
      ec::add_compare(app), ec::add_collect(app), ec::add_skew(app),
      ec::add_size(app),    ec::add_observe(app), ec::add_train(app)};

  // CLI11 would answer "arguments were not expected"; name the command instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const auto& c : commands) {
      known = known || c.app->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + c.app->get_name();
    }
    if (!known) {
      std::cerr << "embplan: error: unknown command '" << ec::printable(argv[1])
                << "': expected one of " << names << " (see --help)\n";
      return ec::exit_bad_input;
    }
  }

  if (const auto code = ec::parse_command_line(app, argc, argv, "embplan")) return *code;
  return ec::run_guarded("embplan", [&] {
    for (const auto& c : commands)
      if (*c.app) return c.run();
    return 0;
  });
}
