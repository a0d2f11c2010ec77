# Builds the Redis store's scripts from src/redis/lua/*.lua into a C++ source of raw string
# literals. Run at build time: cmake -DLUA_DIR=<dir> -DOUTPUT=<file.cc> -P embed_lua.cmake
#
# The sources are sections of Lua (common.lua says why): in common.lua and each algorithm's file,
# a "--@section NAME" line starts a section, which ends where the next one starts (the text before
# the first is the file's comment, in no script). A driver (check.lua, check_many.lua, ...) is the
# script's text up to its own first section, if it has any. In a script, an "--@insert NAME" line
# is replaced by the section NAME of its driver, else of its algorithm, else of common.lua,
# indented as the line, until none is left; only `tidy` may be missing. Each check script is check.lua so filled in for one
# algorithm, and each coalesced one check_many.lua. The all-or-nothing script is check_all.lua,
# whose lines from "--@for_each_algorithm" to "--@end_for_each" are repeated for each algorithm,
# with its name in place of ALGORITHM and its sections inserted. kCheckSources and
# kCheckManySources follow the Algorithm enum. Each meter's give-back script is give_back.lua so
# filled in; kGiveBackSources follows the meters' order in the enum.
set(algorithms fixed_window sliding_log sliding_window token_bucket leaky_bucket gcra)
set(meters token_bucket leaky_bucket gcra)
include(${CMAKE_CURRENT_LIST_DIR}/raw_literal.cmake)
set(delimiter "sluice_lua")

function(read_lua name out)
  read_for_raw_literal("${LUA_DIR}/${name}.lua" ${delimiter} text)
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Sets <name>_<section> in the caller to each section of the source <name>.lua.
function(read_sections name)
  read_lua(${name} text)
  set(text "\n${text}")
  string(REGEX MATCHALL "\n--@section [a-z_]+\n" markers "${text}")
  foreach(marker IN LISTS markers)
    string(FIND "${text}" "${marker}" begin)
    string(LENGTH "${marker}" marker_length)
    math(EXPR begin "${begin} + ${marker_length}")
    string(SUBSTRING "${text}" ${begin} -1 body)
    string(FIND "${body}" "\n--@section " end)
    string(SUBSTRING "${body}" 0 ${end} body)
    string(REGEX REPLACE "\n+$" "" body "${body}")
    string(STRIP "${marker}" marker)
    string(REPLACE "--@section " "" section "${marker}")
    set(${name}_${section} "${body}" PARENT_SCOPE)
  endforeach()
endfunction()

# Reads the driver <name>.lua: sets <name> in the caller to its script, and <name>_<section> to
# each of its sections.
macro(read_driver name)
  read_lua(${name} ${name})
  string(FIND "${${name}}" "\n--@section " driver_end)
  if(NOT driver_end EQUAL -1)
    math(EXPR driver_end "${driver_end} + 1")
    string(SUBSTRING "${${name}}" 0 ${driver_end} ${name})
    read_sections(${name})
  endif()
endmacro()

# Replaces the "--@insert NAME" lines of the variable `var` with the sections of `driver`, else
# of `algorithm`.
function(insert_sections var driver algorithm)
  set(text "\n${${var}}")
  string(REGEX MATCH "\n( *)--@insert ([a-z_]+)\n" line "${text}")
  while(NOT line STREQUAL "")
    set(indent "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    if(DEFINED ${driver}_${name})
      set(section "${${driver}_${name}}")
    elseif(DEFINED ${algorithm}_${name})
      set(section "${${algorithm}_${name}}")
    elseif(DEFINED common_${name})
      set(section "${common_${name}}")
    elseif(name STREQUAL "tidy")
      set(section "")
    else()
      message(FATAL_ERROR "${algorithm}: no section `${name}` in ${algorithm}.lua or common.lua")
    endif()
    if(section STREQUAL "")
      set(lines "\n")
    else()
      string(REPLACE "\n" "\n${indent}" section "${section}")
      string(REGEX REPLACE "\n +\n" "\n\n" section "${section}")
      set(lines "\n${indent}${section}\n")
    endif()
    string(REPLACE "\n${indent}--@insert ${name}\n" "${lines}" text "${text}")
    string(REGEX MATCH "\n( *)--@insert ([a-z_]+)\n" line "${text}")
  endwhile()
  string(SUBSTRING "${text}" 1 -1 text)
  if(text MATCHES "--@")
    message(FATAL_ERROR "${algorithm}: a --@ line is left in the script:\n${text}")
  endif()
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

read_sections(common)
read_driver(check)
read_driver(check_many)
read_driver(check_all)
read_driver(give_back)
string(FIND "${check_all}" "--@for_each_algorithm\n" for_each)
string(FIND "${check_all}" "--@end_for_each\n" end_for_each)
if(for_each EQUAL -1 OR end_for_each LESS for_each)
  message(FATAL_ERROR "check_all.lua: no --@for_each_algorithm ... --@end_for_each block")
endif()
string(SUBSTRING "${check_all}" 0 ${for_each} check_all_head)
math(EXPR block_begin "${for_each} + 22")
math(EXPR block_length "${end_for_each} - ${block_begin}")
string(SUBSTRING "${check_all}" ${block_begin} ${block_length} check_all_block)
math(EXPR tail_begin "${end_for_each} + 16")
string(SUBSTRING "${check_all}" ${tail_begin} -1 check_all_tail)

set(check_sources "")
set(check_many_sources "")
set(every_algorithm "")
set(give_back_sources "")
foreach(algorithm IN LISTS algorithms)
  read_sections(${algorithm})
  set(script "${check}")
  insert_sections(script check ${algorithm})
  raw_literal("${script}" ${delimiter} source)
  string(APPEND check_sources "    ${source},\n")
  set(script "${check_many}")
  insert_sections(script check_many ${algorithm})
  raw_literal("${script}" ${delimiter} source)
  string(APPEND check_many_sources "    ${source},\n")
  string(REPLACE "ALGORITHM" "${algorithm}" instance "${check_all_block}")
  insert_sections(instance check_all ${algorithm})
  string(APPEND every_algorithm "${instance}")
  list(FIND meters ${algorithm} meter)
  if(meter GREATER -1)
    set(script "${give_back}")
    insert_sections(script give_back ${algorithm})
    raw_literal("${script}" ${delimiter} source)
    string(APPEND give_back_sources "    ${source},\n")
  endif()
endforeach()
set(check_all_script "${check_all_head}${every_algorithm}${check_all_tail}")
insert_sections(check_all_script check_all common)
raw_literal("${check_all_script}" ${delimiter} check_all_source)

write_if_changed("${OUTPUT}"
"// Generated by cmake/embed_lua.cmake from src/redis/lua/*.lua: edit those, not this.
#include \"redis/scripts.h\"

namespace sluice::redis {

const std::string_view kCheckSources[6] = {
${check_sources}};

const std::string_view kCheckManySources[6] = {
${check_many_sources}};

const std::string_view kCheckAllSource = ${check_all_source};

const std::string_view kGiveBackSources[3] = {
${give_back_sources}};

}  // namespace sluice::redis
")
