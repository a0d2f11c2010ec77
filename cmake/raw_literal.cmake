# Helpers for the build-time scripts that embed text files in C++ sources as raw string literals
# (embed_lua.cmake, embed_text.cmake).

# Sets `out` to the file's text, failing if the text would end a literal with `delimiter` early.
function(read_for_raw_literal path delimiter out)
  file(READ "${path}" text)
  string(FIND "${text}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw string delimiter )${delimiter}\"")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Sets `out` to the C++ raw string literal R"<delimiter>(<text>)<delimiter>".
function(raw_literal text delimiter out)
  set(${out} "R\"${delimiter}(${text})${delimiter}\"" PARENT_SCOPE)
endfunction()

# Writes `content` to `output` only if it differs, so that an unchanged input recompiles nothing.
function(write_if_changed output content)
  file(WRITE "${output}.tmp" "${content}")
  file(COPY_FILE "${output}.tmp" "${output}" ONLY_IF_DIFFERENT)
  file(REMOVE "${output}.tmp")
endfunction()
