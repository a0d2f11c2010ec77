# Writes the version header (cmake/version.h.in) to OUTPUT with VERSION and the commit SOURCE_DIR
# is at: `git describe --always --dirty` when SOURCE_DIR is the top of a git checkout, else
# "unknown" (a tarball, or one unpacked inside another repository). The header is rewritten only
# when its text changes, so a commit rebuilds only what includes it. With DEPFILE, also writes a
# depfile making STAMP depend on git's HEAD, index and HEAD's reflog (a checkout, a `git add`, a
# commit): from a depfile, a file that later goes missing reruns this script, never fails the build.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -DVERSION=... [-DGIT_EXECUTABLE=...]
#         [-DDEPFILE=... -DSTAMP=...] -P write_version.cmake
set(SLUICE_VERSION ${VERSION})
set(SLUICE_GIT_COMMIT unknown)
set(git_files "")
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --show-toplevel
    WORKING_DIRECTORY ${SOURCE_DIR}
    RESULT_VARIABLE result OUTPUT_VARIABLE toplevel ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(result EQUAL 0 AND toplevel)
    file(REAL_PATH ${toplevel} toplevel)
    file(REAL_PATH ${SOURCE_DIR} source_dir)
  endif()
  if(result EQUAL 0 AND toplevel STREQUAL source_dir)
    execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty
      WORKING_DIRECTORY ${SOURCE_DIR}
      RESULT_VARIABLE result OUTPUT_VARIABLE described ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(result EQUAL 0 AND described MATCHES "^[A-Za-z0-9._-]+$")
      set(SLUICE_GIT_COMMIT ${described})
    endif()
    # --git-path: a worktree's HEAD and index are not in the source dir's .git.
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --path-format=absolute
                            --git-path HEAD --git-path index --git-path logs/HEAD
      WORKING_DIRECTORY ${SOURCE_DIR}
      OUTPUT_VARIABLE paths ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(REPLACE "\n" ";" paths "${paths}")
    foreach(path IN LISTS paths)
      if(EXISTS ${path})
        string(REPLACE " " "\\ " path "${path}")
        string(APPEND git_files " ${path}")
      endif()
    endforeach()
  endif()
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in ${OUTPUT} @ONLY)
if(DEPFILE)
  string(REPLACE " " "\\ " stamp "${STAMP}")
  file(WRITE ${DEPFILE} "${stamp}:${git_files}\n")
endif()
