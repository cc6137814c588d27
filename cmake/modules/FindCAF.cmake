# FindCAF: the C++ Actor Framework 0.17, as Debian 12 ships it (libcaf-dev):
# headers and libraries, but neither a CMake config nor a pkg-config file.
# spool builds with this module and installs it beside spoolConfig.cmake,
# so that a project linking spool::spool finds CAF the same way.
#
#   find_package(CAF 0.17 [REQUIRED])
#
# Defines CAF::core (libcaf_core, with Threads::Threads), the name CAF 0.18+
# exports, CAF::io (libcaf_io) and CAF::openssl (libcaf_openssl), unless
# targets of those names exist already, and
#   CAF_FOUND, CAF_VERSION (e.g. 0.17.6), CAF_INCLUDE_DIR, CAF_CORE_LIBRARY.
#
# CAF's API changed incompatibly between 0.17 and 0.18 (typed interfaces,
# atoms, inspection), so this module reports a CAF outside 0.17.x as not
# found rather than as a version that would fail to compile.

include(FindPackageHandleStandardArgs)
find_package(Threads QUIET)

find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY NAMES caf_core)
# libcaf_io: the middleman (publish, remote_actor) of remote workers.
find_library(CAF_IO_LIBRARY NAMES caf_io)
# libcaf_openssl: the same over TLS (remote.tls_*).
find_library(CAF_OPENSSL_LIBRARY NAMES caf_openssl)
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
                 CAF_OPENSSL_LIBRARY)

# caf/config.hpp: #define CAF_VERSION 1706 for 0.17.6.
set(CAF_VERSION "")
if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" _caf_version
         "${_caf_version_line}")
  if(_caf_version MATCHES "^[0-9]+$")
    math(EXPR _caf_major "${_caf_version} / 10000")
    math(EXPR _caf_minor "${_caf_version} / 100 % 100")
    math(EXPR _caf_patch "${_caf_version} % 100")
    set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
  endif()
  unset(_caf_version_line)
  unset(_caf_version)
endif()

set(_caf_series_ok TRUE)
if(CAF_VERSION AND (CAF_VERSION VERSION_LESS 0.17 OR
                    CAF_VERSION VERSION_GREATER_EQUAL 0.18))
  set(_caf_series_ok FALSE)
endif()
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_CORE_LIBRARY CAF_IO_LIBRARY CAF_OPENSSL_LIBRARY
                CAF_INCLUDE_DIR _caf_series_ok
  VERSION_VAR CAF_VERSION
  REASON_FAILURE_MESSAGE
    "spool needs CAF 0.17.x (found '${CAF_VERSION}'): apt-get install libcaf-dev")
unset(_caf_series_ok)

if(CAF_FOUND AND NOT TARGET CAF::core)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
if(CAF_FOUND AND NOT TARGET CAF::io)
  add_library(CAF::io UNKNOWN IMPORTED)
  set_target_properties(CAF::io PROPERTIES
    IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CAF::core)
endif()
if(CAF_FOUND AND NOT TARGET CAF::openssl)
  add_library(CAF::openssl UNKNOWN IMPORTED)
  set_target_properties(CAF::openssl PROPERTIES
    IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CAF::io)
endif()
