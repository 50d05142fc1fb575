/*
 * ph_psl.h: the public suffix list (publicsuffix.org), through the system's libpsl loaded at
 * run time with dlopen (the library libcurl itself links for the same purpose): no headers, no
 * link-time dependency. The cookie jar asks it whether a `Domain` attribute names a public
 * suffix (`co.uk`, `github.io`), which no site may set a cookie for.
 */
#ifndef PH_PSL_H
#define PH_PSL_H

#ifdef __cplusplus
extern "C" {
#endif

/* ph_psl_is_public_suffix's answers. */
#define PH_PSL_NOT_SUFFIX 0
#define PH_PSL_SUFFIX 1
#define PH_PSL_UNAVAILABLE -1 /* libpsl did not load (or holds no list) */

/* Whether `domain` (lower case, NUL-terminated; ASCII or punycode, as URL hosts are) is a public
 * suffix, ICANN's or a private one, by the newest of libpsl's built-in list and the system's
 * list file (psl_latest), as curl asks. Thread-safe; the library and the list are loaded once. */
int ph_psl_is_public_suffix(const char *domain);

#ifdef __cplusplus
}
#endif

#endif
