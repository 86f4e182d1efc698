// EXPECT: searcher_for<S, embplan::v[0-9]+_[0-9]+::concepts::detail::cost_model_archetype
// A searcher without name().
#include <cstdint>

#include "embplan/concepts/searcher.hpp"

struct no_name {
  template <class M, class C, class R>
  embplan::search_result search(const embplan::task&, const M&, const C&, const R&,
                                std::uint64_t) const {
    return {};
  }
};
static_assert(embplan::searcher<no_name>);

int main() {}
