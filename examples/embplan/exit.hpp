#pragma once
// The exit-code contract (commands.hpp, docs/cli.md "Exit codes"), held for
// both programs (`embplan`, examples/embplan/main.cpp; `embplan_gpu`,
// examples/gpu/main.cpp) by these two functions: the command line parsed,
// then the subcommand run, every exception becoming one line on stderr and
// its code.
#include <CLI/CLI.hpp>

#include <csignal>
#include <exception>
#include <iostream>
#include <optional>
#include <streambuf>
#include <string>
#include <string_view>

#include "commands.hpp"
#include "embplan/core/error.hpp"
#include "printable.hpp"

namespace embplan_cli {

// What every program does first: a write past the file-size limit (ulimit
// -f) fails with EFBIG, which the writers report and clean up after
// (io/detail/atomic_file.hpp), instead of killing the process half-way
// through a file; stdout shows a control byte in a table name as \xNN
// (printable.hpp). The destructor flushes and puts std::cout back.
class program_streams {
 public:
  program_streams() : text_(std::cout.rdbuf()), original_(std::cout.rdbuf(&text_)) {
    std::signal(SIGXFSZ, SIG_IGN);
  }
  ~program_streams() {
    std::cout.flush();
    std::cout.rdbuf(original_);
  }
  program_streams(const program_streams&) = delete;
  program_streams& operator=(const program_streams&) = delete;

 private:
  printable_buf text_;
  std::streambuf* original_;
};

// Parses the command line: nullopt to go on, else the exit code (--help: 0;
// a bad option: 2, with CLI11's message or the range checks' own).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             std::string_view program) {
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
    std::cerr << program << ": error: " << printable(message) << " (see --help)\n";
    return exit_bad_input;
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": error: " << printable(e.what()) << " (see --help)\n";
    return exit_bad_input;
  }
  return std::nullopt;
}

// Runs `body` (returning its exit code), an exception becoming one line on
// stderr: no_plan_found 1, embplan::error 2, anything else 1 (a bug).
template <class Body>
int run_guarded(std::string_view program, Body&& body) {
  try {
    return body();
  } catch (const no_plan_found& e) {
    std::cout.flush();
    std::cerr << program << ": no plan: " << printable(e.what()) << '\n';
    return exit_no_plan;
  } catch (const embplan::error& e) {
    std::cout.flush();
    std::cerr << program << ": error: " << printable(e.what()) << '\n';
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << program << ": internal error: " << printable(e.what()) << '\n';
    return exit_internal;
  }
}

}  // namespace embplan_cli
