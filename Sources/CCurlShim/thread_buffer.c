// This thread's error buffer for hook calls (ph_thread.h).
#include "ph_thread.h"

static _Thread_local uint8_t ph_error_bytes[PH_THREAD_ERROR_BUFFER_SIZE];

uint8_t *ph_thread_error_buffer(void) { return ph_error_bytes; }
