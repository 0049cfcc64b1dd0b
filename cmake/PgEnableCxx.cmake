# SPDX-License-Identifier: Apache-2.0
# C++ for the toml++ shim (common/toml.cc, pg_toml.h): Debian 12
# packages no C TOML parser. `CC=clang cmake` (the sanitizer and fuzz builds) must not pair
# clang's C with g++: the two sanitizer runtimes do not mix. Take the clang++ beside that clang
# unless CXX says otherwise.
if(NOT CMAKE_CXX_COMPILER AND NOT DEFINED ENV{CXX} AND CMAKE_C_COMPILER_ID STREQUAL "Clang")
  get_filename_component(_pg_cc_dir "${CMAKE_C_COMPILER}" DIRECTORY)
  get_filename_component(_pg_cc_name "${CMAKE_C_COMPILER}" NAME)
  string(REPLACE "clang" "clang++" _pg_cxx_name "${_pg_cc_name}") # clang-14 -> clang++-14
  set(_pg_cxx "${_pg_cc_dir}/${_pg_cxx_name}")
  if(EXISTS "${_pg_cxx}")
    set(CMAKE_CXX_COMPILER "${_pg_cxx}")
  endif()
endif()
enable_language(CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
