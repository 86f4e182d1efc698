# docs/extending.md quotes the example programs rather than repeating them by
# hand: every region of an example between
#   // [extending.md: <name>]   and   // [end]
# must appear in the .md as a block
#   ```cpp
#   // docs/examples/<file>.cpp
#   <the region's lines, unchanged but for the marker's indentation>
#   ```
# and the .md may hold no other block that claims to quote an example.
# cmake -DMARKDOWN=../extending.md -DEXAMPLES=own_constraint,own_reward -P check_snippets.cmake
# (run in docs/examples/)

cmake_minimum_required(VERSION 3.25)
set(fence "```")
file(READ "${MARKDOWN}" markdown)
string(REPLACE "," ";" examples "${EXAMPLES}")
set(begin_marker "// [extending.md: ")
set(end_marker "// [end]\n")
set(regions 0)
set(failures "")
foreach(example IN LISTS examples)
  file(READ "${example}.cpp" source)
  set(rest "${source}")
  while(TRUE)
    string(FIND "${rest}" "${begin_marker}" at)
    if(at EQUAL -1)
      break()
    endif()
    # The marker's indentation (a region inside a function) is taken off
    # every line of the region.
    string(SUBSTRING "${rest}" 0 ${at} before)
    string(REGEX MATCH "[ ]+$" indent "${before}")
    string(SUBSTRING "${rest}" ${at} -1 rest)
    string(FIND "${rest}" "\n" line_end)
    string(SUBSTRING "${rest}" 0 ${line_end} marker_line)
    math(EXPR body_begin "${line_end} + 1")
    string(SUBSTRING "${rest}" ${body_begin} -1 rest)
    string(FIND "${rest}" "${end_marker}" stop)
    if(stop EQUAL -1)
      string(APPEND failures "  ${example}.cpp: '${marker_line}' has no '// [end]'\n")
      break()
    endif()
    string(SUBSTRING "${rest}" 0 ${stop} body)
    string(REGEX REPLACE "[ ]+$" "" body "${body}")
    if(indent)
      string(REPLACE "\n${indent}" "\n" body "\n${body}")
      string(SUBSTRING "${body}" 1 -1 body)
    endif()
    string(LENGTH "${end_marker}" end_length)
    math(EXPR after "${stop} + ${end_length}")
    string(SUBSTRING "${rest}" ${after} -1 rest)
    math(EXPR regions "${regions} + 1")
    set(quoted "${fence}cpp\n// docs/examples/${example}.cpp\n${body}${fence}\n")
    string(FIND "${markdown}" "${quoted}" found)
    if(found EQUAL -1)
      string(APPEND failures "  ${example}.cpp: region '${marker_line}' is not quoted as it is\n")
    endif()
  endwhile()
endforeach()

# Blocks in the .md that claim to quote an example.
string(REGEX MATCHALL "${fence}cpp\n// docs/examples/" claims "${markdown}")
list(LENGTH claims claimed)
if(NOT claimed EQUAL regions)
  string(APPEND failures
         "  the .md has ${claimed} blocks quoting docs/examples/, the examples mark ${regions} regions\n")
endif()

if(failures)
  message(FATAL_ERROR "${MARKDOWN} and the examples disagree:\n${failures}"
                      "Copy each marked region of the example into the .md unchanged.")
endif()
message(STATUS "${regions} quoted regions match")
