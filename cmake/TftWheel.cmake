# The Python wheel's native part (TFT_WHEEL; pyproject.toml at the top,
# scikit-build-core installs the component "wheel" only, into the wheel's
# platlib folder, beside the package python/tftrace):
#
#   tftrace/_native/lib/libtftrace.so        the recorder (no soname version,
#                                            tracer/CMakeLists.txt: a wheel
#                                            holds no symbolic links)
#   tftrace/_native/lib/libtftrace-cuda.so   the CUPTI plugin, when built
#   tftrace/_native/bin/{tftrace,tfdump,tfdiff}
#
# The console scripts tftrace/tfdump/tfdiff (python/tftrace/_cli.py) exec
# the programs; the programs find the library in ../lib (RUNPATH and the
# launcher's own search), the launcher finds the package three folders up
# (launch_child.c), the package finds the library in _native/lib (_lib.py).
set(_tft_wheel_targets tftrace tftrace_launcher tfdump tfdiff)
if(TARGET tftrace_cuda)
  list(APPEND _tft_wheel_targets tftrace_cuda)
endif()
if(TARGET tftrace_pyrec)   # tftrace/_native/lib/_tftrace_rec.abi3.so (tracer/pyext)
  list(APPEND _tft_wheel_targets tftrace_pyrec)
endif()
install(TARGETS ${_tft_wheel_targets}
        LIBRARY DESTINATION tftrace/_native/lib COMPONENT wheel
        RUNTIME DESTINATION tftrace/_native/bin COMPONENT wheel)
# pyproject.toml builds this one target
add_custom_target(tft_wheel)
add_dependencies(tft_wheel ${_tft_wheel_targets})
