# Finds every third-party library spool uses. All come from Debian 12
# packages; scripts/install-deps installs them.

find_package(Threads REQUIRED)

# CAF 0.17.6: Debian ships neither a CMake config nor a pkg-config file, so
# the imported targets are made by hand under the names CAF 0.18+ exports.
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY NAMES caf_core)
find_library(CAF_IO_LIBRARY NAMES caf_io)
if(NOT CAF_INCLUDE_DIR OR NOT CAF_CORE_LIBRARY)
  message(FATAL_ERROR "CAF not found: apt-get install libcaf-dev")
endif()
file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_ver
     REGEX "^#define CAF_VERSION [0-9]+")
string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" CAF_VERSION_NUM
                     "${_caf_ver}")
if(CAF_VERSION_NUM VERSION_LESS 1700 OR CAF_VERSION_NUM VERSION_GREATER_EQUAL 1800)
  message(FATAL_ERROR "spool targets CAF 0.17.x, found ${CAF_VERSION_NUM}")
endif()
if(NOT TARGET CAF::core)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()

find_package(RocksDB 7.8 CONFIG REQUIRED)
find_package(spdlog 1.10 CONFIG REQUIRED)
# Case-sensitive: "flatbuffers" is not found.
find_package(FlatBuffers 2.0.8 CONFIG REQUIRED)
# Debian's package has no flatc imported target.
find_program(FLATC_EXECUTABLE flatc REQUIRED)
# Debian ships toml++ as a compiled library; always link the target so no
# translation unit falls back to header-only mode (an ODR mix).
find_package(tomlplusplus 3.3 CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)

if(SPOOL_BUILD_TESTS)
  find_package(GTest 1.12 CONFIG REQUIRED)
endif()
if(SPOOL_BUILD_BENCHMARKS)
  find_package(benchmark 1.7 CONFIG REQUIRED)
endif()
