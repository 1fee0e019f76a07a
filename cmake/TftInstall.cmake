# Install rules: programs, libtftrace.so, public headers, pkg-config file and
# a CMake package config so other projects can find_package(tftrace).
include(CMakePackageConfigHelpers)

install(FILES formats/include/tft_types.h formats/include/tft_format.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tracer/include/tft.h)
  install(FILES tracer/include/tft.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()

install(EXPORT tftraceTargets NAMESPACE tftrace::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tftrace)
configure_package_config_file(cmake/tftraceConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tftraceConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tftrace)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tftraceConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tftraceConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tftraceConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tftrace)

# tftrace.pc finds its prefix relative to itself (LIBDIR/pkgconfig), so an
# installed tree can be moved: one "/.." per component of LIBDIR, plus one.
string(REGEX MATCHALL "[^/]+" _libdir_parts "${CMAKE_INSTALL_LIBDIR}")
set(TFT_PC_UP "/..")
foreach(_p ${_libdir_parts})
  string(APPEND TFT_PC_UP "/..")
endforeach()
configure_file(cmake/tftrace.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tftrace.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tftrace.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
