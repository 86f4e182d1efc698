#include "embplan/core/error.hpp"

#include <doctest/doctest.h>

#include <string>

#include "support/message_of.hpp"

TEST_CASE("error messages show a long string cut, with its size") {
  using embplan::detail::to_display;
  CHECK(to_display(std::string("tables.json")) == "\"tables.json\"");
  CHECK(to_display(std::string(200, 'a')) == "\"" + std::string(200, 'a') + "\"");  // whole

  // A 20 MB value read from a file is not echoed whole.
  const std::string huge(20'971'520, 'x');
  const auto msg =
      embplan::test::message_of([&] { embplan::detail::fail("name", huge, "a short name"); });
  CHECK(msg == "field 'name' = \"" + std::string(200, 'x') +
                   "...\" (20971520 bytes): expected a short name");

  // The cut never splits a UTF-8 character: 199 ASCII bytes, then a
  // three-byte "€" across byte 200, is shown without the partial "€".
  const std::string euro = std::string(199, 'a') + "\xE2\x82\xAC" + std::string(100, 'b');
  CHECK(to_display(euro) == "\"" + std::string(199, 'a') + "...\" (302 bytes)");

  // Numbers and booleans are shown as before.
  CHECK(to_display(42) == "42");
  CHECK(to_display(true) == "true");
}
