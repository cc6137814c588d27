# cmake --install: the library, the public headers, the CMake package
# (spoolConfig.cmake, its version file, the exported spool::spool and the
# CAF find module it needs) and spool.pc, under GNUInstallDirs' folders.
#
#   find_package(spool 0.2 REQUIRED)   ->  spool::spool
#   pkg-config --cflags --libs spool
#
# tests/package/ installs into a temporary prefix and builds a consumer
# project against it both ways.

include(CMakePackageConfigHelpers)

set(SPOOL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/spool)

install(TARGETS spool EXPORT spoolTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/spool DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${SPOOL_GENERATED_INCLUDE_DIR}/spool/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spool)

install(EXPORT spoolTargets NAMESPACE spool:: DESTINATION ${SPOOL_CMAKE_DIR})
configure_package_config_file(cmake/spoolConfig.cmake.in
  ${PROJECT_BINARY_DIR}/spoolConfig.cmake
  INSTALL_DESTINATION ${SPOOL_CMAKE_DIR})
# SameMinorVersion: spool is 0.x, where a new minor version may break the
# API, the ABI and the storage format (include/spool/version.h). 0.2.5
# satisfies find_package(spool 0.2) and find_package(spool 0.2.1), never
# find_package(spool 0.1) or 0.3. From 1.0 on this becomes SameMajorVersion.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/spoolConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/spoolConfig.cmake
  ${PROJECT_BINARY_DIR}/spoolConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/spoolDependencies.cmake
  ${CMAKE_CURRENT_LIST_DIR}/modules/FindCAF.cmake
  DESTINATION ${SPOOL_CMAKE_DIR})

# spool.pc. A static libspool.a carries none of its dependencies, so a
# static-only install lists them in Requires and Libs, where a plain
# `pkg-config --libs spool` finds them (as libcurl's .pc does); a shared
# libspool.so links them itself and lists them as .private, for --static.
# CAF has no .pc file, so it goes in by name.
string(JOIN ", " SPOOL_PC_REQUIRES "rocksdb >= 7.8" "spdlog >= 1.10"
       "flatbuffers >= 2.0.8" "tomlplusplus >= 3.3" "libssl" "libcrypto")
set(SPOOL_PC_LIBS "-lcaf_openssl -lcaf_io -lcaf_core -pthread")
if(BUILD_SHARED_LIBS)
  set(SPOOL_PC_REQUIRES_LINE "Requires.private: ${SPOOL_PC_REQUIRES}")
  set(SPOOL_PC_LIBS_LINE "Libs: -L\${libdir} -lspool")
  set(SPOOL_PC_LIBS_PRIVATE_LINE "Libs.private: ${SPOOL_PC_LIBS}")
else()
  set(SPOOL_PC_REQUIRES_LINE "Requires: ${SPOOL_PC_REQUIRES}")
  set(SPOOL_PC_LIBS_LINE "Libs: -L\${libdir} -lspool ${SPOOL_PC_LIBS}")
  set(SPOOL_PC_LIBS_PRIVATE_LINE "")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(SPOOL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(SPOOL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SPOOL_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(SPOOL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/spool.pc.in ${PROJECT_BINARY_DIR}/spool.pc.body @ONLY)
# The prefix is the one `cmake --install --prefix` installs into, known only
# at install time, so the file is completed then.
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/spool.pc.body\" body)
  file(WRITE \"${PROJECT_BINARY_DIR}/spool.pc\"
       \"prefix=\${CMAKE_INSTALL_PREFIX}\\n\${body}\")")
install(FILES ${PROJECT_BINARY_DIR}/spool.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
