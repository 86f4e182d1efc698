// EXPECT: concept embplan::v[0-9]+_[0-9]+::cost_model
// A cost model without communication() is caught where it is defined.
#include <cstddef>
#include <span>
#include <string_view>

#include "embplan/concepts/cost_model.hpp"

struct no_communication {
  std::string_view name() const { return "no_communication"; }
  double shard_cost(const embplan::task&, const embplan::shard&) const { return 0.0; }
  embplan::compute_cost compute(const embplan::task&, std::span<const embplan::shard>,
                                std::size_t) const {
    return {};
  }
};
static_assert(embplan::cost_model<no_communication>);

int main() {}
