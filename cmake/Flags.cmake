# Warning and sanitizer flags for spool's own targets.

set(SPOOL_WARNINGS -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor)
if(SPOOL_WERROR)
  list(APPEND SPOOL_WARNINGS -Werror)
endif()

# SPOOL_SANITIZE: "address" builds with AddressSanitizer and UBSan,
# "thread" with ThreadSanitizer.
set(SPOOL_SANITIZER_FLAGS "")
if(SPOOL_SANITIZE STREQUAL "address")
  # CAF's headers bind references through null pointers inside spawn; UBSan's
  # null check reports that on every spawn, so it is left out.
  set(SPOOL_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize=null
      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(SPOOL_SANITIZE STREQUAL "thread")
  set(SPOOL_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT SPOOL_SANITIZE STREQUAL "")
  message(FATAL_ERROR "SPOOL_SANITIZE must be address, thread or empty")
endif()
if(SPOOL_SANITIZER_FLAGS)
  add_compile_options(${SPOOL_SANITIZER_FLAGS})
  add_link_options(${SPOOL_SANITIZER_FLAGS})
endif()

# Applies spool's warnings to a target of its own (never to generated code).
function(spool_target_warnings target)
  target_compile_options(${target} PRIVATE ${SPOOL_WARNINGS})
endfunction()
