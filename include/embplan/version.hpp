#pragma once
// The library's version, as project(embplan VERSION ...) in CMakeLists.txt
// says (the configure step fails where the two differ).
// EMBPLAN_VERSION is major * 10000 + minor * 100 + patch, for #if tests.

#define EMBPLAN_VERSION_MAJOR 0
#define EMBPLAN_VERSION_MINOR 1
#define EMBPLAN_VERSION_PATCH 0
#define EMBPLAN_VERSION \
  (EMBPLAN_VERSION_MAJOR * 10000 + EMBPLAN_VERSION_MINOR * 100 + EMBPLAN_VERSION_PATCH)
