/*
 * ph_decode.h: streaming decoders of HTTP content codings (RFC 9110 §8.4.1), over the
 * system's zlib, brotli and zstd libraries loaded at run time with dlopen (the ones libcurl
 * itself links): no headers, no link-time dependency.
 *
 * The transport decodes response bodies itself instead of leaving it to libcurl: libcurl 8.5
 * and later decide at the `Content-Encoding` field, before the transport sees it, and fail a
 * body in a coding nobody asked for instead of handing it over as it came.
 *
 * One decoder decodes one coding. ph_decoder_step() takes input and gives output in turns:
 * call it until it consumed the input and left room in the output (nothing more to give).
 * A decoder is used by one thread at a time.
 */
#ifndef PH_DECODE_H
#define PH_DECODE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The codings. `x-gzip` is gzip; `identity` needs no decoder. */
#define PH_CODING_GZIP 1
#define PH_CODING_DEFLATE 2 /* zlib-wrapped, or raw deflate as some servers send it */
#define PH_CODING_BR 3
#define PH_CODING_ZSTD 4

/* ph_decoder_step's results. */
#define PH_DECODE_OK 0     /* went on: call again while input is left or the output was filled */
#define PH_DECODE_END 1    /* the coded stream ended (input past its end is an error, next call, but
                            * for another gzip member or zstd frame) */
#define PH_DECODE_ERROR -1 /* the input is not in the coding; `error` says why */

typedef struct ph_decoder ph_decoder;

/* 1 when `coding` can be decoded here (its library loads), else 0. Thread-safe; the libraries
 * are loaded once. */
int ph_decode_available(int coding);

/* A new decoder of `coding`, or NULL with the reason in `error` (the library is missing, or
 * out of memory). Freed with ph_decoder_free(). */
ph_decoder *ph_decoder_new(int coding, char *error, size_t error_size);

/* Decodes from `in` (`in_len` bytes; NULL with 0 to drain what the decoder holds) into `out`
 * (`out_cap` bytes): sets `*consumed` and `*produced`. Returns PH_DECODE_OK, PH_DECODE_END,
 * or PH_DECODE_ERROR with a reason in `error`. Input after the end of the coded stream is an
 * error (gzip: another member may follow, RFC 1952 §2.2; zstd: another frame, as its format
 * allows). */
int ph_decoder_step(ph_decoder *decoder, const unsigned char *in, size_t in_len, size_t *consumed,
                    unsigned char *out, size_t out_cap, size_t *produced, char *error, size_t error_size);

/* 1 when the coded stream ended whole (gzip: its last member so far; zstd: its last frame so
 * far); 0 while more is due (a next member's magic half in, say): a
 * body that ends here was cut short, or is corrupt in a way that reads as a cut. */
int ph_decoder_ended(const ph_decoder *decoder);

/* Frees a decoder (NULL: nothing). */
void ph_decoder_free(ph_decoder *decoder);

#ifdef __cplusplus
}
#endif

#endif
