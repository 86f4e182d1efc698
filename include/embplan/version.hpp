#pragma once
// The library's version, as project(embplan VERSION ...) in CMakeLists.txt
// says (the configure step fails where the two differ).
// EMBPLAN_VERSION is major * 10000 + minor * 100 + patch, for #if tests.

#define EMBPLAN_VERSION_MAJOR 0
#define EMBPLAN_VERSION_MINOR 1
#define EMBPLAN_VERSION_PATCH 0
#define EMBPLAN_VERSION \
  (EMBPLAN_VERSION_MAJOR * 10000 + EMBPLAN_VERSION_MINOR * 100 + EMBPLAN_VERSION_PATCH)

// "0.1.0": what a plan records as the version that made it (core/content_hash.hpp).
#define EMBPLAN_STRINGIZE_(x) #x
#define EMBPLAN_STRINGIZE(x) EMBPLAN_STRINGIZE_(x)
#define EMBPLAN_VERSION_STRING             \
  EMBPLAN_STRINGIZE(EMBPLAN_VERSION_MAJOR) \
  "." EMBPLAN_STRINGIZE(EMBPLAN_VERSION_MINOR) "." EMBPLAN_STRINGIZE(EMBPLAN_VERSION_PATCH)

// The ABI namespace. Every declaration of the library lives in the inline
// namespace embplan::EMBPLAN_ABI (v0_1 for 0.1.x), so users still write
// embplan::task, while two builds against versions with different layouts do
// not link into one program by accident (as fmt's v11 and libc++'s __1).
// While the major version is 0, each minor version names a new one.
#define EMBPLAN_ABI_NAME_(major, minor) v##major##_##minor
#define EMBPLAN_ABI_NAME(major, minor) EMBPLAN_ABI_NAME_(major, minor)
#define EMBPLAN_ABI EMBPLAN_ABI_NAME(EMBPLAN_VERSION_MAJOR, EMBPLAN_VERSION_MINOR)
