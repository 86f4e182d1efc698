#pragma once
// A fixture for the layering check (cmake/check_layers.cmake): core includes
// search, a layer above it, so the check must fail naming this include.
#include "embplan/search/high.hpp"
