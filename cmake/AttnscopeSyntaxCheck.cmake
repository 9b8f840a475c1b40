# attnscope_syntax_check(<target> REFERENCE <reference target> SOURCES <file>... [INCLUDES <dir>...] [NATIVE])
#
# A target that only compiles each source with -fsyntax-only (the front end: parsing and template instantiation, no
# code generation), with the include directories and compile definitions of <reference target> (a target linking what
# the sources need). Used where the test suite only has to prove that code compiles: every public header alone, every
# documentation snippet and, in the test build, the example programs. Each source gets a stamp file and a depfile, so
# a source is checked again only when it or a header it includes changes.
#
# The sources are compiled as a user's default build is, for a generic x86-64 (no -march): the SSE2 code paths.
# NATIVE adds -march=native (when ATTNSCOPE_NATIVE), for sources whose code paths depend on the instruction set; the
# AVX intrinsic headers that -march=native pulls in cost each translation unit about 0.5 s of parsing.
function(attnscope_syntax_check target)
  cmake_parse_arguments(ARG "NATIVE" "REFERENCE" "SOURCES;INCLUDES" ${ARGN})
  # The project's own directories with -I (their warnings matter), every other one (Eigen, json, zlib) as a system
  # directory, as CMake does for imported targets.
  set(all_includes "$<TARGET_PROPERTY:${ARG_REFERENCE},INCLUDE_DIRECTORIES>")
  set(includes "$<FILTER:${all_includes},INCLUDE,^${PROJECT_SOURCE_DIR}/>")
  set(other_includes "$<FILTER:${all_includes},EXCLUDE,^${PROJECT_SOURCE_DIR}/>")
  # ... except the compiler's own directories (/usr/include): naming them again would break #include_next.
  set(system_includes "$<FILTER:${other_includes},EXCLUDE,^/usr(/local)?/include/?$>")
  set(definitions "$<TARGET_PROPERTY:${ARG_REFERENCE},COMPILE_DEFINITIONS>")
  set(flags -std=c++17 -fsyntax-only)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    list(APPEND flags -Wall -Wextra -Wshadow -Werror=return-type)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      list(APPEND flags -Wno-maybe-uninitialized)
    endif()
    if(ATTNSCOPE_NATIVE AND ARG_NATIVE)
      list(APPEND flags -march=native)
    endif()
    if(OpenMP_CXX_FOUND)
      list(APPEND flags ${OpenMP_CXX_FLAGS})
    endif()
  endif()
  foreach(dir IN LISTS ARG_INCLUDES)
    list(APPEND flags -I${dir})
  endforeach()
  set(stamps "")
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/${target})
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(name ${source} NAME_WE)
    string(MD5 path_hash "${source}")
    string(SUBSTRING "${path_hash}" 0 8 path_hash)
    set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}/${name}_${path_hash}.stamp)
    add_custom_command(
      OUTPUT ${stamp}
      COMMAND ${CMAKE_CXX_COMPILER} ${flags} "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
              "$<$<BOOL:${system_includes}>:-isystem$<JOIN:${system_includes},;-isystem>>"
              "$<$<BOOL:${definitions}>:-D$<JOIN:${definitions},;-D>>" -MD -MF ${stamp}.d -MT ${stamp} ${source}
      COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
      DEPENDS ${source}
      DEPFILE ${stamp}.d
      COMMENT "Syntax check of ${name}"
      COMMAND_EXPAND_LISTS VERBATIM)
    list(APPEND stamps ${stamp})
  endforeach()
  add_custom_target(${target} ALL DEPENDS ${stamps})
endfunction()
