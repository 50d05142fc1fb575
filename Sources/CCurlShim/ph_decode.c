/* ph_decode.c: see include/ph_decode.h. */
#include "ph_decode.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* zlib's z_stream, as zlib.h lays it out (its size goes to inflateInit2_, which checks it). */
typedef struct {
    const unsigned char *next_in;
    unsigned int avail_in;
    unsigned long total_in;
    unsigned char *next_out;
    unsigned int avail_out;
    unsigned long total_out;
    const char *msg;
    void *state;
    void *zalloc;
    void *zfree;
    void *opaque;
    int data_type;
    unsigned long adler;
    unsigned long reserved;
} z_stream_layout;

enum { Z_OK_ = 0, Z_STREAM_END_ = 1, Z_NEED_DICT_ = 2, Z_DATA_ERROR_ = -3, Z_BUF_ERROR_ = -5, Z_NO_FLUSH_ = 0 };
enum { BROTLI_ERROR_ = 0, BROTLI_SUCCESS_ = 1, BROTLI_NEEDS_MORE_INPUT_ = 2, BROTLI_NEEDS_MORE_OUTPUT_ = 3 };

/* zstd's stream buffers, as zstd.h lays them out. */
typedef struct {
    const void *src;
    size_t size;
    size_t pos;
} zstd_in_layout;
typedef struct {
    void *dst;
    size_t size;
    size_t pos;
} zstd_out_layout;

static struct {
    int (*init2)(z_stream_layout *, int, const char *, int);
    int (*inflate)(z_stream_layout *, int);
    int (*end)(z_stream_layout *);
} zlib;

static struct {
    void *(*create)(void *, void *, void *);
    int (*decompress)(void *, size_t *, const unsigned char **, size_t *, unsigned char **, size_t *);
    int (*error_code)(void *);
    const char *(*error_string)(int);
    void (*destroy)(void *);
} brotli;

static struct {
    void *(*create)(void);
    size_t (*set_parameter)(void *, int, int); /* zstd 1.4: ZSTD_DCtx_setParameter */
    size_t (*free)(void *);
    size_t (*decompress)(void *, zstd_out_layout *, zstd_in_layout *);
    unsigned (*is_error)(size_t);
    const char *(*error_name)(size_t);
} zstd;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int has_zlib, has_brotli, has_zstd;

/* Opens the first of `names` that loads (RTLD_LOCAL: its symbols reach no one else). */
static void *open_first(const char *const *names) {
    for (int i = 0; names[i] != NULL; i++) {
        void *library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (library != NULL) return library;
    }
    return NULL;
}

/* Resolves every name into its slot; 0 (and the library closed) when one is missing. */
static int resolve_all(void *library, const char *const *names, void **slots, int count) {
    for (int i = 0; i < count; i++) {
        slots[i] = dlsym(library, names[i]);
        if (slots[i] == NULL) {
            dlclose(library);
            return 0;
        }
    }
    return 1;
}

static void load_libraries(void) {
#if defined(__APPLE__)
    static const char *const zlib_names[] = {"libz.1.dylib", "/usr/lib/libz.1.dylib", NULL};
    static const char *const brotli_names[] = {"libbrotlidec.1.dylib", NULL};
    static const char *const zstd_names[] = {"libzstd.1.dylib", NULL};
#else
    static const char *const zlib_names[] = {"libz.so.1", NULL};
    static const char *const brotli_names[] = {"libbrotlidec.so.1", NULL};
    static const char *const zstd_names[] = {"libzstd.so.1", NULL};
#endif
    void *library = open_first(zlib_names);
    if (library != NULL) {
        static const char *const names[] = {"inflateInit2_", "inflate", "inflateEnd"};
        void *slots[3];
        if (resolve_all(library, names, slots, 3)) {
            zlib.init2 = (int (*)(z_stream_layout *, int, const char *, int))slots[0];
            zlib.inflate = (int (*)(z_stream_layout *, int))slots[1];
            zlib.end = (int (*)(z_stream_layout *))slots[2];
            has_zlib = 1;
        }
    }
    library = open_first(brotli_names);
    if (library != NULL) {
        static const char *const names[] = {"BrotliDecoderCreateInstance", "BrotliDecoderDecompressStream",
                                            "BrotliDecoderGetErrorCode", "BrotliDecoderErrorString",
                                            "BrotliDecoderDestroyInstance"};
        void *slots[5];
        if (resolve_all(library, names, slots, 5)) {
            brotli.create = (void *(*)(void *, void *, void *))slots[0];
            brotli.decompress =
                (int (*)(void *, size_t *, const unsigned char **, size_t *, unsigned char **, size_t *))slots[1];
            brotli.error_code = (int (*)(void *))slots[2];
            brotli.error_string = (const char *(*)(int))slots[3];
            brotli.destroy = (void (*)(void *))slots[4];
            has_brotli = 1;
        }
    }
    library = open_first(zstd_names);
    if (library != NULL) {
        static const char *const names[] = {"ZSTD_createDStream", "ZSTD_freeDStream", "ZSTD_decompressStream",
                                            "ZSTD_isError", "ZSTD_getErrorName"};
        void *slots[5];
        if (resolve_all(library, names, slots, 5)) {
            zstd.create = (void *(*)(void))slots[0];
            zstd.free = (size_t (*)(void *))slots[1];
            zstd.decompress = (size_t (*)(void *, zstd_out_layout *, zstd_in_layout *))slots[2];
            zstd.is_error = (unsigned (*)(size_t))slots[3];
            zstd.error_name = (const char *(*)(size_t))slots[4];
            /* Without it (zstd before 1.4) the library's own bound, 128 MiB, stands. */
            zstd.set_parameter = (size_t (*)(void *, int, int))dlsym(library, "ZSTD_DCtx_setParameter");
            has_zstd = 1;
        }
    }
}

