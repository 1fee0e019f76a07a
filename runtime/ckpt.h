/*
 * ckpt.h — tftrain checkpoints: named float32 buffers (parameters, AdamW
 * moments) plus the step, RNG state, data cursor and model config, one file
 * per checkpoint, written atomically, checked by XXH3 on load.
 *
 * Layout of DIR:
 *   DIR/ckpt-step-000100.bin   one checkpoint (step zero-padded to 6 digits)
 *   DIR/latest                 the newest one's file name and "\n"
 * Both are written as a temp file in DIR, fsync'd, renamed over the final
 * name, then DIR is fsync'd, so a crash leaves either the old or the new
 * file, never a partial one (at worst a stray ".ckpt-*.tmp.*" file, which
 * readers ignore).
 *
 * File format, version 1, all integers little-endian:
 *   0   8  magic "TFTCKPT\0"
 *   8   4  u32 format version (CKPT_VERSION)
 *   12  4  u32 reserved, 0
 *   16  8  u64 payload bytes (file size - 32)
 *   24  8  u64 XXH3-64 of the payload
 *   32     payload:
 *          i64 step, u64 rng[4], u64 data cursor,
 *          u32 config bytes, config text (key=value lines),
 *          u32 tensor count, per tensor: u32 name bytes, name, u64 floats;
 *          then each tensor's float32 data in table order.
 *
 * Workload: a few files of up to some hundred MB per run; I/O is streamed in
 * 1 MiB pieces. Nothing prints; errors are a negative errno plus a message in
 * the caller's buffer (err, errlen; err may be NULL) naming the file, what is
 * wrong and what to do.
 */
#ifndef TFT_RUNTIME_CKPT_H
#define TFT_RUNTIME_CKPT_H

#include <stddef.h>
#include <stdint.h>

enum {
    CKPT_VERSION = 1,
    CKPT_CONFIG_MAX = 1024, /* config text bytes, NUL included */
    CKPT_NAME_MAX = 255,    /* tensor name bytes */
};

/* One named float32 buffer. Save reads data; load fills it, or only checks
 * the name and count when data is NULL (e.g. the ckpt-optim bug leaves the
 * AdamW moments as they are). */
typedef struct ckpt_tensor {
    const char *name;       /* unique within a checkpoint, 1..CKPT_NAME_MAX bytes */
    float *data;            /* count floats */
    uint64_t count;
} ckpt_tensor;

/* Everything besides the tensors. */
typedef struct ckpt_meta {
    int64_t step;                 /* steps completed; >= 0 */
    uint64_t rng[4];              /* the runtime's tft_rng state */
    uint64_t data_cursor;         /* data_cursor_get() of the train loader */
    char config[CKPT_CONFIG_MAX]; /* "key=value" lines: layers, d_model, heads, seq,
                                     vocab, dtype...; NUL-terminated */
} ckpt_meta;

/* Writes "DIR/ckpt-step-%06lld.bin" to path. Returns 0 or -ENAMETOOLONG. */
int ckpt_path(const char *dir, int64_t step, char *path, size_t cap);

/* Writes one checkpoint file at path atomically (see above). Tensor names
 * must be unique. Returns 0, -EINVAL (bad step, name, duplicate), or the
 * negative errno of the failed file operation; on error no temp file is left
 * and an existing file at path is untouched. */
int ckpt_write(const char *path, const ckpt_meta *meta, const ckpt_tensor *t, size_t n, char *err,
               size_t errlen);

/* Saves checkpoint meta->step into dir (created if missing; its parent must
 * exist) with ckpt_write, then points DIR/latest at it. When path is not
 * NULL the checkpoint's path is copied there (cap bytes). Returns 0 or a
 * negative errno with a message. */
int ckpt_save(const char *dir, const ckpt_meta *meta, const ckpt_tensor *t, size_t n, char *path,
              size_t cap, char *err, size_t errlen);

/* Reads the checkpoint at path. First verifies magic, version, size and the
 * XXH3 checksum of the whole payload; then, when expect_config is not NULL,
 * that every "key=value" line matches the checkpoint's (message: "checkpoint
 * has d_model=64, this run d_model=128"); then that the checkpoint holds
 * exactly the tensors t[0..n) (any order) with the same counts. Only then
 * fills meta and the tensors. Returns 0; -ENOENT and other open/read errnos;
 * -EBADMSG for a corrupt, truncated or foreign file; -EPROTONOSUPPORT for a
 * newer format version; -EINVAL for a config or tensor mismatch. After an
 * error meta and the buffers are unchanged, except after a read error in the
 * final pass (the file changed under us), when their contents are
 * unspecified. */
int ckpt_load(const char *path, const char *expect_config, const ckpt_tensor *t, size_t n,
              ckpt_meta *meta, char *err, size_t errlen);

/* Finds the newest checkpoint of dir: the file DIR/latest names, or when
 * latest is missing or names a missing file, the ckpt-step-N.bin with the
 * largest N. Writes its path to path. Returns 0; -ENOENT with a message when
 * dir is missing or holds no checkpoint; -ENAMETOOLONG; -EBADMSG when latest
 * holds something other than a checkpoint file name. */
int ckpt_find_latest(const char *dir, char *path, size_t cap, char *err, size_t errlen);

#endif
