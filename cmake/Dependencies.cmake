# Finds every third-party library spool uses. All come from Debian 12
# packages; scripts/install-deps installs them.

# CAF 0.17.6: Debian ships neither a CMake config nor a pkg-config file;
# cmake/modules/FindCAF.cmake makes CAF::core, the name CAF 0.18+ exports.
# Ahead of any FindCAF of a parent project: spool needs 0.17.x.
list(INSERT CMAKE_MODULE_PATH 0 ${CMAKE_CURRENT_LIST_DIR}/modules)

# The libraries libspool links (the list the installed package finds too).
include(${CMAKE_CURRENT_LIST_DIR}/spoolDependencies.cmake)
foreach(dependency IN LISTS SPOOL_DEPENDENCIES)
  separate_arguments(arguments UNIX_COMMAND "${dependency}")
  find_package(${arguments} REQUIRED)
endforeach()

# Debian's FlatBuffers package has no flatc imported target.
find_program(FLATC_EXECUTABLE flatc REQUIRED)

if(SPOOL_BUILD_TESTS)
  find_package(GTest 1.12 CONFIG REQUIRED)
endif()
if(SPOOL_BUILD_BENCHMARKS)
  find_package(benchmark 1.7 CONFIG REQUIRED)
endif()
