# A program killed before its first record (killed_prog.c, and `sh -c
# 'kill -9 $$'`): a trace with a manifest and no rank file. tfdump shows
# what the manifest knows (exit 0; --check 1), tfdiff calls it a finding as
# BAD (1) and unusable as GOLDEN (2).
add_executable(trainers_killed_prog ${TRAINERS_DIR}/killed_prog.c)
tft_warnings(trainers_killed_prog)
add_test(NAME trainers.killed
         COMMAND bash ${TRAINERS_DIR}/run_case.sh killed ${TRAINERS_TOOLS} $<TARGET_FILE:trainers_killed_prog>)
set_tests_properties(trainers.killed PROPERTIES TIMEOUT 120 LABELS "trainers"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
