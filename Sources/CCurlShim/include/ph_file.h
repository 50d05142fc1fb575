/*
 * ph_file.h: file calls the C library declares only for C code that asks for them (_GNU_SOURCE),
 * which Swift's Glibc module does not.
 */
#ifndef PH_FILE_H
#define PH_FILE_H

#ifdef __cplusplus
extern "C" {
#endif

/* mkstemp, the file opened with `flags` (O_CLOEXEC: closed on exec from the start, where mkstemp
 * and a later fcntl left a moment for a child to inherit it). Returns the descriptor, or -1 with
 * errno set; `path_template` ends with XXXXXX, replaced by the name made. */
int ph_mkostemp(char *path_template, int flags);

#ifdef __cplusplus
}
#endif

#endif
