/*
 * procs_event.h — the events procs.bpf.c sends user space (bpf_procs.c):
 * the processes of a job, from the launcher down, as they fork, exec, end
 * and are chosen by the OOM killer. Shared by both sides.
 */
#ifndef TFT_PROCS_EVENT_H
#define TFT_PROCS_EVENT_H

#define TFT_PROCS_MAX 8192  /* processes one job may have tracked at once */

enum tft_proc_ev {
    TFT_PEV_FORK = 1,   /* pid is new, ppid made it */
    TFT_PEV_EXEC = 2,   /* pid ran file */
    TFT_PEV_EXIT = 3,   /* pid's last thread ended; code as wait(2) gives it */
    TFT_PEV_OOM = 4,    /* the OOM killer chose pid */
};

struct tft_pevent {
    unsigned int type;      /* enum tft_proc_ev */
    int pid, ppid;
    int code;               /* TFT_PEV_EXIT: exit status, wait(2) encoding */
    unsigned long long ts;  /* CLOCK_MONOTONIC ns */
    char comm[16];
    char file[128];         /* TFT_PEV_EXEC: the file run, cut at 127 bytes */
};

#endif
