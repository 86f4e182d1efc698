// libFuzzer harness: cost records, JSON lines (cost/detail/json_lines.hpp),
// as `embplan train` reads them: read_compute_records (learn/train.hpp) and
// read_comm_records (learn/train_comm.hpp), from a scratch file of this process.

#include "embplan/learn/train.hpp"
#include "embplan/learn/train_comm.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using embplan::fuzz::expect_only_embplan_errors;
  const auto& file = embplan::fuzz::scratch().write(data, size);
  expect_only_embplan_errors([&] { (void)embplan::learn::read_compute_records(file); });
  expect_only_embplan_errors([&] { (void)embplan::learn::read_comm_records(file); });
  return 0;
}
