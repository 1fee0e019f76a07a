/*
 * xxh3_cuda_internal.h — XXH3_64bits (xxHash 0.8, seed 0, default secret)
 * ported to CUDA for the device statistics (stats_cuda.cu): every
 * function is __host__ __device__, so the host emulation hashes with the
 * very code the GPU runs. Short inputs (at most 240 bytes) hash in one
 * thread; a long input's eight accumulator lanes are independent
 * (xxh3_long_lane), so eight threads run them side by side and one merges
 * them (xxh3_long_merge). The values equal libxxhash's XXH3_64bits (the
 * tests compare them). Included by stats_cuda.cu only, whose kernels need
 * these device functions in their own translation unit. Not installed.
 */
#ifndef TFT_XXH3_CUDA_INTERNAL_H
#define TFT_XXH3_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

/* What runs on both sides (stats_cuda.cu uses it too). */
#define HD __host__ __device__

#define XXH3_SECRET_BYTES                                                               \
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, \
    0xad, 0x1c, 0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, \
    0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, \
    0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, \
    0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, \
    0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, \
    0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, \
    0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, \
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, \
    0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, \
    0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, \
    0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, \
    0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, \
    0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

#define XXH3_SECRET_SIZE 192
static __constant__ __attribute__((unused)) uint8_t xxh3_secret_dev[XXH3_SECRET_SIZE] = { XXH3_SECRET_BYTES };
static const __attribute__((unused)) uint8_t xxh3_secret_host[XXH3_SECRET_SIZE] = { XXH3_SECRET_BYTES };

#define P32_1 0x9E3779B1ull
#define P32_2 0x85EBCA77ull
#define P32_3 0xC2B2AE3Dull
#define P64_1 0x9E3779B185EBCA87ull
#define P64_2 0xC2B2AE3D27D4EB4Full
#define P64_3 0x165667B19E3779F9ull
#define P64_4 0x85EBCA77C2B2AE63ull
#define P64_5 0x27D4EB2F165667C5ull

static HD const uint8_t *xxh3_secret(void)
{
#ifdef __CUDA_ARCH__
    return xxh3_secret_dev;
#else
    return xxh3_secret_host;
#endif
}

/* Little-endian loads at any alignment (aligned ones in one access). */
static HD uint64_t rd64(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    if (((uintptr_t)p & 7) == 0)
        return *(const uint64_t *)p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
#else
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#endif
}

static HD uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static HD uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static HD uint64_t swap64(uint64_t x)
{
    x = ((x << 8) & 0xFF00FF00FF00FF00ull) | ((x >> 8) & 0x00FF00FF00FF00FFull);
    x = ((x << 16) & 0xFFFF0000FFFF0000ull) | ((x >> 16) & 0x0000FFFF0000FFFFull);
    return (x << 32) | (x >> 32);
}