int ph_decode_available(int coding) {
    pthread_once(&load_once, load_libraries);
    switch (coding) {
    case PH_CODING_GZIP:
    case PH_CODING_DEFLATE: return has_zlib;
    case PH_CODING_BR: return has_brotli;
    case PH_CODING_ZSTD: return has_zstd;
    default: return 0;
    }
}

struct ph_decoder {
    int coding;
    int ended;      /* the coded stream ended */
    int zlib_live;  /* zlib's stream was started (inflateEnd is owed) */
    int raw;        /* deflate without zlib's wrapper */
    size_t after_end;    /* bytes given after the coded stream ended */
    unsigned char head[2]; /* deflate: its first two bytes, held until they say whether it is wrapped;
                            * gzip: a next member's magic, held until both bytes are in */
    size_t head_len;
    z_stream_layout z;
    void *state; /* brotli's or zstd's */
};

static const char *coding_name(int coding) {
    switch (coding) {
    case PH_CODING_GZIP: return "gzip";
    case PH_CODING_DEFLATE: return "deflate";
    case PH_CODING_BR: return "br";
    default: return "zstd";
    }
}

/* zlib's windowBits: gzip (or zlib) found by its header; deflate zlib-wrapped or raw. */
static int start_zlib(ph_decoder *decoder) {
    memset(&decoder->z, 0, sizeof decoder->z);
    int bits = decoder->coding == PH_CODING_GZIP ? 15 + 32 : (decoder->raw ? -15 : 15);
    /* zlib checks the major version ("1") and the struct's size against its own. */
    decoder->zlib_live = zlib.init2(&decoder->z, bits, "1.2.11", (int)sizeof(z_stream_layout)) == Z_OK_;
    return decoder->zlib_live;
}

ph_decoder *ph_decoder_new(int coding, char *error, size_t error_size) {
    if (!ph_decode_available(coding)) {
        snprintf(error, error_size, "no library to decode %s here", coding_name(coding));
        return NULL;
    }
    ph_decoder *decoder = calloc(1, sizeof *decoder);
    if (decoder == NULL) {
        snprintf(error, error_size, "out of memory for a %s decoder", coding_name(coding));
        return NULL;
    }
    decoder->coding = coding;
    int made;
    switch (coding) {
    case PH_CODING_BR: made = (decoder->state = brotli.create(NULL, NULL, NULL)) != NULL; break;
    case PH_CODING_ZSTD:
        made = (decoder->state = zstd.create()) != NULL;
        /* RFC 9659: a zstd content coding's window is at most 8 MiB (ZSTD_d_windowLogMax, 100,
         * set to 23): a frame that asks for more is refused rather than given the memory. */
        if (made && zstd.set_parameter != NULL && zstd.is_error(zstd.set_parameter(decoder->state, 100, 23))) {
            zstd.free(decoder->state); /* the window limit refused: no decoder without it */
            made = 0;
        }
        break;
    case PH_CODING_DEFLATE: made = 1; break; /* started once its first two bytes are in */
    default: made = start_zlib(decoder); break;
    }
    if (!made) {
        snprintf(error, error_size, "cannot start a %s decoder", coding_name(coding));
        free(decoder);
        return NULL;
    }
    return decoder;
}

