# The package tests (tests/package/CMakeLists.txt): cmake -P this file with
# STEP set to one of
#
#   install           cmake --install of spool's build tree into PREFIX, and
#                     a check of what went there
#   find_package      builds consumer/ against PREFIX with find_package, runs it
#   http              builds http_consumer/ (a spoold of one's own) against
#                     PREFIX with find_package(spool COMPONENTS http), runs it
#   pkg_config        builds consumer/consumer.cc with the compiler and
#                     `pkg-config --cflags --libs spool` alone, runs it
#   add_subdirectory  builds consumer/ with spool as a subdirectory, runs it
#   shared            builds spool with BUILD_SHARED_LIBS=ON, installs it,
#                     and runs the find_package and pkg_config steps on it
#
# and SOURCE_DIR (spool's tree), BUILD_DIR (its build tree), WORK_DIR (this
# step's scratch folder, emptied first), PREFIX, LIBDIR, VERSION, GENERATOR,
# CXX, CXX_FLAGS, LINK_FLAGS (the sanitizer flags of spool's build, which a
# program linking its objects needs too) and PKG_CONFIG.

cmake_minimum_required(VERSION 3.16)

# Runs a command; on failure stops with its output.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# Runs the consumer built at `program` on a fresh queue directory.
function(run_consumer program)
  file(REMOVE_RECURSE ${WORK_DIR}/queue)
  run("the consumer" ${program} ${WORK_DIR}/queue)
  if(NOT run_output MATCHES "spool ${VERSION}\n" OR
     NOT run_output MATCHES "task [0-9]+ succeeded")
    message(FATAL_ERROR "unexpected consumer output:\n${run_output}")
  endif()
  message(STATUS "consumer: ${run_output}")
endfunction()

# Configures and builds consumer/ in `dir` with the given -D arguments.
function(build_consumer dir)
  run("configuring the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/consumer
      -B ${dir} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
      "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}"
      ${ARGN})
  run("building the consumer" ${CMAKE_COMMAND} --build ${dir} --parallel 2)
endfunction()

