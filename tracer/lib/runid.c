/*
 * runid.c — the run id of a process recording in-process (TFT_OUTPUT
 * without the launcher): one per job, so that the rank files of a job's
 * processes, started by mpirun, srun or torchrun on several hosts, read as
 * one trace (docs/MULTINODE.md, "One run id").
 *
 * Sources, first found wins: TFT_RUN_ID (32 hex digits taken as they are;
 * other text hashed; "mpi": skip the launcher variables and agree through
 * MPI), PMIX_NAMESPACE, Open MPI's job id (OMPI_MCA_ess_base_jobid, older
 * OMPI_MCA_orte_ess_jobid), SLURM_JOB_ID with SLURM_STEP_ID,
 * TORCHELASTIC_RUN_ID. The value is hashed with its source's name (XXH3
 * 128) into 16 bytes, equal on every host of the job. With none, the
 * process starts with a random id and, when it calls MPI_Init, takes rank
 * 0's (interpose_mpi_init.c).
 */
#include "recorder_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void hash_id(const char *src, const char *value, uint8_t id[16])
{
    char buf[512]; /* "SOURCE\0value", the value cut at 400 bytes */
    size_t a = strlen(src) + 1, b = strlen(value);
    b = b > 400 ? 400 : b;
    memcpy(buf, src, a);
    memcpy(buf + a, value, b);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(buf, a + b));
    memcpy(id, c.digest, 16);
}

static int hex_id(const char *v, uint8_t id[16])
{
    if (strlen(v) != 32 || strspn(v, "0123456789abcdefABCDEF") != 32)
        return 0;
    for (int i = 0; i < 16; i++) {
        unsigned x;
        if (sscanf(v + 2 * i, "%2x", &x) != 1)
            return 0;
        id[i] = (uint8_t)x;
    }
    return 1;
}

int rec_job_run_id(uint8_t id[16], char *src, size_t n)
{
    static const char *const vars[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"};
    const char *v = getenv("TFT_RUN_ID");
    snprintf(src, n, "random");
    if (v && *v) {
        if (!strcmp(v, "mpi")) {
            snprintf(src, n, "mpi");
            return 0;
        }
        if (!hex_id(v, id))
            hash_id("TFT_RUN_ID", v, id);
        snprintf(src, n, "TFT_RUN_ID");
        return 1;
    }
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if ((v = getenv(vars[i])) && *v) {
            hash_id(vars[i], v, id);
            snprintf(src, n, "%s", vars[i]);
            return 1;
        }
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (job && *job) {
        char both[256];
        snprintf(both, sizeof(both), "%s.%s", job, step && *step ? step : "");
        hash_id("SLURM_JOB_ID", both, id);
        snprintf(src, n, "SLURM_JOB_ID");
        return 1;
    }
    if ((v = getenv("TORCHELASTIC_RUN_ID")) && *v) {
        hash_id("TORCHELASTIC_RUN_ID", v, id);
        snprintf(src, n, "TORCHELASTIC_RUN_ID");
        return 1;
    }
    return 0;
}
