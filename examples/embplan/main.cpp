// embplan — the command-line face of the library (DESIGN.md, "The CLI"; the
// main job is `embplan compare`). Each subcommand lives in its own file
// (commands.hpp); this one parses and dispatches. Every error becomes one line
// on stderr and exit code 2.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <vector>

#include "commands.hpp"
#include "embplan/core/error.hpp"

int main(int argc, char** argv) {
  namespace ec = embplan_cli;
  CLI::App app{"embplan: plan where embedding tables live across devices"};
  app.require_subcommand(1);
  const std::vector<ec::command> commands{
      ec::add_pool(app),    ec::add_tasks(app),   ec::add_plan(app),
      ec::add_compare(app), ec::add_collect(app), ec::add_skew(app),
      ec::add_size(app),    ec::add_observe(app), ec::add_train(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "embplan: error: " << e.what() << " (see --help)\n";
    return ec::exit_bad_input;
  }

  try {
    for (const auto& c : commands)
      if (*c.app) return c.run();
  } catch (const embplan::error& e) {
    std::cout.flush();
    std::cerr << "embplan: error: " << e.what() << '\n';
    return ec::exit_bad_input;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "embplan: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
