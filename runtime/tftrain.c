/*
 * tftrain — a small GPT-style training runtime, instrumented through tft.h,
 * with the bug zoo of runtime/README.md. main parses options and wires
 * the parts; the loop is in train.c.
 *
 *   tftrain [options]            (mpirun -np N tftrain ... for data parallelism)
 *
 * Exit status: 0 trained; 1 a training error (bad data, shape mismatch,
 * unreadable checkpoint...); 2 usage error.
 */
#include "train.h"

#include "tft_types.h"
#include "train_cuda.h"

#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    char bugs[1024];
    bug_list(bugs, sizeof(bugs));
    fprintf(f,
            "usage: tftrain [options]\n"
            "Trains a small GPT on a synthetic arithmetic corpus (or --data FILE), recording\n"
            "every op through tft.h (record with: tftrace -o run.trace -- tftrain ...).\n\n"
            "  --steps N        training steps (default 200)\n"
            "  --seed S         seed of data and initialisation (default 1)\n"
            "  --layers L       transformer blocks (default 2)\n"
            "  --d-model D      channels (default 64)\n"
            "  --heads H        attention heads, dividing D (default 4)\n"
            "  --seq T          sequence length (default 32)\n"
            "  --batch B        rows per rank per step (default 16)\n"
            "  --lr X           peak learning rate (default 3e-3)\n"
            "  --clip X         global gradient-norm clip, 0 = off (default 1.0)\n"
            "  --warmup N       linear warm-up steps, then cosine decay to 10%% (default 20)\n"
            "  --weight-decay X AdamW decoupled weight decay (default 0)\n"
            "  --optim O        adamw (default) | sgd (momentum 0.9: no-clip blows up with it)\n"
            "  --dtype T        fp32 | bf16 | fp16: emulated activation storage (default fp32)\n"
            "  --data FILE      train on a text file, one document per line\n"
            "  --ckpt-dir D     checkpoint directory; --ckpt-every N steps (default: only at the end)\n"
            "  --resume P       continue from checkpoint file P, or the newest one in directory P\n"
            "                   (keep --steps: the LR schedule spans the whole run)\n"
            "  --eval-every N   greedy-decoding accuracy on 64 held-out equations (default 100)\n"
            "  --log-every N    progress line every N steps (default 10)\n"
            "  --bug NAME[@S]   reproduce a training bug: %s\n"
            "  --backend B      cpu | cuda | auto (default auto: cuda when a device exists)\n"
            "                   cuda: the same model with CUDA kernels, cuBLAS and NCCL; --dtype\n"
            "                   bf16|fp16 then runs bf16/fp16 matmuls (fp16 with loss scaling)\n"
            "  -q, --quiet      no progress lines\n"
            "  -h, --help       this help;  -V, --version\n"
            "Environment: TFTRACE_PERTURB=1 (tftrace --perturb) flips the last mantissa bit of\n"
            "every parameter after initialisation (not on --resume): a run apart by round-off.\n",
            bugs);
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "tftrain: %s: '%s' is not a number in [%g, %g]\n", opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

enum { O_STEPS = 256, O_SEED, O_LAYERS, O_DMODEL, O_HEADS, O_SEQ, O_BATCH, O_LR, O_CLIP, O_WARMUP, O_WD, O_OPTIM,
       O_DTYPE, O_DATA, O_CKDIR, O_CKEVERY, O_RESUME, O_EVAL, O_LOG, O_BUG, O_BACKEND };

static int set_int(int *dst, const char *opt, const char *arg, double lo, double hi)
{
    double v;
    if (parse_num(opt, arg, lo, hi, &v) < 0 || v != (double)(int)v)
        return -1;
    *dst = (int)v;
    return 0;
}

static int set_float(float *dst, const char *opt, const char *arg, double lo, double hi)
{
    double v;
    if (parse_num(opt, arg, lo, hi, &v) < 0)
        return -1;
    *dst = (float)v;
    return 0;
}

/* cuda is refused here, before anything starts, when no device can be
 * used; auto is resolved in main. */
static int parse_backend(train_opts *o, const char *s)
{
    char why[256];
    if (!strcmp(s, "cpu") || !strcmp(s, "auto")) {
        o->backend = s[0] == 'c' ? TRAIN_BACKEND_CPU : TRAIN_BACKEND_AUTO;
        return 0;
    }
    if (!strcmp(s, "cuda")) {
        if (!cuda_probe(why, sizeof(why))) {
            fprintf(stderr, "tftrain: --backend cuda: no CUDA device (%s)\n", why);
            return -1;
        }
        o->backend = TRAIN_BACKEND_CUDA;
        return 0;
    }
    fprintf(stderr, "tftrain: --backend must be cpu, cuda or auto, got '%s'\n", s);
    return -1;
}

