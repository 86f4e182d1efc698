// EXPECT: all_of_part<1, int>.*part has no const member admits
// all_of composes constraints only; the diagnostic names the part (position 1,
// int) and the member it lacks.
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"

int main() {
  const embplan::all_of<embplan::memory_capacity, int> rule{};
  (void)rule;
}
