# The packages libspool links: spool's build finds them with find_package
# (cmake/Dependencies.cmake) and the installed spoolConfig.cmake with
# find_dependency, so that a project linking spool::spool gets the same
# libraries. Each entry is the arguments of one find_package call.
set(SPOOL_DEPENDENCIES
  "Threads"
  # cmake/modules/FindCAF.cmake: Debian's CAF has no CMake config.
  "CAF 0.17"
  "RocksDB 7.8 CONFIG"
  "spdlog 1.10 CONFIG"
  # Case-sensitive: "flatbuffers" is not found.
  "FlatBuffers 2.0.8 CONFIG"
  # Debian ships toml++ as a compiled library; spool links the target so
  # that no translation unit falls back to header-only mode (an ODR mix).
  "tomlplusplus 3.3 CONFIG"
  "OpenSSL")
