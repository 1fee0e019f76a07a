# Several recording threads in one process (docs/TFDIFF.md, "Several recording threads"; FORMAT.md §5.13):
# threads_prog, main thread marking steps and 4 workers recording, run under
# load so that the interleaving differs from run to run.
add_executable(trainer_threads ${TRAINERS_DIR}/threads_prog.c)
target_link_libraries(trainer_threads PRIVATE tftrace Threads::Threads m)
tft_warnings(trainer_threads)
foreach(case threads-names threads-same)
  add_test(NAME trainers.${case}
           COMMAND bash ${TRAINERS_DIR}/run_threads_case.sh ${case} ${TRAINERS_TOOLS} $<TARGET_FILE:trainer_threads>)
  set_tests_properties(trainers.${case} PROPERTIES TIMEOUT 180 LABELS "trainers;asan;tsan")
endforeach()
