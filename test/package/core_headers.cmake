# cmake -DCXX=<compiler> -DINCLUDE_DIR=<include/> -DSOURCE=<TU> -P core_headers.cmake
# SOURCE includes every header of embplan::core (and so <embplan/core.hpp>).
# Fails when one of them reaches Eigen, nlohmann/json or xtensor: it is
# preprocessed with include/ as the only project path (GCC / Clang -M), and
# the headers it read must come from include/ or the standard library.
execute_process(
  COMMAND "${CXX}" -std=c++20 "-I${INCLUDE_DIR}" -M "${SOURCE}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE deps ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "embplan::core's headers do not preprocess with include/ alone:\n${err}")
endif()
string(REGEX MATCHALL "[^ \t\n\\\\]*(nlohmann|xtensor|xtl|eigen3|Eigen)/[^ \t\n\\\\]*" found "${deps}")
if(found)
  list(REMOVE_DUPLICATES found)
  list(JOIN found "\n  " found)
  message(FATAL_ERROR "embplan::core's headers include third-party headers:\n  ${found}\n"
                      "(find the chain with: ${CXX} -std=c++20 -I${INCLUDE_DIR} -H -E ${SOURCE})")
endif()
message(STATUS "embplan::core's headers: standard library only")
