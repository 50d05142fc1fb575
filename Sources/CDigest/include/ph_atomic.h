/*
 * ph_atomic.h: pointer-sized atomic load, store and compare-exchange, for PluginSDK's handle views
 * (a view no one else holds is pointed at the next request's handle; the hooks that read it run on
 * other threads) and for values made once on first read (`OnceSlot`).
 *
 * Also a count read on every request where a lock would cost more than the read (event subscribers,
 * a plugin instance's host calls under way), and, on Linux, the lock of PluginSDK's `Locked`
 * (ph_lock, ph_unlock).
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

/* PluginSDK's CallGate (a plugin instance's host calls under way): the gate the current thread
 * passes through innermost, and how many of its calls this thread is in, so that the gate's close()
 * (the instance's destroy) reached from within one of them does not wait for itself.
 * (Thread-local storage in ph_gate.c: Swift emits no storage for one declared in a header.) */

/* The innermost gate of this thread, its depth in *depth. */
const void *ph_gate_thread_current(intptr_t *depth);

/* Makes gate, at depth, this thread's innermost. */
void ph_gate_thread_set(const void *gate, intptr_t depth);

/* Adds delta to *slot and returns the sum. */
static inline intptr_t ph_atomic_add_fetch_count(intptr_t *slot, intptr_t delta) { return __atomic_add_fetch(slot, delta, __ATOMIC_ACQ_REL); }

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * A lock in one 32-bit word, for PluginSDK's `Locked` on Linux: 0 free, 1 held, 2 held with a
 * thread that may be waiting (the futex mutex of U. Drepper, "Futexes Are Tricky"). Taking a free
 * lock is one compare-exchange and giving it back one exchange, inline: no call into the C library,
 * whose mutex checked its kind and owner on each of the few locks every request takes. A thread
 * that finds it held spins briefly (the sections it guards are a few loads and stores), then sleeps
 * in the kernel until the holder wakes it. Acquire and release: the thread sanitizer sees them.
 */

/* How many times a thread reads a held lock before it sleeps. */
#define PH_LOCK_SPINS 100

/* The word once it is not held by a thread that others do not wait for, or after PH_LOCK_SPINS reads. */
static inline uint32_t ph_lock_spin(uint32_t *word) {
    for (int spins = PH_LOCK_SPINS;; spins--) {
        uint32_t state = __atomic_load_n(word, __ATOMIC_RELAXED);
        if (state != 1 || spins == 0) return state;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    }
}

/* Takes a lock found held: marks it as waited for (2) and sleeps until it is given back. */
static inline void ph_lock_contended(uint32_t *word) {
    uint32_t state = ph_lock_spin(word);
    if (state == 0) {
        uint32_t expected = 0;
        if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        state = expected;
    }
    for (;;) {
        /* Taken as 2, not 1: another thread may still sleep on it, and the one giving it back wakes it. */
        if (state != 2 && __atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) == 0) return;
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        state = ph_lock_spin(word);
    }
}

/* Takes the lock in *word. */
static inline void ph_lock(uint32_t *word) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    ph_lock_contended(word);
}

/* Gives back the lock in *word, waking one sleeping thread if any may sleep on it. */
static inline void ph_unlock(uint32_t *word) {
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2) syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#endif

#endif
