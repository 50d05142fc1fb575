/*
 * ph_thread.h: the host's per-thread buffer for the messages of failing hook calls.
 *
 * Not part of the plugin ABI (that is pluginhost.h), and in the host's own C target (plugins do not
 * link it, nor carry its thread-local bytes). Every loaded hook call hands the plugin a
 * ph_error_buf; the memory is this thread's own, in thread-local storage: reached without a lock,
 * a key lookup or a lazily made global. A hook call can nest in another on one thread only through
 * a host call that runs the app's code (an event or log handler that loads plugins): the host
 * brackets those with ph_thread_error_nest / ph_thread_error_unnest, so the nested calls write into
 * a buffer of their own, and the outer hook's message stays as it wrote it.
 */
#ifndef PH_THREAD_H
#define PH_THREAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes of this thread's error buffer. */
#define PH_THREAD_ERROR_BUFFER_SIZE 4096

/* Buffers per thread: nesting deeper than this shares the deepest one. */
#define PH_THREAD_ERROR_DEPTH 4

/* This thread's error buffer of PH_THREAD_ERROR_BUFFER_SIZE bytes, at the current nesting. */
uint8_t *ph_thread_error_buffer(void);

/* Hook calls made from now on, until ph_thread_error_unnest, use the next buffer. */
void ph_thread_error_nest(void);

/* Back to the buffer before the last ph_thread_error_nest. */
void ph_thread_error_unnest(void);

#ifdef __cplusplus
}
#endif

#endif
