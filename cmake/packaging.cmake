# sluice installed like everything else: `sluice --version`, the pkg-config file, the man page, and
# a Debian package built by CPack (`cmake --build BUILD --target package`) that adds a conffile
# /etc/sluice/sluice.yaml, a hardened systemd unit and the Debian docs. Included by the top-level
# CMakeLists.txt after every other install rule.

# --- `sluice --version`: the version and the git commit, in a header generated in the build tree:
# at configure time, and again at build time when git's HEAD, index or HEAD's reflog changes (see
# cmake/write_version.cmake; a tarball says "unknown" and depends on nothing).
set(SLUICE_VERSION_DIR ${PROJECT_BINARY_DIR}/generated/cli)
find_package(Git QUIET)
set(SLUICE_WRITE_VERSION ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
  -DOUTPUT=${SLUICE_VERSION_DIR}/version.h -DVERSION=${PROJECT_VERSION})
if(GIT_FOUND)
  list(APPEND SLUICE_WRITE_VERSION -DGIT_EXECUTABLE=${GIT_EXECUTABLE})
endif()
set(SLUICE_WRITE_VERSION_SCRIPT -P ${PROJECT_SOURCE_DIR}/cmake/write_version.cmake)
execute_process(COMMAND ${SLUICE_WRITE_VERSION} ${SLUICE_WRITE_VERSION_SCRIPT}
  COMMAND_ERROR_IS_FATAL ANY)
add_custom_command(OUTPUT ${SLUICE_VERSION_DIR}/version.stamp
  BYPRODUCTS ${SLUICE_VERSION_DIR}/version.h
  COMMAND ${SLUICE_WRITE_VERSION} -DDEPFILE=${SLUICE_VERSION_DIR}/version.d
          -DSTAMP=${SLUICE_VERSION_DIR}/version.stamp ${SLUICE_WRITE_VERSION_SCRIPT}
  COMMAND ${CMAKE_COMMAND} -E touch ${SLUICE_VERSION_DIR}/version.stamp
  DEPENDS ${PROJECT_SOURCE_DIR}/cmake/write_version.cmake ${PROJECT_SOURCE_DIR}/cmake/version.h.in
  DEPFILE ${SLUICE_VERSION_DIR}/version.d
  COMMENT "Writing the version header" VERBATIM)
add_custom_target(sluice_version DEPENDS ${SLUICE_VERSION_DIR}/version.stamp)
add_dependencies(sluice_cli sluice_version)
target_include_directories(sluice_cli PRIVATE ${PROJECT_BINARY_DIR}/generated)

# --- pkg-config: relocatable (paths relative to the .pc file), so it works from any prefix or an
# unpacked package.
file(RELATIVE_PATH SLUICE_PC_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" SLUICE_PC_PREFIX "${SLUICE_PC_PREFIX}")
configure_file(cmake/sluice.pc.in ${PROJECT_BINARY_DIR}/sluice.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/sluice.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- The man page and the Debian changelog, compressed as Debian wants them (no name, no time).
find_program(GZIP_EXECUTABLE gzip REQUIRED)
set(SLUICE_DEB_MAINTAINER "sluice maintainers <sluice@example.org>" CACHE STRING
  "Maintainer of the Debian package: 'Name <email>'")
configure_file(packaging/changelog.in ${PROJECT_BINARY_DIR}/packaging/changelog.Debian @ONLY)
set(SLUICE_GZIPPED "")
foreach(file IN ITEMS ${PROJECT_SOURCE_DIR}/packaging/sluice.1
                      ${PROJECT_BINARY_DIR}/packaging/changelog.Debian)
  get_filename_component(name ${file} NAME)
  set(gzipped ${PROJECT_BINARY_DIR}/packaging/${name}.gz)
  add_custom_command(OUTPUT ${gzipped}
    COMMAND ${CMAKE_COMMAND} -E copy ${file} ${PROJECT_BINARY_DIR}/packaging/gz/${name}
    COMMAND ${GZIP_EXECUTABLE} -9nf ${PROJECT_BINARY_DIR}/packaging/gz/${name}
    COMMAND ${CMAKE_COMMAND} -E rename ${PROJECT_BINARY_DIR}/packaging/gz/${name}.gz ${gzipped}
    DEPENDS ${file} VERBATIM)
  list(APPEND SLUICE_GZIPPED ${gzipped})
endforeach()
add_custom_target(sluice_package_files ALL DEPENDS ${SLUICE_GZIPPED})
install(FILES ${PROJECT_BINARY_DIR}/packaging/sluice.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# --- What only the Debian package installs: a plain `cmake --install` must not write to /etc or
# /lib. The package's install runs this component as well as the default ones.
install(FILES examples/sluice.yaml DESTINATION /etc/sluice COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES packaging/sluice.service DESTINATION /lib/systemd/system
  COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES packaging/copyright ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/sluice COMPONENT deb EXCLUDE_FROM_ALL)

# --- The Debian package: `cpack -G DEB` in the build tree packages what is built, the `package`
# target builds first.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ${PROJECT_NAME})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${SLUICE_DEB_MAINTAINER})
set(CPACK_INSTALL_CMAKE_PROJECTS
  "${PROJECT_BINARY_DIR};${PROJECT_NAME};ALL;/" "${PROJECT_BINARY_DIR};${PROJECT_NAME};deb;/")
# Installed with DESTDIR, so the absolute destinations above land in the package, under /usr.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Building against the static library: its pkg-config file and CMake package find hiredis and
# libcrypto.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libhiredis-dev, libssl-dev, pkg-config")
# The middleware's optional adapters: include/sluice/middleware/beast.h and httplib.h.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libboost-dev, libcpp-httplib-dev")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "distributed rate limiting service and C++ library
sluice refuses the excess of a service's load fairly, across every instance:
six algorithms (fixed window, sliding log, sliding window, token bucket,
leaky bucket, GCRA) over an in-memory store or Redis and Redis Cluster.

This package ships sluice serve, an HTTP/JSON decision service run by
systemd (sluice.service, configured in /etc/sluice/sluice.yaml), the
sluice simulate and sluice bench tools, and the static C++20 library
with its HTTP middleware, headers, CMake package and pkg-config file.")
# The conffile, and the maintainer scripts that register sluice.service with systemd (as
# dh_installsystemd's would, without enabling it).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/conffiles
  ${PROJECT_SOURCE_DIR}/packaging/postinst ${PROJECT_SOURCE_DIR}/packaging/prerm
  ${PROJECT_SOURCE_DIR}/packaging/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
