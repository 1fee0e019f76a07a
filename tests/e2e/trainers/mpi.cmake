# MPI trainers (4 ranks each, run_mpi_case.sh; SKIP without mpirun or
# mpi4py): a 2x2 grid of MPI_Comm_split row and column communicators
# (mpi_grid.c, and the same through mpi4py: mpi4py_grid.py) with a count
# mismatch in one column, and a 4-stage point-to-point pipeline
# (mpi_pipeline.c) whose stage 2 sends with the wrong tag (tag) or whose
# stage 1 sends nothing (nosend). Each bad case is recorded next to its
# correct run (the golden of tfdiff) and must show the cause first, named
# by its communicator's members, then the hang it caused.
if(TFT_HAVE_MPI)
  set(_r ${TRAINERS_DIR}/run_mpi_case.sh)
  add_executable(trainers_mpi_grid ${TRAINERS_DIR}/mpi_grid.c)
  add_executable(trainers_mpi_pipeline ${TRAINERS_DIR}/mpi_pipeline.c)
  foreach(p trainers_mpi_grid trainers_mpi_pipeline)
    target_link_libraries(${p} PRIVATE MPI::MPI_C)
    tft_warnings(${p})
  endforeach()
  # CASE PROG pairs (PROG none: the python program)
  set(_cases grid-ok mpi_grid grid-count mpi_grid p2p-ok mpi_pipeline p2p-tag mpi_pipeline
             p2p-nosend mpi_pipeline mpi4py-ok none mpi4py-count none)
  while(_cases)
    list(POP_FRONT _cases _case _p)
    set(_prog none)
    if(NOT _p STREQUAL none)
      set(_prog $<TARGET_FILE:trainers_${_p}>)
    endif()
    add_test(NAME trainers.mpi.${_case} COMMAND bash ${_r} ${_case} ${TRAINERS_TOOLS} ${_prog})
    # the planted hangs last their whole --timeout (20-40 s): release build
    # only ("slow"); their analysis runs under the sanitizers in
    # trainers.desync-records, on written traces
    set(_labels trainers)
    if(NOT _case MATCHES "-ok$")
      set(_labels "trainers;slow;waits")  # waits: mostly asleep until --timeout (scripts/test.sh runs them beside the rest)
    endif()
    # python3 and Open MPI leak at exit (not our code): no LeakSanitizer for them
    set_tests_properties(trainers.mpi.${_case} PROPERTIES TIMEOUT 240 LABELS "${_labels}"
                         SKIP_REGULAR_EXPRESSION "SKIP:"
                         ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
  endwhile()
endif()

# The desync analysis on traces written record by record (no MPI needed):
# a 1.1 trace, NCCL-style COMM records without members, a tie between two
# ranks, an intercommunicator, ranks blocked on each other in receives.
add_executable(test_desync_records ${TRAINERS_DIR}/desync_records.c)
target_link_libraries(test_desync_records PRIVATE tfta_desync tfta_leak)
tft_warnings(test_desync_records)
add_test(NAME trainers.desync-records COMMAND test_desync_records)
set_tests_properties(trainers.desync-records PROPERTIES LABELS "trainers;diff;asan" TIMEOUT 120)
