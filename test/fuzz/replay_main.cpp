// The harnesses without libFuzzer: runs one harness's entry point (its
// LLVMFuzzerTestOneInput, compiled into this program under the name
// embplan_fuzz_<harness>; harness_table.hpp) on every file under the
// directories given (the seed corpus and the past crashes), in name order, so
// a normal build (GCC) replays them as ctest tests.
// An exception other than embplan::error fails the run naming the input; a
// crash or a sanitizer report fails it by itself.
//
//   fuzz_replay task test/fuzz/corpus/task test/fuzz/regressions/task

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>
#include <typeinfo>
#include <vector>

#include "harness_table.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using embplan::fuzz::harnesses;
  const std::string_view name = argc > 1 ? argv[1] : "";
  const auto* const end = harnesses + embplan::fuzz::harness_count;
  const auto* const h = std::find_if(harnesses, end, [&](const auto& x) { return x.name == name; });
  if (h == end) {
    std::cerr << "usage: fuzz_replay <harness> <dir>...: no harness named '" << name
              << "'; there are:";
    for (const auto* x = harnesses; x != end; ++x)
      std::cerr << ' ' << x->name;
    std::cerr << '\n';
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    const fs::path dir = argv[i];
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      // regressions/<harness>/ exists only once a crash was found there.
      std::cout << "no directory " << dir << ", skipped\n";
      continue;
    }
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file()) inputs.push_back(entry.path());
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::cerr << "no inputs found: expected the seed corpus directory among the arguments\n";
    return 1;
  }
  for (const auto& file : inputs) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) {
      std::cerr << file.string() << ": cannot be read\n";
      return 1;
    }
    try {
      h->entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::cerr << file.string() << ": uncaught " << typeid(e).name() << ": " << e.what() << '\n';
      return 1;
    } catch (...) {
      std::cerr << file.string() << ": uncaught exception of an unknown type\n";
      return 1;
    }
  }
  std::cout << "replayed " << inputs.size() << " inputs\n";
  return 0;
}
