/* The per-thread part of PluginSDK's CallGate (ph_atomic.h): the gate this thread passes through
 * innermost, and how many of its calls the thread is in. */
#include "ph_atomic.h"

static _Thread_local const void *gate_innermost;
static _Thread_local intptr_t gate_depth;

const void *ph_gate_thread_current(intptr_t *depth) {
    *depth = gate_depth;
    return gate_innermost;
}

void ph_gate_thread_set(const void *gate, intptr_t depth) {
    gate_innermost = gate;
    gate_depth = depth;
}
