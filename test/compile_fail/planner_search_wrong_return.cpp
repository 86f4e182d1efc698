// EXPECT: must return embplan::search_result
// A searcher whose search() returns a bare plan: the planner names the type it expects.
#include <cstdint>
#include <string_view>

#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/balance.hpp"

struct returns_plan {
  std::string_view name() const { return "returns_plan"; }
  template <class M, class C, class R>
  embplan::plan search(const embplan::task&, const M&, const C&, const R&, std::uint64_t) const {
    return {};
  }
};

int main() {
  const embplan::planner<embplan::lookup_cost, returns_plan, embplan::default_constraint,
                         embplan::balance_reward>
      p;
  (void)p;
}
