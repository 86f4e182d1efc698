#pragma once
// The message of the embplan::error that fn throws, or "no error": the tests
// check that a message names the field and the value.
#include <string>

#include "embplan/core/error.hpp"

namespace embplan::test {

std::string message_of(auto&& fn) {
  try {
    fn();
  } catch (const embplan::error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace embplan::test
