/* bytes.h - little-endian loads and stores on unaligned byte buffers, for the
 * file formats (npy, safetensors). Header-only: static inline. */
#ifndef PARDO_BYTES_H
#define PARDO_BYTES_H

#include <stdint.h>

/* The u16 at p, stored little-endian. */
static inline uint16_t pardo_load_u16le(const unsigned char *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* The u32 at p, stored little-endian. */
static inline uint32_t pardo_load_u32le(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* The u64 at p, stored little-endian. */
static inline uint64_t pardo_load_u64le(const unsigned char *p) {
    return (uint64_t)pardo_load_u32le(p) | ((uint64_t)pardo_load_u32le(p + 4) << 32);
}

/* Stores v at p (2 bytes), little-endian. */
static inline void pardo_store_u16le(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* Stores v at p (4 bytes), little-endian. */
static inline void pardo_store_u32le(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Stores v at p (8 bytes), little-endian. */
static inline void pardo_store_u64le(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

#endif
