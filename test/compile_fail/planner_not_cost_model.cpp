// EXPECT: must model embplan::cost_model
// A planner whose first parameter is not a cost model fails with the planner's
// own static_assert, not a page of template errors.
#include "embplan/constraint/all_of.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/search/sorted_greedy.hpp"

int main() {
  const embplan::planner<int, embplan::sorted_greedy, embplan::default_constraint,
                         embplan::balance_reward>
      p;
  (void)p;
}
