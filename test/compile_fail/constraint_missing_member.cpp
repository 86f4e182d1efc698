// EXPECT: concept embplan::v[0-9]+_[0-9]+::constraint
// A constraint without describe() cannot say why a table fits nowhere.
#include "embplan/concepts/constraint.hpp"

struct no_describe {
  bool admits(const embplan::task&, const embplan::placement_state&, const embplan::shard&) const {
    return true;
  }
};
static_assert(embplan::constraint<no_describe>);

int main() {}
