# Runs the embedding example and checks that README.md shows its source.

file(REMOVE_RECURSE "${WORKDIR}")
execute_process(COMMAND "${EXAMPLE}" "${WORKDIR}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
                TIMEOUT 50)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "embedding_example exited with ${rc}: ${err}")
endif()
if(NOT out MATCHES "hello, world \\(task [0-9]+, attempt 1\\)")
  message(FATAL_ERROR "unexpected output: ${out}")
endif()
file(READ "${SOURCE}" source)
file(READ "${README}" readme)
string(FIND "${readme}" "${source}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain apps/embedding_example.cc verbatim")
endif()
file(REMOVE_RECURSE "${WORKDIR}")
