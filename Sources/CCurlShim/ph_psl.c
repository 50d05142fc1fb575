/* ph_psl.c: see include/ph_psl.h. */
#include "ph_psl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

/* libpsl's PSL_TYPE_ICANN | PSL_TYPE_PRIVATE (libpsl.h), with its default `*` rule: an unknown
 * top-level domain is a suffix too. */
enum { PSL_TYPE_ANY_ = 3 };

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const void *context;
static int (*is_public_suffix2)(const void *, const char *, int);

static void load_library(void) {
#if defined(__APPLE__)
    static const char *const names[] = {"libpsl.5.dylib", NULL};
#else
    static const char *const names[] = {"libpsl.so.5", NULL};
#endif
    void *library = NULL;
    for (int i = 0; names[i] != NULL && library == NULL; i++) library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return;
    const void *(*builtin)(void) = (const void *(*)(void))dlsym(library, "psl_builtin");
    /* psl_latest (libpsl 0.16): the newer of the built-in list and the system's file; kept for
     * the life of the process. */
    const void *(*latest)(const char *) = (const void *(*)(const char *))dlsym(library, "psl_latest");
    int (*lookup)(const void *, const char *, int) = (int (*)(const void *, const char *, int))dlsym(library, "psl_is_public_suffix2");
    if (lookup == NULL) {
        dlclose(library);
        return;
    }
    const void *found = latest != NULL ? latest(NULL) : NULL;
    if (found == NULL && builtin != NULL) found = builtin();
    if (found == NULL) {
        dlclose(library);
        return;
    }
    context = found;
    is_public_suffix2 = lookup;
}

int ph_psl_is_public_suffix(const char *domain) {
    pthread_once(&load_once, load_library);
    if (is_public_suffix2 == NULL || domain == NULL) return PH_PSL_UNAVAILABLE;
    return is_public_suffix2(context, domain, PSL_TYPE_ANY_) ? PH_PSL_SUFFIX : PH_PSL_NOT_SUFFIX;
}
