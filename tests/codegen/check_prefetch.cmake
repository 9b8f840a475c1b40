# Usage: cmake -DOBJDUMP=objdump -DOBJECTS="a.o;b.o" -P check_prefetch.cmake
# Each function attnscope_probe_<kernel> of tests/codegen/probe/prefetch_probe.cpp calls kernels::detail::<kernel>;
# this fails unless the probe or an out-of-line copy of <kernel> (a function whose symbol names it) holds a prefetch
# instruction. The exp loops of the row kernels ask the cache for the next row while they compute, and a compiler
# once dropped those prefetches without a word (GCC 12: softmax_into 1.25× slower at 4096 keys).
execute_process(COMMAND ${OBJDUMP} -d --no-show-raw-insn ${OBJECTS} OUTPUT_VARIABLE disassembly
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "check_prefetch: ${OBJDUMP} failed on ${OBJECTS} (status ${status})")
endif()
# one list entry per function: objdump starts each with "<symbol>:" and separates them by a blank line
string(REPLACE ";" "," disassembly "${disassembly}")
string(REPLACE "\n\n" ";" functions "${disassembly}")
string(REGEX MATCHALL "<attnscope_probe_[a-z_]+>:" probes "${disassembly}")
list(LENGTH probes count)
if(count EQUAL 0)
  message(FATAL_ERROR "check_prefetch: no attnscope_probe_* function in ${OBJECTS}")
endif()
set(missing "")
foreach(probe IN LISTS probes)
  string(REGEX REPLACE "<attnscope_probe_([a-z_]+)>:" "\\1" kernel "${probe}")
  set(found FALSE)
  foreach(function IN LISTS functions)
    string(REGEX MATCH "<[^>\n]*>:" header "${function}")
    if((header STREQUAL probe OR header MATCHES "${kernel}") AND function MATCHES "prefetch")
      set(found TRUE)
    endif()
  endforeach()
  if(NOT found)
    list(APPEND missing "${kernel}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "check_prefetch: no prefetch instruction in the compiled ${missing}")
endif()
message(STATUS "check_prefetch: the ${count} probed kernels prefetch")
