// This thread's error buffers for hook calls (ph_thread.h).
#include "ph_thread.h"

static _Thread_local uint8_t ph_error_bytes[PH_THREAD_ERROR_DEPTH][PH_THREAD_ERROR_BUFFER_SIZE];
static _Thread_local unsigned ph_error_depth;

uint8_t *ph_thread_error_buffer(void) {
    return ph_error_bytes[ph_error_depth < PH_THREAD_ERROR_DEPTH ? ph_error_depth : PH_THREAD_ERROR_DEPTH - 1];
}

void ph_thread_error_nest(void) { ph_error_depth++; }

void ph_thread_error_unnest(void) {
    if (ph_error_depth > 0) ph_error_depth--;
}
