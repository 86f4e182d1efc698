// embplan — the command-line face of the library (docs/cli.md; the main job
// is `embplan compare`). Each subcommand lives in its own file
// (commands.hpp); this one parses and dispatches. Every error becomes one line
// on stderr and exit code 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "embplan/core/error.hpp"

namespace {

// An error may echo a file's content (a line of a binary --data file): bytes
// that are not printable ASCII or valid UTF-8 are shown as \xNN, so the
// terminal sees text.
std::string printable(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
    if (c >= 0x80 && n > 1 && i + n <= s.size()) {
      bool ok = true;
      for (std::size_t k = 1; k < n; ++k)
        ok = ok && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (ok) {
        out.append(s.substr(i, n));
        i += n;
        continue;
      }
    }
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    }
    ++i;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace ec = embplan_cli;
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
      std::cerr << "embplan: error: unknown command '" << printable(argv[1])
                << "': expected one of " << names << " (see --help)\n";
      return ec::exit_bad_input;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ValidationError& e) {
    // "--count: field '--count' = -1: expected ...": the range checks' own message.
    std::string message = e.what();
    if (const auto at = message.find(": field '"); at != std::string::npos) {
      message.erase(0, at + 2);
    }
    std::cerr << "embplan: error: " << printable(message) << " (see --help)\n";
    return ec::exit_bad_input;
  } catch (const CLI::ParseError& e) {
    std::cerr << "embplan: error: " << printable(e.what()) << " (see --help)\n";
    return ec::exit_bad_input;
  }

  try {
    for (const auto& c : commands)
      if (*c.app) return c.run();
  } catch (const embplan::error& e) {
    std::cout.flush();
    std::cerr << "embplan: error: " << printable(e.what()) << '\n';
    return ec::exit_bad_input;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "embplan: internal error: " << printable(e.what()) << '\n';
    return 1;
  }
  return 0;
}
