/*
 * format_internal.h — on-disk frame layouts and helpers shared by the writer
 * and the reader. Not installed. FORMAT.md §3–§4 describe these bytes.
 */
#ifndef TFT_FORMAT_INTERNAL_H
#define TFT_FORMAT_INTERNAL_H

#include "tft_format.h"
#include "tft_msg.h" /* tft_logf: messages to the caller's log */
#include "tft_u64map.h"

#include <stdarg.h>
#include <stdbool.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tftrace writes little-endian records in host order; a big-endian port needs byte swapping"
#endif

/* zstd skippable-frame magics (0x184D2A50..5F are skippable). */
#define FRAME_MAGIC_HEADER 0x184D2A50u
#define FRAME_MAGIC_CHUNK  0x184D2A51u
#define FRAME_MAGIC_INDEX  0x184D2A52u
#define FRAME_MAGIC_RETIRED 0x184D2A53u /* a retired chunk (--keep-steps, FORMAT.md §3.6) */
#define FRAME_MAGIC_KEPT   0x184D2A54u /* a kept chunk, read once its partner retired (§3.6) */
#define FRAME_MAGIC_SEEKTABLE 0x184D2A5Eu
#define SEEKTABLE_FOOTER_MAGIC 0x8F92EAB1u
#define ZSTD_FRAME_MAGIC 0xFD2FB528u
#define SKIPPABLE_HDR 8u /* u32 magic + u32 payload size */

#define FILE_MAGIC "TFTRACE"   /* 8 bytes with the NUL */
#define CHUNK_MAGIC "TFCK"
#define INDEX_MAGIC "TFIX"

/* Bounds that guard allocations against damaged headers. */
#define CHUNK_RAW_MIN (64u * 1024u)
#define CHUNK_RAW_MAX (4u * 1024u * 1024u)
#define CHUNK_RAW_LIMIT (CHUNK_RAW_MAX + 2u * TFT_REC_MAX_BYTES + 16u * 1024u * 1024u)

/* Payload of the header frame (136 bytes in version 1.0). */
typedef struct file_hdr_disk {
    char magic[8];          /* "TFTRACE\0" */
    uint16_t major, minor;
    uint32_t hdr_bytes;     /* payload bytes, >= sizeof(file_hdr_disk) in newer minors */
    uint8_t run_id[16];
    int32_t rank, world_size, pid;
    uint32_t flags;
    uint64_t start_realtime_ns, start_monotonic_ns;
    char host[64];
    uint32_t reserved;
    uint32_t checksum;      /* low 32 bits of xxh3-64 of the payload bytes before it */
} file_hdr_disk;

/* Payload of a chunk header frame (88 bytes). */
typedef struct chunk_hdr_disk {
    char magic[4];          /* "TFCK" */
    uint32_t chunk_no;
    uint32_t records;       /* records in the chunk, string definitions included */
    uint32_t raw_size;      /* decompressed bytes */
    uint32_t comp_size;     /* bytes of the zstd frame that follows */
    uint32_t comp_checksum; /* low 32 bits of xxh3-64 of those bytes */
    int64_t first_step, last_step;
    int64_t first_seq, last_seq;
    uint64_t first_ts, last_ts;
    uint64_t dropped;
    uint32_t encoding;      /* CHUNK_ENC_* bits; 0 = plain records (1.3 and before) */
    uint32_t checksum;
} chunk_hdr_disk;

/* Chunk encodings (FORMAT.md §3.3.1), bits of chunk_hdr_disk.encoding. */
#define CHUNK_ENC_COLUMNS 0x1u /* records grouped by kind, word columns, delta coded */
#define CHUNK_ENC_SHUFFLE 0x2u /* the word area as eight byte planes */
#define CHUNK_ENC_KNOWN (CHUNK_ENC_COLUMNS | CHUNK_ENC_SHUFFLE)

/* Scratch of the chunk codec, reused from chunk to chunk; zero = empty. */
typedef struct fmt_codec {
    uint32_t *off;          /* byte offset of each record */
    size_t off_cap;
    uint64_t *order;        /* record indices grouped by kind (u32), sort pairs */
    size_t order_cap;
    uint64_t *words;        /* the unshuffled word area */
    size_t words_cap;
    uint16_t *table;        /* decoder's aligned copy of the record table */
    size_t table_cap;
    uint32_t *goff;         /* decoder: record offsets in group order */
    size_t goff_cap;
} fmt_codec;

