// EXPECT: all_of_part<0, no_describe>.*part has no const member describe
// A part that admits but cannot describe itself: all_of names it and describe().
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"

struct no_describe {
  bool admits(const embplan::task&, const embplan::placement_state&, const embplan::shard&) const {
    return true;
  }
};

int main() {
  const embplan::all_of<no_describe, embplan::memory_capacity> rule{};
  (void)rule;
}
