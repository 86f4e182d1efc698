# The layering of include/embplan/, checked: a header includes only headers of
# its own folder and of lower layers (docs/design.md, "Layers"), and opens
# only its folder's namespaces (below). Each folder, and each header at the
# top of include/embplan/, has a layer below; a folder or top-level header not
# listed is an error, so a new one must be placed. Folders of one layer are
# siblings and may not include one another.
#   cmake -DINCLUDE_DIR=<dir holding embplan/> -P cmake/check_layers.cmake
# Exits non-zero naming every include that goes up or sideways, and every
# namespace outside its folder's.

cmake_minimum_required(VERSION 3.25)

# The layers, lowest first: "<layer>:<folder or top-level header>,...".
set(embplan_layers
    "0:version.hpp"
    "1:core"
    "2:concepts,detail"
    "3:constraint,reward,data,kernel,torchrec"
    "4:io"
    "5:nn"
    "6:cost"
    "7:search,meter,rowwise,learn,check_plan.hpp,plan_report.hpp"
    "8:stage"
    "9:planner.hpp"
    "10:presets.hpp"
    "11:run_preset.hpp"
    "12:rl"
    "13:core.hpp"
    "14:embplan.hpp")

# Namespaces follow folders (docs/design.md, "Namespaces"). The vocabulary a
# planner is composed of (core, concepts, constraint, cost, reward, search,
# detail, and the headers at the top) is embplan's own: a header there opens
# embplan, embplan::detail, embplan::<name>::detail or the preset registry's
# embplan::presets. Each toolkit folder is its own namespace: a header in
# <folder>/ opens only embplan::<folder> and namespaces inside it.
set(embplan_toolkits data io kernel learn meter nn rl rowwise stage torchrec)

if(NOT INCLUDE_DIR)
  message(FATAL_ERROR "check_layers: pass -DINCLUDE_DIR=<the folder that holds embplan/>")
endif()

foreach(entry IN LISTS embplan_layers)
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 rank)
  list(GET parts 1 members)
  string(REPLACE "," ";" members "${members}")
  foreach(member IN LISTS members)
    set(layer_of_${member} ${rank})
  endforeach()
endforeach()

# The unit a path under embplan/ belongs to: its first folder, or the file.
function(unit_of path out)
  string(FIND "${path}" "/" slash)
  if(slash EQUAL -1)
    set(${out} "${path}" PARENT_SCOPE)
  else()
    string(SUBSTRING "${path}" 0 ${slash} first)
    set(${out} "${first}" PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}/embplan"
     "${INCLUDE_DIR}/embplan/*.hpp" "${INCLUDE_DIR}/embplan/*.cuh")
list(SORT headers)
set(problems "")
set(edges 0)
foreach(header IN LISTS headers)
  unit_of("${header}" unit)
  if(NOT DEFINED layer_of_${unit})
    string(APPEND problems "  embplan/${header}: '${unit}' has no layer in cmake/check_layers.cmake\n")
    continue()
  endif()
  # Its namespaces: each `namespace embplan::inline EMBPLAN_ABI[::x] {` line, and
  # each `namespace y {` at the start of a line after it (nested in it).
  file(STRINGS "${INCLUDE_DIR}/embplan/${header}" opened REGEX "^namespace [A-Za-z_:]")
  set(outer "")
  foreach(line IN LISTS opened)
    if(line MATCHES "^namespace embplan::inline EMBPLAN_ABI(::[a-z_:]+)? [{]")
      set(outer "embplan${CMAKE_MATCH_1}")
      set(ns "${outer}")
    elseif(line MATCHES "^namespace ([a-z_:]+) [{]" AND NOT outer STREQUAL "")
      set(ns "${outer}::${CMAKE_MATCH_1}")
    elseif(line MATCHES "^namespace ([a-z_:]+) [{]")
      set(ns "${CMAKE_MATCH_1}")
    else()
      continue()
    endif()
    if(unit IN_LIST embplan_toolkits)
      set(allowed "embplan::${unit} or a namespace inside it")
      if(ns STREQUAL "embplan::${unit}" OR ns MATCHES "^embplan::${unit}::")
        continue()
      endif()
    else()
      set(allowed "embplan, embplan::detail, embplan::<name>::detail or embplan::presets")
      if(ns MATCHES "^embplan(::detail|::[a-z_]+::detail|::presets|::presets::detail)?$")
        continue()
      endif()
    endif()
    string(APPEND problems "  embplan/${header} opens namespace ${ns}: '${unit}' headers open ${allowed}\n")
  endforeach()

  file(STRINGS "${INCLUDE_DIR}/embplan/${header}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]embplan/")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "embplan/[^\">]+" included "${line}")
    string(SUBSTRING "${included}" 8 -1 target)
    unit_of("${target}" target_unit)
    math(EXPR edges "${edges} + 1")
    if(target_unit STREQUAL unit)
      continue()
    endif()
    if(NOT DEFINED layer_of_${target_unit})
      string(APPEND problems "  embplan/${header} includes ${included}: '${target_unit}' has no layer\n")
    elseif(NOT layer_of_${target_unit} LESS layer_of_${unit})
      string(APPEND problems
             "  embplan/${header} (layer ${layer_of_${unit}}, ${unit}) includes ${included} "
             "(layer ${layer_of_${target_unit}}, ${target_unit}): a layer may include only lower ones\n")
    endif()
  endforeach()
endforeach()

list(LENGTH headers count)
if(count EQUAL 0)
  message(FATAL_ERROR "check_layers: no headers under ${INCLUDE_DIR}/embplan")
endif()
if(problems)
  message(FATAL_ERROR "check_layers: includes against the layering, or namespaces that do not "
                      "follow the folders:\n${problems}")
endif()
message(STATUS "check_layers: ${count} headers, ${edges} includes of embplan headers, all downward; "
               "namespaces follow the folders")
