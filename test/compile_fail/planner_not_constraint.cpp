// EXPECT: must model embplan::constraint
// The third parameter is a reward, not a constraint.
#include "embplan/cost/heuristic.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/search/sorted_greedy.hpp"

int main() {
  const embplan::planner<embplan::lookup_cost, embplan::sorted_greedy, embplan::balance_reward,
                         embplan::balance_reward>
      p;
  (void)p;
}
