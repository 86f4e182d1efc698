// Anti-affinity beside a table spread over several devices (issue 51): the
// per-table record knows which devices a spread table's pieces went to, so a
// table kept apart from it is refused only there, not on every device; after
// pieces are removed the record still answers safely (a superset).
#include <doctest/doctest.h>

#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"

namespace {

embplan::task two_tables_on_four() {
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 1u << 20;
  t.cluster = embplan::uniform_topology(4, dev);
  for (const char* name : {"a", "b"}) {
    embplan::table_spec s;
    s.name = name;
    s.rows = 100;
    s.dim = 16;
    t.tables.push_back(s);
  }
  return t;
}

}  // namespace

TEST_CASE("separate: a table spread over devices 0 and 1 keeps its partner off those two only") {
  const auto t = two_tables_on_four();
  const embplan::table_rules rules(t, {.separate = {{0, 1}}});
  embplan::placement_state st(t);
  st.place(t, {0, 0, 0, 8, 0, 100, false});
  st.place(t, {0, 1, 8, 16, 0, 100, false});
  CHECK_FALSE(rules.admits(t, st, embplan::whole_table(t, 1, 0)));
  CHECK_FALSE(rules.admits(t, st, embplan::whole_table(t, 1, 1)));
  CHECK(rules.admits(t, st, embplan::whole_table(t, 1, 2)));
  CHECK(rules.admits(t, st, embplan::whole_table(t, 1, 3)));
}

TEST_CASE("separate: after a spread table's piece is removed the record stays safe") {
  const auto t = two_tables_on_four();
  const embplan::table_rules rules(t, {.separate = {{0, 1}}});
  embplan::placement_state st(t);
  const embplan::shard left{0, 0, 0, 8, 0, 100, false};
  const embplan::shard right{0, 1, 8, 16, 0, 100, false};
  st.place(t, left);
  st.place(t, right);
  st.place(t, {0, 2, 0, 8, 0, 50, false});
  st.unplace(t, left);
  // Pieces on 1 and 2: never admitted there; device 3 saw none.
  CHECK_FALSE(rules.admits(t, st, embplan::whole_table(t, 1, 1)));
  CHECK_FALSE(rules.admits(t, st, embplan::whole_table(t, 1, 2)));
  CHECK(rules.admits(t, st, embplan::whole_table(t, 1, 3)));
  // Every piece removed: anywhere again.
  st.unplace(t, right);
  st.unplace(t, {0, 2, 0, 8, 0, 50, false});
  CHECK(rules.admits(t, st, embplan::whole_table(t, 1, 0)));
}
