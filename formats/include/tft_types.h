/*
 * tft_types.h — the types every part of tftrace shares: the export macro,
 * element types and their sizes, the statistics a tensor record carries and
 * the enumerations the recording API (tft.h) and the trace format
 * (tft_format.h) both use; and the two version strings.
 *
 * Installed; included by tft.h and tft_format.h, so a program includes one
 * of those. The statistics kernels, the training runtime's ops and
 * anything else that needs a dtype or a tft_stats but no trace I/O
 * includes this header alone. Values here are part of the trace format
 * (FORMAT.md): enumerators are never renumbered, only added. Like the
 * other installed headers it compiles alone, as C17 and as C++17
 * (install.exports checks).
 */
#ifndef TFT_TYPES_H
#define TFT_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a function of the public API: exported from libtftrace.so (at
 * version LIBTFTRACE_1, tracer/lib/libtftrace.map.in), whose sources are built
 * with -fvisibility=hidden. Nothing else of the library's is exported but
 * its interposers (tracer/lib/interposed.txt) and the CUDA plugin's
 * private entries (tracer/cuda/tft_cuda_plugin.h). */
#if defined(__GNUC__)
#define TFT_API __attribute__((visibility("default")))
#else
#define TFT_API
#endif

/* Element types (u8 in records). */
typedef enum tft_dtype {
    TFT_F32 = 0, TFT_F64 = 1, TFT_F16 = 2, TFT_BF16 = 3,
    TFT_I32 = 4, TFT_I64 = 5, TFT_U8 = 6, TFT_I8 = 7, TFT_I16 = 8,
    TFT_U16 = 9, TFT_U32 = 10, TFT_U64 = 11, TFT_BOOL = 12,
    /* 8-bit floats (format 1.3), one byte each, sign in the top bit: */
    TFT_F8E4M3 = 13, /* OCP E4M3FN (torch.float8_e4m3fn): 4 exponent bits,
                      * bias 7, 3 mantissa bits, subnormals; no infinities;
                      * NaN only S.1111.111; largest 448 */
    TFT_F8E5M2 = 14, /* E5M2 (torch.float8_e5m2): 5 exponent bits, bias 15,
                      * 2 mantissa bits, subnormals; IEEE-like, +-Inf and
                      * NaNs (exponent 31); largest finite 57344 */
    TFT_DTYPE_COUNT
} tft_dtype;

/* Byte size of one element of dtype (enum tft_dtype), 0 when unknown. */
TFT_API size_t tft_dtype_size(int dtype);
/* Name of a dtype ("f32", "bf16", ...; "?" if unknown), and back (also
 * "fp32", "float32", ...; -EINVAL if unknown). */
TFT_API const char *tft_dtype_name(int dtype);
TFT_API int tft_dtype_parse(const char *s);

#define TFT_MAX_NDIM 8 /* most dimensions a tensor has */

enum tft_op_kind {
    TFT_OP_RUNTIME = 0, TFT_OP_GEMM = 1, TFT_OP_COLLECTIVE = 2,
    TFT_OP_KERNEL = 3, TFT_OP_COPY = 4, TFT_OP_OTHER = 5
};

enum tft_device_kind { TFT_DEV_CPU = 0, TFT_DEV_CUDA = 1 };

/* Statistics recording mode (which fields of tft_stats are valid). */
enum tft_stats_mode {
    TFT_STATS_SHAPE = 0,  /* shape and dtype only */
    TFT_STATS_HEALTH = 1, /* + numel, counts, min, max, fingerprint */
    TFT_STATS_FULL = 2    /* + mean, std, l1, l2, absmax, precision risks */
};

/* Tensor statistics. Validity by mode: SHAPE numel only; HEALTH + nan,
 * pinf, ninf, zero, min, max and fingerprint; FULL everything. Counts are
 * exact; moments are computed in double. The exact semantics of every
 * field are FORMAT.md's (and kernels/stats/tft_stats.h's). Part of the
 * TENSOR record's layout (tft_rec_tensor), so its size never changes. */
typedef struct tft_stats {
    uint64_t numel;
    uint64_t nan, pinf, ninf, zero;
    uint64_t over_fp16;   /* finite |x| > 65504 */
    uint64_t over_bf16;   /* finite |x| > bf16 max (3.3895314e38) */
    uint64_t under_fp16;  /* nonzero finite |x| < 2^-14 (fp16 smallest normal) */
    uint64_t fingerprint; /* xxh3-64 of the raw bytes */
    double min, max;      /* over finite values; 0 when none */
    double mean, std;     /* over finite values (population std) */
    double l1, l2;        /* sum |x|, sqrt(sum x^2) over finite values */
    double absmax;        /* max |x| over finite values */
} tft_stats;

enum tft_coll_type {
    TFT_COLL_ALLREDUCE = 0, TFT_COLL_REDUCE = 1, TFT_COLL_BCAST = 2,
    TFT_COLL_ALLGATHER = 3, TFT_COLL_REDUCE_SCATTER = 4, TFT_COLL_ALLTOALL = 5,
    TFT_COLL_BARRIER = 6, TFT_COLL_SEND = 7, TFT_COLL_RECV = 8,
    TFT_COLL_GATHER = 9, TFT_COLL_SCATTER = 10, TFT_COLL_TYPE_COUNT
};

enum tft_redop {
    TFT_REDOP_NONE = 0, TFT_REDOP_SUM = 1, TFT_REDOP_PROD = 2,
    TFT_REDOP_MIN = 3, TFT_REDOP_MAX = 4, TFT_REDOP_AVG = 5, TFT_REDOP_OTHER = 6
};

/* Point-to-point message tags as records carry them. */
#define TFT_TAG_NONE (-1) /* a collective, or a record written before format 1.2 */
#define TFT_TAG_ANY (-2)  /* a receive posted for any tag (MPI_ANY_TAG) */

enum tft_ckpt_action { TFT_CKPT_SAVE = 0, TFT_CKPT_RESUME = 1 };

/* A TENSOR record's context bits in its header's flags (FORMAT.md §5.4,
 * format 1.7), as the program said it (tft_tensor_context; tftrace
 * --torch: a module's training/eval mode and whether autograd recorded).
 * TRAIN and EVAL both clear: not said. */
#define TFT_TENSOR_TRAIN 0x2u   /* made by a module in training mode */
#define TFT_TENSOR_EVAL 0x4u    /* made by a module in eval mode */
#define TFT_TENSOR_NO_GRAD 0x8u /* made with gradient recording off (torch.no_grad) */
#define TFT_TENSOR_CONTEXT (TFT_TENSOR_TRAIN | TFT_TENSOR_EVAL | TFT_TENSOR_NO_GRAD)

/* The tftrace release this library belongs to, "MAJOR.MINOR.PATCH" ("0.2.0":
 * tft.h's TFT_VERSION_*, which a program was compiled with, may be older
 * than the library it runs with). Never NULL; static storage. */
TFT_API const char *tft_version(void);
/* The trace format version this library writes, "MAJOR.MINOR" ("1.3":
 * tft_format.h's TFT_FORMAT_MAJOR/MINOR). It reads files of every minor
 * version of that major and refuses a newer major (FORMAT.md §1). Never
 * NULL; static storage. (Before tftrace 0.2 it returned the library's
 * version, now tft_version's.) */
TFT_API const char *tft_format_version(void);

#ifdef __cplusplus
}
#endif
#endif /* TFT_TYPES_H */
