#pragma once
// A user's rule for tests: table `table` (the caller's index) only on device
// `device`.

#include <cstdint>
#include <string>

#include "embplan/concepts/constraint.hpp"

namespace embplan_test {

struct pin {
  std::uint32_t table = 3;
  std::uint32_t device = 0;

  bool admits(const embplan::task&, const embplan::placement_state&,
              const embplan::shard& s) const {
    return s.table != table || s.device == device;
  }
  std::string describe() const {
    return "table " + std::to_string(table) + " on device " + std::to_string(device);
  }
};
static_assert(embplan::constraint<pin>);

}  // namespace embplan_test
