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
#
# With GCC, <Eigen/Core> is parsed once per target into a precompiled header, which every source that includes an
# Eigen header (directly or through attnscope headers: attnscope_source_includes_eigen) loads first with -include:
# parsing Eigen is about 1 s of each check, often half of it. Such a source includes <Eigen/Core> anyway, and no
# attnscope header defines an EIGEN_* macro before including Eigen, so the check is the same; sources that never
# include Eigen are compiled without it, so they cannot lean on Eigen's own includes (<string>, <vector>, ...).
# ATTNSCOPE_SYNTAX_CHECK_PCH=OFF compiles every source plainly.
option(ATTNSCOPE_SYNTAX_CHECK_PCH "Syntax checks load a precompiled <Eigen/Core> (GCC)" ON)

# attnscope_source_includes_eigen(<file> <result variable>): TRUE when <file> includes an Eigen header directly or
# through the headers it includes with quotes or from include/attnscope (a textual scan of #include lines; the
# answer for each file is cached in a global property).
function(attnscope_source_includes_eigen file result)
  string(MD5 key "${file}")
  get_property(known GLOBAL PROPERTY ATTNSCOPE_INCLUDES_EIGEN_${key} SET)
  if(known)
    get_property(answer GLOBAL PROPERTY ATTNSCOPE_INCLUDES_EIGEN_${key})
    set(${result} ${answer} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY ATTNSCOPE_INCLUDES_EIGEN_${key} FALSE)  # breaks include cycles
  set(answer FALSE)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  get_filename_component(directory "${file}" DIRECTORY)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*" "\\1" included "${line}")
    if(included MATCHES "^Eigen/")
      set(answer TRUE)
    elseif(EXISTS "${directory}/${included}" AND NOT IS_DIRECTORY "${directory}/${included}")
      attnscope_source_includes_eigen("${directory}/${included}" answer)
    elseif(included MATCHES "^attnscope/" AND EXISTS "${PROJECT_SOURCE_DIR}/include/${included}")
      attnscope_source_includes_eigen("${PROJECT_SOURCE_DIR}/include/${included}" answer)
    endif()
    if(answer)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY ATTNSCOPE_INCLUDES_EIGEN_${key} ${answer})
  set(${result} ${answer} PARENT_SCOPE)
endfunction()

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
    list(APPEND flags ${ATTNSCOPE_GCC_GC_FLAGS})
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
  # Each a generator expression expanding to a list (quoted where used: its own ';' must not split it here).
  set(include_flags "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>")
  set(system_include_flags "$<$<BOOL:${system_includes}>:-isystem$<JOIN:${system_includes},;-isystem>>")
  set(definition_flags "$<$<BOOL:${definitions}>:-D$<JOIN:${definitions},;-D>>")
  set(pch "")
  if(ATTNSCOPE_SYNTAX_CHECK_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # The precompiled header is made with the checks' own flags (GCC refuses a PCH made with other options).
    set(pch ${CMAKE_CURRENT_BINARY_DIR}/${target}/eigen_core.hpp)
    file(CONFIGURE OUTPUT ${pch} CONTENT "#include <Eigen/Core>\n")
    set(pch_flags ${flags})
    list(REMOVE_ITEM pch_flags -fsyntax-only)
    add_custom_command(
      OUTPUT ${pch}.gch
      COMMAND ${CMAKE_CXX_COMPILER} ${pch_flags} "${include_flags}" "${system_include_flags}"
              "${definition_flags}" -x c++-header ${pch} -o ${pch}.gch
      DEPENDS ${pch}
      COMMENT "Precompiled <Eigen/Core> for ${target}"
      COMMAND_EXPAND_LISTS VERBATIM)
  endif()
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(name ${source} NAME_WE)
    string(MD5 path_hash "${source}")
    string(SUBSTRING "${path_hash}" 0 8 path_hash)
    set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}/${name}_${path_hash}.stamp)
    set(source_pch_flags "")
    set(source_depends ${source})
    if(pch)
      attnscope_source_includes_eigen(${source} uses_eigen)
      if(uses_eigen)
        set(source_pch_flags -include ${pch} -Winvalid-pch)
        list(APPEND source_depends ${pch}.gch)
      endif()
    endif()
    add_custom_command(
      OUTPUT ${stamp}
      COMMAND ${CMAKE_CXX_COMPILER} ${flags} ${source_pch_flags} "${include_flags}" "${system_include_flags}"
              "${definition_flags}" -MD -MF ${stamp}.d -MT ${stamp} ${source}
      COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
      DEPENDS ${source_depends}
      DEPFILE ${stamp}.d
      COMMENT "Syntax check of ${name}"
      COMMAND_EXPAND_LISTS VERBATIM)
    list(APPEND stamps ${stamp})
  endforeach()
  add_custom_target(${target} ALL DEPENDS ${stamps})
endfunction()
