/*
 * capture_ref.h — `--capture first-divergence-of=GOLDEN.trace`: the
 * fingerprints of a golden trace in a form the recorder can test each new
 * tensor against while the program runs, so the first tensor that is not
 * bit-identical to its golden counterpart is captured (with its op's
 * inputs) right when it is computed.
 *
 * A tensor is keyed by (rank, step, name, occurrence of the name within the
 * step) — the alignment tfdiff uses. The reference holds two Bloom filters:
 * the keys golden recorded with a fingerprint, and the (key, fingerprint)
 * pairs. A new tensor diverges when its key is in the first and its pair is
 * not in the second. False positives of the pair filter (about 1 in 2,000
 * at 16 bits and 8 probes per entry) can only make a diverging tensor look
 * equal: the capture then lands on the next divergent tensor. Tensors golden
 * lacks (key absent) are not divergences here; tfdiff reports them.
 *
 * The launcher builds the file (capref_build) next to the new trace; the
 * recorder maps it read-only (capref_open) from TFT_CAPTURE_REF.
 */
#ifndef TFT_CAPTURE_REF_H
#define TFT_CAPTURE_REF_H

#include <stddef.h>
#include <stdint.h>

typedef struct capref capref;

/* Reads every rank of the golden trace and writes the reference to path.
 * *tensors gets the number of fingerprinted tensors. Returns 0 or a
 * negative errno with a message in err (golden unreadable, no fingerprints:
 * recorded with --stats shape). */
int capref_build(const char *golden, const char *path, uint64_t *tensors, char *err, size_t errlen);

/* Maps a reference file; NULL when it cannot be used. */
capref *capref_open(const char *path);

/* 1 when the tensor's key is in golden and its fingerprint differs. */
int capref_diverged(const capref *r, int rank, int64_t step, uint64_t name_id, uint32_t occurrence,
                    uint64_t fingerprint);

#endif
