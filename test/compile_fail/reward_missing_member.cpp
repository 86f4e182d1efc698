// EXPECT: concept embplan::v[0-9]+_[0-9]+::reward
// A reward without score().
#include <string_view>

#include "embplan/concepts/reward.hpp"

struct no_score {
  std::string_view name() const { return "no_score"; }
};
static_assert(embplan::reward<no_score>);

int main() {}
