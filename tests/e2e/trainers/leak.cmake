# A training loop that keeps a 4 MiB snapshot every iteration and records
# nothing else (leak_keep.c): tfdiff finds it at exit against a GOLDEN that
# frees them, tfdump --check over its --leak-min-bytes threshold. Built
# normally (no -rdynamic, no libtftrace): the sites come from its .symtab.
# Under ASan/TSan the sanitizer's malloc precedes the interposers: outputs
# checked, then SKIP.
add_executable(trainers_leak_keep ${TRAINERS_DIR}/leak_keep.c)
target_link_libraries(trainers_leak_keep PRIVATE m)
tft_warnings(trainers_leak_keep)
add_test(NAME trainers.leak-keep
         COMMAND bash ${TRAINERS_DIR}/run_case.sh leak-keep ${TRAINERS_TOOLS} $<TARGET_FILE:trainers_leak_keep>)
set_tests_properties(trainers.leak-keep PROPERTIES TIMEOUT 120 LABELS "trainers"
                     SKIP_REGULAR_EXPRESSION "SKIP:"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
# The same loop in numpy (leak_keep.py, /usr/bin/python3): CPython frees the
# kept arrays at exit, so tfdiff finds them by the most numpy held at once.
add_test(NAME trainers.leak-keep-py
         COMMAND bash ${TRAINERS_DIR}/run_case.sh leak-keep-py ${TRAINERS_TOOLS} none)
set_tests_properties(trainers.leak-keep-py PROPERTIES TIMEOUT 120 LABELS "trainers"
                     SKIP_REGULAR_EXPRESSION "SKIP:"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1;OPENBLAS_NUM_THREADS=1")
