#pragma once
// A fixture for the namespace check (cmake/check_layers.cmake): a header of the
// stage/ folder declares a name in embplan itself, not in embplan::stage, so
// the check must fail naming this header and the namespace.
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct outside {};

}  // namespace embplan::inline EMBPLAN_ABI
