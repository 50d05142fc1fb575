/*
 * ph_atomic.h: pointer-sized atomic load, store and compare-exchange, for PluginSDK's handle views
 * (a view no one else holds is pointed at the next request's handle; the hooks that read it run on
 * other threads) and for values made once on first read (`OnceSlot`).
 *
 * Also a count read on every request where a lock would cost more than the read (event subscribers).
 *
 * Not part of the plugin ABI (that is pluginhost.h). Acquire and release: a hook that reads the
 * handle a view was pointed at sees it whole, and the thread sanitizer sees two atomic accesses.
 */
#ifndef PH_ATOMIC_H
#define PH_ATOMIC_H

#include <stdint.h>

/* The pointer in *slot. */
static inline void *ph_atomic_load_pointer(void *const *slot) { return __atomic_load_n(slot, __ATOMIC_ACQUIRE); }

/* Sets *slot to value. */
static inline void ph_atomic_store_pointer(void **slot, void *value) { __atomic_store_n(slot, value, __ATOMIC_RELEASE); }

/* Sets *slot to desired if it holds *expected, and returns 1; else writes what it holds into
 * *expected and returns 0. */
static inline int ph_atomic_compare_exchange_pointer(void **slot, void **expected, void *desired) {
    return __atomic_compare_exchange_n(slot, expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* The count in *slot. */
static inline intptr_t ph_atomic_load_count(const intptr_t *slot) { return __atomic_load_n(slot, __ATOMIC_ACQUIRE); }

/* Adds delta to *slot. */
static inline void ph_atomic_add_count(intptr_t *slot, intptr_t delta) { __atomic_add_fetch(slot, delta, __ATOMIC_ACQ_REL); }

#endif
