# The tftrace release this package belongs to: always the C library's
# (tft.h TFT_VERSION_*; tests/python checks that they agree, and
# tftrace.open() warns when the loaded libtftrace.so says otherwise).
__version__ = "0.2.0"