static int parse_opt(train_opts *o, int c, const char *arg)
{
    char err[256];
    double v;
    switch (c) {
    case O_STEPS: return set_int(&o->steps, "--steps", arg, 0, 1e9);
    case O_SEED:
        if (parse_num("--seed", arg, 0, 1.8e19, &v) < 0)
            return -1;
        o->seed = (uint64_t)v;
        return 0;
    case O_LAYERS: return set_int(&o->layers, "--layers", arg, 1, 64);
    case O_DMODEL: return set_int(&o->d_model, "--d-model", arg, 1, 8192);
    case O_HEADS: return set_int(&o->heads, "--heads", arg, 1, 256);
    case O_SEQ: return set_int(&o->seq, "--seq", arg, 2, 4096);
    case O_BATCH: return set_int(&o->batch, "--batch", arg, 1, 64);
    case O_LR: return set_float(&o->lr, "--lr", arg, 0, 100);
    case O_CLIP: return set_float(&o->clip, "--clip", arg, 0, 1e9);
    case O_WARMUP: return set_int(&o->warmup, "--warmup", arg, 0, 1e9);
    case O_WD: return set_float(&o->weight_decay, "--weight-decay", arg, 0, 10);
    case O_OPTIM:
        if (strcmp(arg, "adamw") && strcmp(arg, "sgd"))
            return fprintf(stderr, "tftrain: --optim must be adamw or sgd, got '%s'\n", arg), -1;
        o->sgd = !strcmp(arg, "sgd");
        return 0;
    case O_DTYPE:
        o->store_dtype = !strcmp(arg, "fp32") ? TFT_F32 : !strcmp(arg, "fp16") ? TFT_F16
                       : !strcmp(arg, "bf16") ? TFT_BF16 : -1;
        if (o->store_dtype < 0)
            return fprintf(stderr, "tftrain: --dtype must be fp32, bf16 or fp16, got '%s'\n", arg), -1;
        return 0;
    case O_DATA: o->data = arg; return 0;
    case O_CKDIR: o->ckpt_dir = arg; return 0;
    case O_CKEVERY: return set_int(&o->ckpt_every, "--ckpt-every", arg, 1, 1e9);
    case O_RESUME: o->resume = arg; return 0;
    case O_EVAL: return set_int(&o->eval_every, "--eval-every", arg, 0, 1e9);
    case O_LOG: return set_int(&o->log_every, "--log-every", arg, 1, 1e9);
    case O_BUG:
        if (bug_parse(arg, &o->bug, err, sizeof(err)) < 0)
            return fprintf(stderr, "tftrain: %s\n", err), -1;
        return 0;
    case O_BACKEND: return parse_backend(o, arg);
    }
    return -1;
}

static int parse_args(int argc, char **argv, train_opts *o)
{
    static const struct option lo[] = {
        {"steps", 1, 0, O_STEPS}, {"seed", 1, 0, O_SEED}, {"layers", 1, 0, O_LAYERS},
        {"d-model", 1, 0, O_DMODEL}, {"heads", 1, 0, O_HEADS}, {"seq", 1, 0, O_SEQ},
        {"batch", 1, 0, O_BATCH}, {"lr", 1, 0, O_LR}, {"clip", 1, 0, O_CLIP}, {"warmup", 1, 0, O_WARMUP},
        {"weight-decay", 1, 0, O_WD}, {"optim", 1, 0, O_OPTIM}, {"dtype", 1, 0, O_DTYPE}, {"data", 1, 0, O_DATA},
        {"ckpt-dir", 1, 0, O_CKDIR}, {"ckpt-every", 1, 0, O_CKEVERY}, {"resume", 1, 0, O_RESUME},
        {"eval-every", 1, 0, O_EVAL}, {"log-every", 1, 0, O_LOG}, {"bug", 1, 0, O_BUG},
        {"backend", 1, 0, O_BACKEND}, {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
        {0, 0, 0, 0}};
    *o = (train_opts){.steps = 200, .layers = 2, .d_model = 64, .heads = 4, .seq = 32, .batch = 16,
                      .seed = 1, .lr = 3e-3f, .clip = 1.0f, .warmup = 20, .store_dtype = TFT_F32,
                      .eval_every = 100, .log_every = 10, .backend = TRAIN_BACKEND_AUTO};
    int c;
    while ((c = getopt_long(argc, argv, "qhV", lo, NULL)) != -1) {
        if (c == 'q')
            o->quiet = true;
        else if (c == 'h')
            usage(stdout), exit(0);
        else if (c == 'V')
            printf("tftrain (tftrace) %s (trace format %s)\n", tft_version(), tft_format_version()), exit(0);
        else if (c == '?' || parse_opt(o, c, optarg) < 0)
            return fprintf(stderr, "Try 'tftrain --help'.\n"), 2;
    }
    if (optind < argc)
        return fprintf(stderr, "tftrain: unexpected argument '%s'\n", argv[optind]), 2;
    if (o->d_model % o->heads)
        return fprintf(stderr, "tftrain: --d-model %d is not a multiple of --heads %d\n", o->d_model, o->heads), 2;
    if (o->ckpt_dir && !o->ckpt_every)
        o->ckpt_every = o->steps > 0 ? o->steps : 1;
    const char *pv = getenv("TFTRACE_PERTURB"); /* tftrace --perturb */
    o->perturb = pv && *pv && strcmp(pv, "0");
    return 0;
}

int main(int argc, char **argv)
{
    train_opts o;
    int e = parse_args(argc, argv, &o);
    if (e)
        return e;
    if (o.backend == TRAIN_BACKEND_AUTO) {
        char why[256];
        o.backend = cuda_probe(why, sizeof(why)) ? TRAIN_BACKEND_CUDA : TRAIN_BACKEND_CPU;
    }
    openblas_set_num_threads(1); /* bit-identical runs */
    dist d;
    if (dist_init(&d, &argc, &argv) < 0) {
        fprintf(stderr, "tftrain: MPI initialisation failed\n");
        return 1;
    }
    if (d.rank == 0 && !o.quiet)
        printf("tftrain: %d layers, d_model %d, %d heads, seq %d, batch %d x %d rank%s, %s%s%s (%s backend)\n",
               o.layers, o.d_model, o.heads, o.seq, o.batch, d.world, d.world > 1 ? "s" : "",
               tft_dtype_name(o.store_dtype), o.bug.kind ? ", bug " : "", o.bug.kind ? bug_name(o.bug.kind) : "",
               o.backend == TRAIN_BACKEND_CUDA ? "cuda" : "cpu");
    int code = train_run(&o, &d);
    if (code && d.world > 1)
        dist_abort(&d, code); /* the other ranks would wait in a collective */
    dist_finalize(&d);
    return code;
}