/* One inflate() over `in` into `out`, its status read as a step's result. */
static int inflate_into(ph_decoder *decoder, const unsigned char *in, size_t in_len, size_t *consumed,
                        unsigned char *out, size_t out_cap, size_t *produced, char *error, size_t error_size) {
    /* zlib counts in unsigned int: a larger buffer is taken in parts, over more calls. */
    unsigned int in_part = in_len > 1u << 30 ? 1u << 30 : (unsigned int)in_len;
    unsigned int out_part = out_cap > 1u << 30 ? 1u << 30 : (unsigned int)out_cap;
    decoder->z.next_in = in;
    decoder->z.avail_in = in_part;
    decoder->z.next_out = out;
    decoder->z.avail_out = out_part;
    int status = zlib.inflate(&decoder->z, Z_NO_FLUSH_);
    *consumed = in_part - decoder->z.avail_in;
    *produced = out_part - decoder->z.avail_out;
    switch (status) {
    case Z_OK_:
    case Z_BUF_ERROR_: return PH_DECODE_OK; /* no progress possible: more input, or room, is needed */
    case Z_STREAM_END_: decoder->ended = 1; return PH_DECODE_END;
    case Z_NEED_DICT_:
        snprintf(error, error_size, "the %s body needs a preset dictionary", coding_name(decoder->coding));
        return PH_DECODE_ERROR;
    default:
        snprintf(error, error_size, "the %s body is corrupt: %s", coding_name(decoder->coding),
                 decoder->z.msg != NULL ? decoder->z.msg : "unknown zlib error");
        return PH_DECODE_ERROR;
    }
}

