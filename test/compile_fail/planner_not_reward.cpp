// EXPECT: must model embplan::reward
// The fourth parameter is a constraint, not a reward.
#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/planner.hpp"
#include "embplan/search/sorted_greedy.hpp"

int main() {
  const embplan::planner<embplan::lookup_cost, embplan::sorted_greedy, embplan::default_constraint,
                         embplan::default_constraint>
      p;
  (void)p;
}
