// libFuzzer harness: .npy (io/npy.hpp), in memory (parse_npy) for the element
// types and ranks embplan asks for, and from a file (read_npy, which reads the
// header and the data in separate steps). An int64 array read must come back
// equal through serialize_npy.

#include <cstdint>

#include "embplan/io/npy.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using embplan::fuzz::expect_only_embplan_errors;
  namespace io = embplan::io;
  const auto bytes = embplan::fuzz::as_bytes(data, size);
  expect_only_embplan_errors([&] {
    const auto a = io::parse_npy<std::int64_t, 1>(bytes, "x.npy");
    const auto back = embplan::fuzz::must_succeed(
        "npy round trip", [&] { return io::parse_npy<std::int64_t, 1>(io::serialize_npy(a)); });
    embplan::fuzz::require_equal(back == a, "npy round trip");
  });
  expect_only_embplan_errors([&] { (void)io::parse_npy<std::int32_t, 1>(bytes, "x.npy"); });
  expect_only_embplan_errors([&] { (void)io::parse_npy<std::uint8_t, 1>(bytes, "x.npy"); });
  expect_only_embplan_errors([&] { (void)io::parse_npy<std::uint16_t, 2>(bytes, "x.npy"); });
  expect_only_embplan_errors([&] { (void)io::parse_npy<float, 2>(bytes, "x.npy"); });
  expect_only_embplan_errors([&] { (void)io::parse_npy<double, 3>(bytes, "x.npy"); });
  const auto& file = embplan::fuzz::scratch().write(data, size);
  expect_only_embplan_errors([&] { (void)io::read_npy<std::int64_t, 1>(file); });
  expect_only_embplan_errors([&] { (void)io::read_npy<float, 2>(file); });
  return 0;
}