static int step_zlib(ph_decoder *decoder, const unsigned char *in, size_t in_len, size_t *consumed, unsigned char *out,
                     size_t out_cap, size_t *produced, char *error, size_t error_size) {
    if (decoder->zlib_live) return inflate_into(decoder, in, in_len, consumed, out, out_cap, produced, error, error_size);
    /* deflate: its first two bytes say whether it has zlib's wrapper (RFC 1950: compression
     * method 8, a window of at most 32 KiB, and a check that makes the pair a multiple of 31).
     * Some servers send raw deflate instead; held here, the pair is judged whole, however the
     * body is split. */
    size_t take = 2 - decoder->head_len < in_len ? 2 - decoder->head_len : in_len;
    if (take > 0) memcpy(decoder->head + decoder->head_len, in, take);
    decoder->head_len += take;
    *consumed = take;
    if (decoder->head_len < 2) return PH_DECODE_OK;
    unsigned int cmf = decoder->head[0], flg = decoder->head[1];
    decoder->raw = !((cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && (cmf * 256 + flg) % 31 == 0);
    if (!start_zlib(decoder)) {
        snprintf(error, error_size, "cannot start a deflate decoder");
        return PH_DECODE_ERROR;
    }
    size_t head_consumed = 0;
    int status = inflate_into(decoder, decoder->head, 2, &head_consumed, out, out_cap, produced, error, error_size);
    if (status != PH_DECODE_ERROR && head_consumed < 2) {
        /* Two bytes fill no output buffer: zlib takes both. */
        snprintf(error, error_size, "the deflate body's first bytes were not taken");
        return PH_DECODE_ERROR;
    }
    return status;
}

/* gzip (RFC 1952 §2.2): a body may be several members one after another (`cat a.gz b.gz`),
 * decoded as one. After a member ends, the next bytes must begin another with its magic (1f 8b,
 * held until both are in, however the body is split); any other byte is one after the body's
 * end. Until the next member ends the body is unfinished. */
static int next_gzip_member(ph_decoder *decoder, const unsigned char *in, size_t in_len, size_t *consumed,
                            unsigned char *out, size_t out_cap, size_t *produced, char *error, size_t error_size) {
    static const unsigned char magic[2] = {0x1f, 0x8b};
    size_t take = 2 - decoder->head_len < in_len ? 2 - decoder->head_len : in_len;
    for (size_t i = 0; i < take; i++) {
        if (in[i] != magic[decoder->head_len + i]) {
            decoder->ended = 1; /* what ended is the body; these bytes follow it */
            snprintf(error, error_size, "%zu bytes follow the end of the gzip body", decoder->head_len + in_len);
            return PH_DECODE_ERROR;
        }
    }
    memcpy(decoder->head + decoder->head_len, in, take);
    decoder->head_len += take;
    *consumed = take;
    decoder->ended = 0;
    if (decoder->head_len < 2) return PH_DECODE_OK;
    decoder->head_len = 0;
    zlib.end(&decoder->z);
    if (!start_zlib(decoder)) {
        snprintf(error, error_size, "cannot start a gzip decoder for the body's next member");
        return PH_DECODE_ERROR;
    }
    size_t magic_consumed = 0;
    int status = inflate_into(decoder, magic, 2, &magic_consumed, out, out_cap, produced, error, error_size);
    if (status != PH_DECODE_ERROR && magic_consumed < 2) {
        snprintf(error, error_size, "the gzip body's next member was not taken");
        return PH_DECODE_ERROR;
    }
    return status;
}

static int step_brotli(ph_decoder *decoder, const unsigned char *in, size_t in_len, size_t *consumed,
                       unsigned char *out, size_t out_cap, size_t *produced, char *error, size_t error_size) {
    size_t available_in = in_len, available_out = out_cap;
    const unsigned char *next_in = in;
    unsigned char *next_out = out;
    int result = brotli.decompress(decoder->state, &available_in, &next_in, &available_out, &next_out, NULL);
    *consumed = in_len - available_in;
    *produced = out_cap - available_out;
    switch (result) {
    case BROTLI_SUCCESS_: decoder->ended = 1; return PH_DECODE_END;
    case BROTLI_NEEDS_MORE_INPUT_:
    case BROTLI_NEEDS_MORE_OUTPUT_: return PH_DECODE_OK;
    default: {
        const char *reason = brotli.error_string(brotli.error_code(decoder->state));
        snprintf(error, error_size, "the br body is corrupt: %s", reason != NULL ? reason : "unknown brotli error");
        return PH_DECODE_ERROR;
    }
    }
}

static int step_zstd(ph_decoder *decoder, const unsigned char *in, size_t in_len, size_t *consumed, unsigned char *out,
                     size_t out_cap, size_t *produced, char *error, size_t error_size) {
    zstd_in_layout input = {in, in_len, 0};
    zstd_out_layout output = {out, out_cap, 0};
    size_t result = zstd.decompress(decoder->state, &output, &input);
    *consumed = input.pos;
    *produced = output.pos;
    if (zstd.is_error(result)) {
        /* zstd says why: a corrupt block, or a frame that asks for more memory than allowed. */
        snprintf(error, error_size, "the zstd body cannot be decoded: %s", zstd.error_name(result));
        return PH_DECODE_ERROR;
    }
    /* 0: a frame ended and was given out whole; another may follow. A call that took and gave
     * nothing (the caller draining a full buffer) leaves that as it was: zstd, given no input
     * after a frame, says it wants the next frame's header. */
    if (input.pos > 0 || output.pos > 0) decoder->ended = result == 0;
    return result == 0 && input.pos == in_len ? PH_DECODE_END : PH_DECODE_OK;
}

int ph_decoder_step(ph_decoder *decoder, const unsigned char *in, size_t in_len, size_t *consumed,
                    unsigned char *out, size_t out_cap, size_t *produced, char *error, size_t error_size) {
    *consumed = 0;
    *produced = 0;
    if (decoder->ended && in_len == 0) return PH_DECODE_END;
    if (decoder->coding == PH_CODING_GZIP && (decoder->ended || decoder->head_len > 0)) {
        if (in_len == 0) return PH_DECODE_OK; /* a next member's magic half in */
        return next_gzip_member(decoder, in, in_len, consumed, out, out_cap, produced, error, error_size);
    }
    if (decoder->ended && decoder->coding != PH_CODING_ZSTD) {
        decoder->after_end += in_len;
        /* Raw deflate has no trailer of its own; some servers still send zlib's 4-byte checksum
         * after it, which libcurl let pass. */
        if (decoder->raw && decoder->after_end <= 4) {
            *consumed = in_len;
            return PH_DECODE_END;
        }
        snprintf(error, error_size, "%zu bytes follow the end of the %s body", decoder->after_end, coding_name(decoder->coding));
        return PH_DECODE_ERROR;
    }
    switch (decoder->coding) {
    case PH_CODING_BR: return step_brotli(decoder, in, in_len, consumed, out, out_cap, produced, error, error_size);
    case PH_CODING_ZSTD: return step_zstd(decoder, in, in_len, consumed, out, out_cap, produced, error, error_size);
    default: return step_zlib(decoder, in, in_len, consumed, out, out_cap, produced, error, error_size);
    }
}

int ph_decoder_ended(const ph_decoder *decoder) { return decoder->ended; }

void ph_decoder_free(ph_decoder *decoder) {
    if (decoder == NULL) return;
    switch (decoder->coding) {
    case PH_CODING_BR: brotli.destroy(decoder->state); break;
    case PH_CODING_ZSTD: zstd.free(decoder->state); break;
    default:
        if (decoder->zlib_live) zlib.end(&decoder->z);
        break;
    }
    free(decoder);
}
