# spool's layers: one object library per source folder, bottom first.
#
#   util     the shared vocabulary: Status, task enums and their names,
#            clocks, cron schedules, logging. Knows no RocksDB and no CAF.
#   storage  the record format and the RocksDB layout.
#   actors   the CAF actors: writer, readers, scheduler, workers, recovery.
#   runtime  the public API's implementation.
#   config   TOML files into spool::Options (beside runtime, on util).
#
# The build holds the layers apart in two ways:
#   - a layer compiles with the include directories of the third-party
#     libraries it declares and of the layers below it, and no others: a CAF
#     include in storage/ does not compile;
#   - a folder's own tests link that layer and the layers below it, and not
#     libspool.a: a call from storage/ into runtime/ does not link.
# scripts/check-layers (the ctest test `layering`) checks the #include lines
# themselves, which catches an upward include of a header-only declaration.
#
# `spool`, the library users link, is built from all of them; the layers
# themselves are build-tree only and never installed.

# spool_layer(<name> [DEPENDS <lower layers>] [PUBLIC_LIBS <targets>]
#             [PRIVATE_LIBS <targets>] SOURCES <files>)
# Defines the object library spool_<name>.
function(spool_layer name)
  cmake_parse_arguments(ARG "" "" "DEPENDS;PUBLIC_LIBS;PRIVATE_LIBS;SOURCES"
                        ${ARGN})
  set(target spool_${name})
  add_library(${target} OBJECT ${ARG_SOURCES})
  spool_target_warnings(${target})
  # Position-independent when `spool` is a shared library
  # (BUILD_SHARED_LIBS), as its objects then go into one; otherwise as
  # CMAKE_POSITION_INDEPENDENT_CODE says (a parent linking libspool.a into
  # a shared library of its own sets it).
  if(BUILD_SHARED_LIBS)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
  # The public headers: include/ and the generated <spool/version.h>.
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${SPOOL_GENERATED_INCLUDE_DIR}>
    PRIVATE ${PROJECT_SOURCE_DIR})
  # An object library's objects reach only the targets that link it
  # directly, so each layer records itself and everything below it.
  set(closure ${target})
  foreach(dep ${ARG_DEPENDS})
    get_target_property(below spool_${dep} SPOOL_LAYER_CLOSURE)
    list(APPEND closure ${below})
    target_link_libraries(${target} PUBLIC spool_${dep})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set_target_properties(${target} PROPERTIES SPOOL_LAYER_CLOSURE "${closure}")
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_LIBS}
                        PRIVATE ${ARG_PRIVATE_LIBS})
  # Every layer's third-party libraries, which `spool` links itself: its
  # installed link interface names them, not the layers.
  set_property(GLOBAL APPEND PROPERTY SPOOL_LAYER_LIBS
               ${ARG_PUBLIC_LIBS} ${ARG_PRIVATE_LIBS})
endfunction()

# spool_link_layer(<target> <layer>): links <target> with layer <layer> and
# every layer below it, and nothing above.
function(spool_link_layer target layer)
  get_target_property(closure spool_${layer} SPOOL_LAYER_CLOSURE)
  target_link_libraries(${target} PRIVATE ${closure})
endfunction()
