# Test helpers, after LevelDB's leveldb_test(): one call per test program.
#
# sluice_test(NAME target SOURCES file... [LIBS lib...] [INCLUDES dir...] [DEFINES def...]
#             [DEPENDS target...] [OWN_MAIN] [LABELS label [TIMEOUT seconds] [RUN_SERIAL]])
#   Builds the GoogleTest program `target` from SOURCES, linked with LIBS, GTest and (unless
#   OWN_MAIN: the program or a library in LIBS has its main()) gtest_main; `tests/` is on its
#   include path. With LABELS, each of its tests becomes a ctest entry of that label (one label:
#   gtest_discover_tests would split a list into separate arguments); without, the program is
#   only built, for sluice_test_run.
#
# sluice_test_run(NAME test COMMAND command... LABELS label... [TIMEOUT seconds] [RUN_SERIAL]
#                 [ENVIRONMENT var=value...] [PASS_REGULAR_EXPRESSION regex])
#   One ctest entry that runs COMMAND (a target name is its executable).
#
# sluice_test_label_targets()
#   After every test is declared: one target `tests_<label>` per label, which builds the programs
#   that label's entries run (a TSan stage that runs a few labels builds only those).
include(GoogleTest)

# Records that the entries of each of `labels` run the targets `programs`.
function(sluice_test_label_programs labels programs)
  foreach(label IN LISTS labels)
    set_property(GLOBAL APPEND PROPERTY SLUICE_TEST_LABELS ${label})
    set_property(GLOBAL APPEND PROPERTY SLUICE_TEST_PROGRAMS_${label} ${programs})
  endforeach()
endfunction()

function(sluice_test_label_targets)
  get_property(labels GLOBAL PROPERTY SLUICE_TEST_LABELS)
  list(REMOVE_DUPLICATES labels)
  foreach(label IN LISTS labels)
    get_property(programs GLOBAL PROPERTY SLUICE_TEST_PROGRAMS_${label})
    list(REMOVE_DUPLICATES programs)
    add_custom_target(tests_${label})
    add_dependencies(tests_${label} ${programs})
  endforeach()
endfunction()

function(sluice_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "OWN_MAIN;RUN_SERIAL" "NAME;TIMEOUT"
                        "SOURCES;LIBS;INCLUDES;DEFINES;DEPENDS;LABELS")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "sluice_test: NAME and SOURCES are required")
  endif()
  list(LENGTH arg_LABELS label_count)
  if(label_count GREATER 1)
    message(FATAL_ERROR "sluice_test(${arg_NAME}): one label only; use sluice_test_run for more")
  endif()
  add_executable(${arg_NAME} ${arg_SOURCES})
  target_include_directories(${arg_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests ${arg_INCLUDES})
  target_link_libraries(${arg_NAME} PRIVATE ${arg_LIBS} GTest::gtest)
  if(NOT arg_OWN_MAIN)
    target_link_libraries(${arg_NAME} PRIVATE GTest::gtest_main)
  endif()
  if(arg_DEFINES)
    target_compile_definitions(${arg_NAME} PRIVATE ${arg_DEFINES})
  endif()
  if(arg_DEPENDS)
    add_dependencies(${arg_NAME} ${arg_DEPENDS})
  endif()
  if(arg_LABELS)
    set(properties LABELS ${arg_LABELS})
    if(arg_TIMEOUT)
      list(APPEND properties TIMEOUT ${arg_TIMEOUT})
    endif()
    if(arg_RUN_SERIAL)
      list(APPEND properties RUN_SERIAL TRUE)
    endif()
    gtest_discover_tests(${arg_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES ${properties})
    sluice_test_label_programs("${arg_LABELS}" ${arg_NAME})
  endif()
endfunction()

function(sluice_test_run)
  cmake_parse_arguments(PARSE_ARGV 0 arg "RUN_SERIAL" "NAME;TIMEOUT;PASS_REGULAR_EXPRESSION"
                        "COMMAND;LABELS;ENVIRONMENT")
  if(NOT arg_NAME OR NOT arg_COMMAND OR NOT arg_LABELS)
    message(FATAL_ERROR "sluice_test_run: NAME, COMMAND and LABELS are required")
  endif()
  add_test(NAME ${arg_NAME} COMMAND ${arg_COMMAND})
  # The programs it runs: its command's first word if that names a target, and every
  # $<TARGET_FILE:...> in its command or environment.
  set(programs)
  list(GET arg_COMMAND 0 first)
  if(TARGET ${first})
    list(APPEND programs ${first})
  endif()
  string(REGEX MATCHALL [[\$<TARGET_FILE:[^>]+>]] files "${arg_COMMAND};${arg_ENVIRONMENT}")
  foreach(file IN LISTS files)
    string(REGEX REPLACE [[^\$<TARGET_FILE:([^>]+)>$]] [[\1]] program "${file}")
    list(APPEND programs ${program})
  endforeach()
  if(programs)
    sluice_test_label_programs("${arg_LABELS}" "${programs}")
  endif()
  set_tests_properties(${arg_NAME} PROPERTIES LABELS "${arg_LABELS}")
  if(arg_TIMEOUT)
    set_tests_properties(${arg_NAME} PROPERTIES TIMEOUT ${arg_TIMEOUT})
  endif()
  if(arg_RUN_SERIAL)
    set_tests_properties(${arg_NAME} PROPERTIES RUN_SERIAL TRUE)
  endif()
  if(arg_ENVIRONMENT)
    set_tests_properties(${arg_NAME} PROPERTIES ENVIRONMENT "${arg_ENVIRONMENT}")
  endif()
  if(arg_PASS_REGULAR_EXPRESSION)
    set_tests_properties(${arg_NAME} PROPERTIES
      PASS_REGULAR_EXPRESSION "${arg_PASS_REGULAR_EXPRESSION}")
  endif()
endfunction()
