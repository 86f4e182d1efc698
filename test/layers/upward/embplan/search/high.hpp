#pragma once
// A fixture for the layering check: search includes core, which is allowed.
#include "embplan/version.hpp"
