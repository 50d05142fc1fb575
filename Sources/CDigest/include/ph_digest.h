/*
 * ph_digest.h: the SHA-256 block function on the CPU's SHA extensions, for PluginSDK's SHA256.
 *
 * Not part of the plugin ABI (that is pluginhost.h): PluginSDK links this into every plugin and the
 * host, and falls back to its portable Swift code when ph_sha256_accelerated() says 0.
 */
#ifndef PH_DIGEST_H
#define PH_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SHA-256's 64 round constants (FIPS 180-4 §4.2.2), for the Swift code's own block function. */
const uint32_t *ph_sha256_round_constants(void);

/* 1 when this CPU has the x86 SHA extensions (and SSSE3, SSE4.1) and ph_sha256_compress can run;
 * 0 otherwise (other architectures, older CPUs). Asks CPUID each call (PluginSDK asks once). */
int ph_sha256_accelerated(void);

/* Compresses `blocks` whole 64-byte blocks at `data` into `state` (the eight working words
 * a…h, in host order), as FIPS 180-4's SHA-256 does. Only when ph_sha256_accelerated() is 1. */
void ph_sha256_compress(uint32_t state[8], const uint8_t *data, size_t blocks);

#ifdef __cplusplus
}
#endif

#endif
