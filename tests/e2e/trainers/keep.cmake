# tftrace --keep-steps on tftrain (run_keep_case.sh): full records for the
# last N steps, scalars and collectives for all, bounded disk, crash-safe.
if(TARGET tftrain)
  add_test(NAME trainers.keep_steps
           COMMAND bash ${TRAINERS_DIR}/run_keep_case.sh ${TRAINERS_TOOLS} $<TARGET_FILE:tftrain>)
  # (release only, "slow": 14 s under ASan; the writer's keep mode runs
  # under the sanitizers in format.keep_compact and the format tests)
  set_tests_properties(trainers.keep_steps PROPERTIES TIMEOUT 120 LABELS "trainers;slow"
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
endif()
# ... and stays small (compacted at close, also after the traced program is
# SIGKILLed, crash-safe) and right (tfdiff and --check on the kept scalars
# before the window): run_keep_compact_case.sh, about 10 s (40 s under
# ASan: release only, "slow"; format.keep_compact runs the compaction itself
# under the sanitizers).
if(TARGET tftrain)
  add_test(NAME trainers.keep_compact
           COMMAND bash ${TRAINERS_DIR}/run_keep_compact_case.sh ${TRAINERS_TOOLS} $<TARGET_FILE:tftrain>)
  set_tests_properties(trainers.keep_compact PROPERTIES TIMEOUT 120 LABELS "trainers;slow"
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
endif()
