# Script mode: install, then configure, build and run two consumers on simulated GPUs: one that
# loads the whole package (consumer/), one that asks for the monitor component only
# (monitor_consumer/), with the lookups of Boost, libpq and SQLite disabled.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${ZEUS_BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
# Only public headers are installed: none of the internal ones from src/.
foreach(internal common/log.hpp http/host.hpp daemon/daemon.hpp server/store.hpp)
  if(EXISTS ${prefix}/include/zeus/${internal})
    message(FATAL_ERROR "the install holds the internal header zeus/${internal}")
  endif()
endforeach()
foreach(generated version.hpp export.hpp)
  if(NOT EXISTS ${prefix}/include/zeus/${generated})
    message(FATAL_ERROR "the install lacks the generated zeus/${generated}")
  endif()
endforeach()

# consumer(<name> <source dir> <binary> <expected output regex> [extra cmake args...])
function(consumer name source binary expected)
  set(build ${WORK_DIR}/${name})
  execute_process(COMMAND ${CMAKE_COMMAND} --no-warn-unused-cli -S ${source} -B ${build}
                          -G ${CMAKE_GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
                          "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}"
                          "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_FLAGS}" ${ARGN}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the consumer ${name} failed (${rc})")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building the consumer ${name} failed (${rc})")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ZEUS_SIMULATED_GPUS=2:a40 ${build}/${binary}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  message(STATUS "${name} printed: ${out}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${expected}")
    message(FATAL_ERROR "the consumer ${name} did not run as expected (${rc}): ${out}")
  endif()
endfunction()

consumer(full ${CONSUMER_SOURCE_DIR} zeus_consumer "2 GPU\\(s\\): NVIDIA A40")
# A search for any of these fails the configure: the monitor component must not need them.
consumer(monitor_only ${MONITOR_CONSUMER_SOURCE_DIR} zeus_monitor_consumer
         "monitor-only window over 2 GPU\\(s\\)"
         -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON
         -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
