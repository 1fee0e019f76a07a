# An unmodified numpy transformer block (np_attention.py, Debian's
# /usr/bin/python3, numpy calling OpenBLAS's cblas_sgemm) with a causal
# mask off by one: tfdiff names the first (probabilities @ v) gemm, with
# no step; tfdump --check finds no leak in a numpy run. SKIP without numpy.
add_test(NAME trainers.np-attention
         COMMAND bash ${TRAINERS_DIR}/run_case.sh np-attention ${TRAINERS_TOOLS} none)
# python3 leaks at exit (not our code): no LeakSanitizer for it
set_tests_properties(trainers.np-attention PROPERTIES TIMEOUT 120 LABELS "trainers"
                     SKIP_REGULAR_EXPRESSION "SKIP:"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1;OPENBLAS_NUM_THREADS=1")