static HD uint64_t mul128_fold64(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
    return (a * b) ^ __umul64hi(a, b);
#else
    unsigned __int128 p = (unsigned __int128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
#endif
}

static HD uint64_t xxh64_avalanche(uint64_t h)
{
    h ^= h >> 33;
    h *= P64_2;
    h ^= h >> 29;
    h *= P64_3;
    return h ^ (h >> 32);
}

static HD uint64_t xxh3_avalanche(uint64_t h)
{
    h ^= h >> 37;
    h *= 0x165667919E3779F9ull;
    return h ^ (h >> 32);
}

static HD uint64_t xxh3_rrmxmx(uint64_t h, uint64_t len)
{
    h ^= rotl64(h, 49) ^ rotl64(h, 24);
    h *= 0x9FB21C651E98DF25ull;
    h ^= (h >> 35) + len;
    h *= 0x9FB21C651E98DF25ull;
    return h ^ (h >> 28);
}

static HD uint64_t xxh3_0to16(const uint8_t *in, size_t len, const uint8_t *s)
{
    if (len > 8) {
        uint64_t lo = rd64(in) ^ (rd64(s + 24) ^ rd64(s + 32));
        uint64_t hi = rd64(in + len - 8) ^ (rd64(s + 40) ^ rd64(s + 48));
        return xxh3_avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
    }
    if (len >= 4) {
        uint64_t in64 = rd32(in + len - 4) + ((uint64_t)rd32(in) << 32);
        return xxh3_rrmxmx(in64 ^ (rd64(s + 8) ^ rd64(s + 16)), len);
    }
    if (len > 0) {
        uint32_t c = ((uint32_t)in[0] << 16) | ((uint32_t)in[len >> 1] << 24) |
                     (uint32_t)in[len - 1] | ((uint32_t)len << 8);
        return xxh64_avalanche((uint64_t)c ^ (uint64_t)(rd32(s) ^ rd32(s + 4)));
    }
    return xxh64_avalanche(rd64(s + 56) ^ rd64(s + 64));
}

static HD uint64_t mix16(const uint8_t *in, const uint8_t *s)
{
    return mul128_fold64(rd64(in) ^ rd64(s), rd64(in + 8) ^ rd64(s + 8));
}

static HD uint64_t xxh3_17to240(const uint8_t *in, size_t len, const uint8_t *s)
{
    uint64_t acc = len * P64_1;
    if (len <= 128) {
        if (len > 32) {
            if (len > 64) {
                if (len > 96) {
                    acc += mix16(in + 48, s + 96);
                    acc += mix16(in + len - 64, s + 112);
                }
                acc += mix16(in + 32, s + 64);
                acc += mix16(in + len - 48, s + 80);
            }
            acc += mix16(in + 16, s + 32);
            acc += mix16(in + len - 32, s + 48);
        }
        acc += mix16(in, s);
        acc += mix16(in + len - 16, s + 16);
        return xxh3_avalanche(acc);
    }
    int rounds = (int)len / 16;
    for (int i = 0; i < 8; i++)
        acc += mix16(in + 16 * i, s + 16 * i);
    acc = xxh3_avalanche(acc);
    for (int i = 8; i < rounds; i++)
        acc += mix16(in + 16 * i, s + 16 * (i - 8) + 3);
    acc += mix16(in + len - 16, s + 136 - 17);
    return xxh3_avalanche(acc);
}

/* XXH3 of at most 240 bytes (one thread). */
static HD uint64_t xxh3_short(const uint8_t *in, size_t len)
{
    const uint8_t *s = xxh3_secret();
    return len <= 16 ? xxh3_0to16(in, len, s) : xxh3_17to240(in, len, s);
}

/* One 64-byte stripe's effect on accumulator lane l (0..7): lane l gets
 * the neighbour's input word and its own multiply. */
static HD uint64_t stripe_lane(uint64_t acc, const uint8_t *in, const uint8_t *s, int l)
{
    uint64_t v = rd64(in + 8 * l), k = v ^ rd64(s + 8 * l);
    acc += rd64(in + 8 * (l ^ 1));
    return acc + (uint64_t)(uint32_t)k * (k >> 32);
}

/* Accumulator lane l after a whole input of len > 240 bytes. The eight
 * lanes are independent, so eight threads run them side by side. */
static HD uint64_t xxh3_long_lane(const uint8_t *in, size_t len, int l)
{
    const uint64_t init[8] = { P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1 };
    const uint8_t *s = xxh3_secret();
    const size_t per_block = (XXH3_SECRET_SIZE - 64) / 8, block = 64 * per_block;
    size_t nblocks = (len - 1) / block;
    uint64_t acc = init[l];
    for (size_t b = 0; b < nblocks; b++) {
        for (size_t i = 0; i < per_block; i++)
            acc = stripe_lane(acc, in + b * block + 64 * i, s + 8 * i, l);
        acc ^= acc >> 47;
        acc ^= rd64(s + XXH3_SECRET_SIZE - 64 + 8 * l);
        acc *= P32_1;
    }
    size_t nstripes = ((len - 1) - block * nblocks) / 64;
    for (size_t i = 0; i < nstripes; i++)
        acc = stripe_lane(acc, in + nblocks * block + 64 * i, s + 8 * i, l);
    return stripe_lane(acc, in + len - 64, s + XXH3_SECRET_SIZE - 64 - 7, l);
}

static HD uint64_t xxh3_long_merge(const uint64_t acc[8], size_t len)
{
    const uint8_t *s = xxh3_secret() + 11;
    uint64_t r = (uint64_t)len * P64_1;
    for (int i = 0; i < 4; i++)
        r += mul128_fold64(acc[2 * i] ^ rd64(s + 16 * i), acc[2 * i + 1] ^ rd64(s + 16 * i + 8));
    return xxh3_avalanche(r);
}

/* XXH3_64bits of any length, one thread (host emulation and tests). */
static uint64_t xxh3_host(const uint8_t *in, size_t len)
{
    if (len <= 240)
        return xxh3_short(in, len);
    uint64_t acc[8];
    for (int l = 0; l < 8; l++)
        acc[l] = xxh3_long_lane(in, len, l);
    return xxh3_long_merge(acc, len);
}

#endif /* TFT_XXH3_CUDA_INTERNAL_H */