function(step_install build prefix)
  # The library must be there to be installed (a no-op after a build).
  run("building spool" ${CMAKE_COMMAND} --build ${build} --target spool spool_http
      --parallel 2)
  file(REMOVE_RECURSE ${prefix})
  run("cmake --install" ${CMAKE_COMMAND} --install ${build} --prefix ${prefix})

  # Exactly the public headers, the library and the two package files.
  file(GLOB headers RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/spool/*.h
       ${SOURCE_DIR}/include/spool/http/*.h)
  list(APPEND headers spool/version.h)
  set(expected)
  foreach(h ${headers})
    list(APPEND expected include/${h})
  endforeach()
  file(GLOB libraries RELATIVE ${prefix} ${prefix}/${LIBDIR}/libspool.*
       ${prefix}/${LIBDIR}/libspool_http.*)
  if(NOT libraries)
    message(FATAL_ERROR "no libspool in ${prefix}/${LIBDIR}")
  endif()
  foreach(f spoolConfig.cmake spoolConfigVersion.cmake spoolTargets.cmake
            spoolHttpTargets.cmake spoolDependencies.cmake FindCAF.cmake)
    list(APPEND expected ${LIBDIR}/cmake/spool/${f})
  endforeach()
  list(APPEND expected ${libraries} ${LIBDIR}/pkgconfig/spool.pc)
  file(GLOB_RECURSE installed LIST_DIRECTORIES false RELATIVE ${prefix} ${prefix}/*)
  # The per-configuration part of the export (spoolTargets-relwithdebinfo.cmake).
  list(FILTER installed EXCLUDE
       REGEX "/cmake/spool/spool(Http)?Targets-[a-z]*\\.cmake$")
  list(SORT expected)
  list(SORT installed)
  if(NOT expected STREQUAL installed)
    message(FATAL_ERROR "installed:\n  ${installed}\nexpected:\n  ${expected}")
  endif()

  # The version file: 0.x accepts the same minor version only.
  foreach(request_compatible 0.2:TRUE ${VERSION}:TRUE 0.1:FALSE 0.3:FALSE 1.0:FALSE)
    string(REPLACE ":" ";" pair ${request_compatible})
    list(GET pair 0 PACKAGE_FIND_VERSION)
    list(GET pair 1 want)
    string(REPLACE "." ";" parts ${PACKAGE_FIND_VERSION})
    list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
    list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
    set(CMAKE_SIZEOF_VOID_P 8)
    include(${prefix}/${LIBDIR}/cmake/spool/spoolConfigVersion.cmake)
    if((want AND NOT PACKAGE_VERSION_COMPATIBLE) OR
       (NOT want AND PACKAGE_VERSION_COMPATIBLE))
      message(FATAL_ERROR "find_package(spool ${PACKAGE_FIND_VERSION}): "
                          "compatible=${PACKAGE_VERSION_COMPATIBLE}, want ${want}")
    endif()
  endforeach()
  file(READ ${prefix}/${LIBDIR}/pkgconfig/spool.pc pc)
  message(STATUS "installed ${prefix}; spool.pc:\n${pc}")
endfunction()

function(step_find_package prefix)
  build_consumer(${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
                 -DSPOOL_EXPECT_PREFIX=${prefix})
  run_consumer(${WORK_DIR}/build/consumer)
endfunction()

function(step_http prefix)
  set(dir ${WORK_DIR}/build)
  run("configuring the http consumer" ${CMAKE_COMMAND}
      -S ${SOURCE_DIR}/tests/package/http_consumer -B ${dir} -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
      "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}" -DCMAKE_PREFIX_PATH=${prefix}
      -DSPOOL_EXPECT_PREFIX=${prefix})
  run("building the http consumer" ${CMAKE_COMMAND} --build ${dir} --parallel 2)
  file(REMOVE_RECURSE ${WORK_DIR}/queue)
  run("the http consumer" ${dir}/own_spoold ${WORK_DIR}/queue)
  if(NOT run_output MATCHES "spool ${VERSION}\n" OR
     NOT run_output MATCHES "readyz 200\n" OR
     NOT run_output MATCHES "task [0-9]+ succeeded")
    message(FATAL_ERROR "unexpected http consumer output:\n${run_output}")
  endif()
  message(STATUS "http consumer: ${run_output}")
endfunction()

function(step_pkg_config prefix)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
  run("pkg-config --modversion" ${PKG_CONFIG} --modversion spool)
  string(STRIP "${run_output}" found)
  if(NOT found STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config found spool ${found}, want ${VERSION}")
  endif()
  run("pkg-config --cflags --libs" ${PKG_CONFIG} --cflags --libs spool)
  string(STRIP "${run_output}" flags)
  message(STATUS "pkg-config --cflags --libs spool: ${flags}")
  separate_arguments(flags UNIX_COMMAND "${flags}")
  separate_arguments(cxx_flags UNIX_COMMAND "${CXX_FLAGS} ${LINK_FLAGS}")
  file(MAKE_DIRECTORY ${WORK_DIR})
  run("compiling with pkg-config's flags" ${CXX} -std=c++17 ${cxx_flags}
      ${SOURCE_DIR}/tests/package/consumer/consumer.cc ${flags}
      -o ${WORK_DIR}/consumer)
  # A shared libspool in a prefix the loader does not search.
  set(ENV{LD_LIBRARY_PATH} ${prefix}/${LIBDIR})
  run_consumer(${WORK_DIR}/consumer)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
if(STEP STREQUAL "install")
  step_install(${BUILD_DIR} ${PREFIX})
elseif(STEP STREQUAL "find_package")
  step_find_package(${PREFIX})
elseif(STEP STREQUAL "http")
  step_http(${PREFIX})
elseif(STEP STREQUAL "pkg_config")
  step_pkg_config(${PREFIX})
elseif(STEP STREQUAL "add_subdirectory")
  # No build type: the test checks that spool sets none.
  build_consumer(${WORK_DIR}/build -DSPOOL_SOURCE_DIR=${SOURCE_DIR}
                 -DCMAKE_BUILD_TYPE=)
  run_consumer(${WORK_DIR}/build/consumer)
elseif(STEP STREQUAL "shared")
  # No build type (no optimisation): the library is built once more, and
  # the test is about how it links, not how fast it runs.
  set(build ${WORK_DIR}/spool-build)
  run("configuring a shared spool" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${build}
      -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=
      -DBUILD_SHARED_LIBS=ON -DSPOOL_BUILD_TESTS=OFF
      -DSPOOL_BUILD_BENCHMARKS=OFF -DSPOOL_BUILD_APPS=OFF -DSPOOL_BUILD_FUZZ=OFF
      "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_SHARED_LINKER_FLAGS=${LINK_FLAGS}")
  step_install(${build} ${WORK_DIR}/prefix)
  if(NOT EXISTS ${WORK_DIR}/prefix/${LIBDIR}/libspool.so)
    message(FATAL_ERROR "BUILD_SHARED_LIBS=ON installed no libspool.so")
  endif()
  set(outer_work ${WORK_DIR})
  set(WORK_DIR ${outer_work}/find_package)
  step_find_package(${outer_work}/prefix)
  set(WORK_DIR ${outer_work}/http)
  step_http(${outer_work}/prefix)
  set(WORK_DIR ${outer_work}/pkg_config)
  step_pkg_config(${outer_work}/prefix)
else()
  message(FATAL_ERROR "unknown STEP '${STEP}'")
endif()
