# small_model.sh: sourced by run_bug.sh and ../reports/run_reports.sh, the
# way the bug zoo runs tftrain (bash arrays and environment).
#
# The small model: 1 layer, 32 channels, 16 positions, 4 rows per rank.
SMALL=(--layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
# dp-skip@S hangs its ranks: tftrace ends them after this
DP_SKIP_TIMEOUT=(--timeout 10 --grace 2)
# the hung ranks of dp-skip yield the CPU to other tests while they wait
export OMPI_MCA_mpi_yield_when_idle=1
