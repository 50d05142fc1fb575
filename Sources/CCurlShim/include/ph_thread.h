/*
 * ph_thread.h: the host's per-thread buffer for the messages of failing hook calls.
 *
 * Not part of the plugin ABI (that is pluginhost.h), and in the host's own C target (plugins do not
 * link it, nor carry its thread-local bytes). Every loaded hook call hands the plugin a
 * ph_error_buf; the memory is this thread's own (hook calls never nest on one thread), in
 * thread-local storage: reached without a lock, a key lookup or a lazily made global.
 */
#ifndef PH_THREAD_H
#define PH_THREAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes of this thread's error buffer. */
#define PH_THREAD_ERROR_BUFFER_SIZE 4096

/* This thread's error buffer of PH_THREAD_ERROR_BUFFER_SIZE bytes. */
uint8_t *ph_thread_error_buffer(void);

#ifdef __cplusplus
}
#endif

#endif
