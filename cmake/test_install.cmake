# CTest "install_consumer" (label cpu), run as `cmake -P`:
#   installs the build tree into a temporary prefix, checks the installed files, the SONAME, the
#   exported symbols and that libcudart is not a dependency, then builds and runs a tiny consumer
#   through find_package(dds) and another through pkg-config.
# Inputs: DDS_BINARY_DIR, DDS_SOURCE_DIR, DDS_C_COMPILER, DDS_SOVERSION, DDS_CONFIG (optional).
cmake_minimum_required(VERSION 3.16)

set(work "${DDS_BINARY_DIR}/install-test")
set(prefix "${work}/prefix")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

# 1. Install.
set(cfg_args)
if(DDS_CONFIG)
  set(cfg_args --config ${DDS_CONFIG})
endif()
run("cmake --install" ${CMAKE_COMMAND} --install "${DDS_BINARY_DIR}" --prefix "${prefix}" ${cfg_args})

# 2. Installed files.
file(GLOB headers RELATIVE "${DDS_SOURCE_DIR}/include" "${DDS_SOURCE_DIR}/include/dds/*.h")
foreach(h dds/dds.h ${headers})
  if(NOT EXISTS "${prefix}/include/${h}")
    message(FATAL_ERROR "install test: include/${h} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE sonames "${prefix}/*/libdds.so.${DDS_SOVERSION}")
list(LENGTH sonames n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "install test: expected one libdds.so.${DDS_SOVERSION}, found: ${sonames}")
endif()
get_filename_component(libdir "${sonames}" DIRECTORY)
foreach(f "${libdir}/libdds.so" "${libdir}/pkgconfig/dds.pc" "${libdir}/cmake/dds/ddsConfig.cmake"
    "${libdir}/cmake/dds/ddsConfigVersion.cmake" "${libdir}/cmake/dds/ddsTargets.cmake")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "install test: ${f} was not installed")
  endif()
endforeach()
message(STATUS "installed into ${prefix} (libdir ${libdir})")

# 3. ELF checks: SONAME, no libcudart (the CUDA runtime is linked statically), only dds_* exported.
find_program(READELF readelf)
if(READELF)
  run("readelf -d" ${READELF} -d "${libdir}/libdds.so.${DDS_SOVERSION}")
  if(NOT run_out MATCHES "SONAME\\)[^\n]*\\[libdds\\.so\\.${DDS_SOVERSION}\\]")
    message(FATAL_ERROR "install test: SONAME is not libdds.so.${DDS_SOVERSION}:\n${run_out}")
  endif()
  if(run_out MATCHES "NEEDED\\)[^\n]*libcudart")
    message(FATAL_ERROR "install test: libdds needs the shared libcudart:\n${run_out}")
  endif()
  string(REGEX MATCHALL "NEEDED\\)[^\n]*\\[[^]]*\\]" needed "${run_out}")
  list(TRANSFORM needed REPLACE "^.*\\[([^]]*)\\]$" "\\1")
  message(STATUS "SONAME libdds.so.${DDS_SOVERSION}; NEEDED: ${needed} (no libcudart)")
else()
  message(STATUS "readelf not found: SONAME / NEEDED checks skipped")
endif()
find_program(NM nm)
if(NM)
  run("nm -D" ${NM} -D --defined-only "${libdir}/libdds.so.${DDS_SOVERSION}")
  string(REGEX MATCHALL "[0-9a-fA-F]+ [TtDdBbRrVvWwGgSsiu] [^\n]+" syms "${run_out}")
  set(bad)
  set(count 0)
  foreach(line ${syms})
    string(REGEX REPLACE "^[0-9a-fA-F]+ . " "" sym "${line}")
    if(sym MATCHES "^DDS_[0-9]+$") # the version node of the version script
      continue()
    endif()
    math(EXPR count "${count} + 1")
    if(NOT sym MATCHES "^dds_")
      list(APPEND bad "${sym}")
    endif()
  endforeach()
  if(bad)
    message(FATAL_ERROR "install test: libdds exports symbols outside dds_*: ${bad}")
  endif()
  if(count EQUAL 0)
    message(FATAL_ERROR "install test: libdds exports no symbols?\n${run_out}")
  endif()
  message(STATUS "${count} exported symbols, all dds_*")
endif()

# 4. A consumer through find_package(dds).
set(gen_args)
if(DDS_GENERATOR)
  set(gen_args -G "${DDS_GENERATOR}")
endif()
run("configure the find_package consumer" ${CMAKE_COMMAND} ${gen_args}
  -S "${DDS_SOURCE_DIR}/cmake/consumer" -B "${work}/consumer"
  "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_C_COMPILER=${DDS_C_COMPILER}")
run("build the find_package consumer" ${CMAKE_COMMAND} --build "${work}/consumer")
find_program(consumer_exe consumer PATHS "${work}/consumer" "${work}/consumer/Debug"
  "${work}/consumer/Release" NO_DEFAULT_PATH)
run("run the find_package consumer" "${consumer_exe}")
message(STATUS "find_package(dds) consumer: ${run_out}")

# 5. A consumer through pkg-config.
find_program(PKG_CONFIG pkg-config)
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "install test: pkg-config not found (apt-get install pkg-config)")
endif()
set(ENV{PKG_CONFIG_PATH} "${libdir}/pkgconfig")
run("pkg-config --modversion dds" ${PKG_CONFIG} --modversion dds)
string(STRIP "${run_out}" pc_version)
run("pkg-config --cflags --libs dds" ${PKG_CONFIG} --cflags --libs dds)
separate_arguments(pc_flags UNIX_COMMAND "${run_out}")
run("compile the pkg-config consumer" "${DDS_C_COMPILER}" -std=c99 -Wall -Wextra -Werror
  "${DDS_SOURCE_DIR}/cmake/consumer/consumer.c" -o "${work}/consumer-pc" ${pc_flags}
  "-Wl,-rpath,${libdir}")
run("run the pkg-config consumer" "${work}/consumer-pc")
message(STATUS "pkg-config dds ${pc_version} (${pc_flags}) consumer: ${run_out}")