/* Bytes of the record table of an encoded chunk of n records. */
size_t fmt_chunk_table_bytes(uint32_t records);
/* Bytes the zstd frame of a chunk holds: raw_size, plus the table with COLUMNS. */
size_t fmt_chunk_encoded_size(uint32_t enc, uint32_t records, size_t raw_size);
/* Encodes raw[0, raw_size), exactly `records` well-framed records, into
 * out (fmt_chunk_encoded_size bytes). Returns 0 or -ENOMEM. */
int fmt_chunk_encode(fmt_codec *c, uint32_t enc, const char *raw, size_t raw_size,
                     uint32_t records, char *out);
/* Decodes in[0, in_size) (untrusted) into out (raw_size bytes). Returns 0,
 * -ENOMEM, or -EBADMSG with *why saying what is wrong. */
int fmt_chunk_decode(fmt_codec *c, uint32_t enc, const char *in, size_t in_size,
                     uint32_t records, char *out, size_t raw_size, const char **why);
void fmt_codec_free(fmt_codec *c);

/* One index entry (80 bytes). */
typedef struct index_entry_disk {
    uint64_t offset;        /* of the chunk header frame */
    uint32_t chunk_no, records, raw_size, comp_size;
    int64_t first_step, last_step, first_seq, last_seq;
    uint64_t first_ts, last_ts, dropped;
} index_entry_disk;

typedef struct index_hdr_disk {
    char magic[4];          /* "TFIX" */
    uint32_t n_chunks;
    uint64_t records, dropped, raw_bytes;
    /* n_chunks index_entry_disk follow, then u32 reserved, u32 checksum */
} index_hdr_disk;

_Static_assert(sizeof(tft_rec) == 32, "record header is 32 bytes");
_Static_assert(sizeof(file_hdr_disk) == 136, "file header payload");
_Static_assert(sizeof(chunk_hdr_disk) == 88, "chunk header payload");
_Static_assert(sizeof(index_entry_disk) == 80, "index entry");
_Static_assert(sizeof(index_hdr_disk) == 32, "index header");
_Static_assert(sizeof(tft_rec_tensor) % 8 == 0, "tensor record aligned");
_Static_assert(sizeof(tft_rec_collective) % 8 == 0, "collective record aligned");
_Static_assert(sizeof(tft_rec_kernel) % 8 == 0, "kernel record aligned");

uint32_t fmt_checksum32(const void *p, size_t n);
/* Reads exactly n bytes at off; returns 0, -EIO or -ENODATA at end of file. */
int fmt_pread_full(int fd, void *buf, size_t n, uint64_t off);
/* Writes all bytes; returns 0 or negative errno. */
int fmt_write_full(int fd, const void *buf, size_t n);

/* The file a reader reads (st_dev, st_ino of its open descriptor), so a
 * trace can tell two names of one file apart from two files. */
void fmt_reader_file_id(const tft_reader *r, uint64_t *dev, uint64_t *ino);
/* Reads only the header frame of the rank file at path, silently: fills
 * *info and the file's identity. Returns 0 or a negative errno (-EPROTO not
 * a tftrace file, -EPROTONOSUPPORT newer major, ...); the caller opens the
 * file with tft_reader_open to have the reason logged. */
int fmt_reader_peek(const char *path, tft_file_info *info, uint64_t *dev, uint64_t *ino);

/* The start of every manifest reader (tft_manifest_parse,
 * tft_manifest_read_dir): a caller that passed no error buffer gets scratch
 * (n bytes of the reader's own), the message is emptied, and m is emptied
 * with its exit status unknown (-1). */
void fmt_manifest_start(tft_manifest *m, char **err, size_t *errlen, char *scratch, size_t n);

static inline uint32_t fmt_get_u32(const void *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* Map from string id (never 0) to text, shared by writer and reader: a
 * tft_u64map of these values. */
typedef struct strmap_entry {
    char *text;        /* NUL-terminated copy, owned */
    uint32_t len;
    uint32_t mark;     /* writer: generation of the chunk that last referenced it */
    uint32_t mark_kept; /* writer, keep mode: the same for the kept records' chunk */
    uint32_t emitted;  /* writer: generation of the chunk that last defined it */
} strmap_entry;

typedef struct strmap {
    tft_u64map ids;    /* string id -> strmap_entry */
} strmap;

/* An empty map (allocates nothing); before any other strmap call. */
void strmap_init(strmap *m);
strmap_entry *strmap_find(const strmap *m, uint64_t id);
/* Inserts (copying text) if absent; returns the entry or NULL on ENOMEM
 * (or for id 0). */
strmap_entry *strmap_put(strmap *m, uint64_t id, const char *text, size_t len);
void strmap_free(strmap *m);

#endif
