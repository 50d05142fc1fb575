/*
 * pluginhost.h — the ABI between a PluginHost application and its plugins.
 *
 * Only C data crosses this boundary: each side keeps its own Swift (or C) types.
 *
 * VERSIONING
 *   A plugin is loaded when its ABI major equals the host's and its minor is not newer than
 *   the host's. Structs only ever grow at the end; every struct starts with its size, so a
 *   reader never touches fields the writer did not have.
 *
 * ENTRY POINT
 *   A plugin library exports exactly one symbol, PH_ENTRY_SYMBOL ("pluginhost_plugin_v1"):
 *       const ph_plugin_descriptor *pluginhost_plugin_v1(void);
 *   It returns a pointer to static, constant data and runs no plugin logic, so tools can list
 *   plugins safely. The host never unloads a library (dlclose) once loaded.
 *
 * OWNERSHIP AND LIFETIME
 *   - ph_bytes handed by the host to a plugin (getters, hook arguments) are BORROWED: valid
 *     until the hook returns or until the plugin calls a setter on the same handle.
 *   - ph_bytes handed by a plugin to the host (setters) are copied before the call returns.
 *   - Request, response, context and challenge handles are owned by the host and valid only
 *     during the hook call they were passed to.
 *   - A NULL request, result or host table is none: a getter reads nothing (empty bytes, a count
 *     of 0, PH_NOT_FOUND, a status of 0, INFINITY for a timeout, PH_FAILURE_OTHER for a
 *     failure, -1 from kv_get, 0 from has_subscribers and result_redirected), a setter changes
 *     nothing (PH_INVALID where it returns a status), and nothing is written through the
 *     out-parameters.
 *   - Errors are written by the plugin into a host-provided ph_error_buf (truncated to its
 *     capacity); nothing is ever freed across the boundary.
 *   - The instance returned by create() belongs to the plugin until destroy() is called.
 *   - Hooks may be called concurrently from several threads (different requests); a plugin
 *     must be thread-safe. Calls for one request are never concurrent with each other.
 *   - Nothing may unwind across this boundary: hooks report failure by return value.
 */
#ifndef PLUGINHOST_H
#define PLUGINHOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PH_ABI_MAJOR 1
#define PH_ABI_MINOR 6   /* 1.1 added failure codes 8 to 11, declare_hooks, has_subscribers,
                            request_headers and request_edit_headers; 1.2 request_background;
                            1.3 result_headers and result_request_headers; 1.4
                            ph_context.target_serial; 1.5 request_set_body_checked,
                            result_set_body_checked and kv_set_checked; 1.6 result_redirected and ph_challenge.is_proxy */
#define PH_ENTRY_SYMBOL "pluginhost_plugin_v1"

/* Fixed-width integer types for the codes below (not C enums: an enum's size is the compiler's
 * choice, and a newer minor may add values an older reader must be able to receive). */
typedef int32_t ph_status;              /* PH_OK, PH_ERROR, PH_INVALID, PH_NOT_FOUND */
typedef int32_t ph_log_level;           /* PH_LOG_* */
typedef int32_t ph_failure_kind;        /* PH_FAILURE_*; readers treat an unknown value as PH_FAILURE_OTHER */
typedef int32_t ph_credential_answer;   /* PH_CREDENTIAL_*; the host treats an unknown value as PH_CREDENTIAL_DEFAULT */

/* Return codes of hooks and setters (ph_status). */
#define PH_OK 0             /* proceed */
#define PH_ERROR 1          /* failed: the message is in the error buffer */
#define PH_INVALID 2        /* a setter refused its input (bad header name/value, bad URL) */
#define PH_NOT_FOUND 3      /* a getter found nothing */

/* Log levels for ph_host_api.log (ph_log_level). */
#define PH_LOG_DEBUG 0
#define PH_LOG_INFO 1
#define PH_LOG_WARNING 2
#define PH_LOG_ERROR 3

/* Transport failure kinds (ph_failure_kind, from ph_host_api.result_failure). */
#define PH_FAILURE_NONE 0
#define PH_FAILURE_TIMED_OUT 1
#define PH_FAILURE_CANCELLED 2
#define PH_FAILURE_CANNOT_CONNECT 3
#define PH_FAILURE_CONNECTION_LOST 4
#define PH_FAILURE_BAD_RESPONSE 5
#define PH_FAILURE_INTERCEPTOR_FAILED 6
#define PH_FAILURE_OTHER 7
/* Added in ABI 1.1 (a plugin built against 1.0 receives them and, as the rule above says, reads
 * them as PH_FAILURE_OTHER; the message says what happened). */
#define PH_FAILURE_TLS_HANDSHAKE 8          /* no common protocol or cipher, client certificate refused */
#define PH_FAILURE_CERTIFICATE_UNTRUSTED 9  /* unknown issuer, expired, or for another host */
#define PH_FAILURE_PIN_MISMATCH 10          /* the server's public key matches no pinned key */
#define PH_FAILURE_RESPONSE_TOO_LARGE 11    /* the body (or download, or decoded body) passed its limit */

/* Answers to an authentication challenge (ph_credential_answer, from ph_plugin_descriptor.credential). */
#define PH_CREDENTIAL_DEFAULT 0     /* no opinion: ask the next plugin */
#define PH_CREDENTIAL_USE 1         /* answer with the user and password given */
#define PH_CREDENTIAL_REJECT 2      /* deliver the 401 as the response */
#define PH_CREDENTIAL_CANCEL 3      /* cancel the request */

/* Hook bits for ph_host_api.declare_hooks (added in ABI 1.1). */
#define PH_HOOK_PREPARE 0x1u
#define PH_HOOK_WILL_SEND 0x2u
#define PH_HOOK_DID_RECEIVE 0x4u
#define PH_HOOK_PROCESS 0x8u
#define PH_HOOK_CREDENTIAL 0x10u

/* A byte string: not NUL-terminated; UTF-8 for text. Bytes a plugin hands the host must be a
 * buffer: `len` at most PTRDIFF_MAX (not (size_t)-1 from a size that went below 0), and `data`
 * not NULL unless `len` is 0. The host reads bytes that are no buffer as none, and its setters
 * refuse them (PH_INVALID, or no change for the setters of 1.0 that return nothing). */
typedef struct ph_bytes {
    const uint8_t *data;
    size_t len;
} ph_bytes;

/* One header edit for ph_host_api.request_edit_headers (added in ABI 1.1). */
#define PH_EDIT_SET 0       /* replace every field named `name` with one field `value` */
#define PH_EDIT_ADD 1       /* add a field `name: value` */
#define PH_EDIT_REMOVE 2    /* remove every field named `name` (`value` is ignored) */
#define PH_MAX_HEADER_EDITS 256   /* the most edits one call takes */
typedef struct ph_header_edit {
    int32_t op;             /* PH_EDIT_* */
    ph_bytes name;
    ph_bytes value;
} ph_header_edit;

/* Where a plugin writes an error message. The plugin writes at most `capacity` bytes to `data`
 * and sets `len`; a longer message is truncated. The host reads only its own buffer: a plugin
 * that points `data` elsewhere has its message ignored ("its message was not written into the
 * host's buffer"). */
typedef struct ph_error_buf {
    uint8_t *data;
    size_t capacity;
    size_t len;
} ph_error_buf;

/* Opaque host-owned handles. */
typedef struct ph_request ph_request;   /* the request being prepared or sent */
typedef struct ph_result ph_result;     /* one attempt's outcome: a response or a failure */

/* What a hook knows about the request's target. Borrowed, valid during the hook. */
typedef struct ph_context {
    uint32_t struct_size;
    uint64_t request_id;        /* unique per request in the process, the same for all attempts */
    int32_t attempt;            /* 1 for the first attempt */
    ph_bytes target_method;     /* e.g. "GET" */
    ph_bytes target_base_url;
    ph_bytes target_path;
    size_t option_count;        /* the target's pluginOptions, sorted by key */
    const ph_bytes *option_keys;
    const ph_bytes *option_values;
    /* Added in ABI 1.4 (read it only when struct_size >= PH_CONTEXT_SIZE_V1_4; an older host's
     * context ends before it). A number the host gives one laid-out target (method, base URL,
     * path and options): never 0, never reused in the process, and the target's bytes never
     * change under it. Two contexts with the same serial have byte-for-byte the same target, so
     * a plugin that keeps what it decoded from the last target compares this number instead of
     * the bytes. Contexts with different serials may still have equal targets. */
    uint64_t target_serial;
} ph_context;

/* The size of a context that carries target_serial (ABI 1.4). */
#define PH_CONTEXT_SIZE_V1_4 (offsetof(ph_context, target_serial) + sizeof(uint64_t))

/* An HTTP authentication challenge. Borrowed, valid during the hook. */
typedef struct ph_challenge {
    uint32_t struct_size;
    ph_bytes host;
    int32_t port;
    ph_bytes scheme;            /* "http" or "https" */
    ph_bytes realm;             /* empty when the server named none */
    ph_bytes method;            /* "Basic", "Digest", ... */
    int32_t previous_failure_count;
    /* Added in ABI 1.6 (read it only from a host whose abi_minor is 6 or more: it sits in what
     * was a 1.5 challenge's tail padding, so struct_size, 88 on a 64-bit host of either minor,
     * cannot tell them apart; later additions go where they change the size): 1 for a proxy's 407
     * (Proxy-Authenticate; host, port and scheme are then still the request's), 0 for a 401.
     * A plugin that holds server passwords answers no proxy with them. A plugin whose descriptor
     * says a minor below 6 is never asked about a proxy's 407 (it could not tell it from a 401). */
    int32_t is_proxy;
} ph_challenge;

/* The host's services and accessors. One table per plugin instance, passed to create() and
 * valid until destroy() returns. Functions take the table itself as their first argument. */
typedef struct ph_host_api ph_host_api;
struct ph_host_api {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
    void *host_data;                    /* the host's; plugins do not touch it */

    /* Services. */
    void (*log)(const ph_host_api *host, ph_log_level level, ph_bytes message);
    /* Copies the value of `key` into out[0..capacity) and returns its full length, or -1 when
     * unset (or when `key` is no buffer). Call again with a larger buffer when the result exceeds
     * `capacity`. */
    int64_t (*kv_get)(const ph_host_api *host, ph_bytes key, uint8_t *out, size_t capacity);
    /* Stores a value; `remove` non-zero removes the key instead. Bytes that are no buffer (see
     * kv_set_checked) change nothing. */
    void (*kv_set)(const ph_host_api *host, ph_bytes key, ph_bytes value, int32_t remove);
    /* Sends an event with `count` key/value fields to the app's subscribers. */
    void (*emit)(const ph_host_api *host, ph_bytes name, const ph_bytes *keys, const ph_bytes *values, size_t count);
    double (*now)(const ph_host_api *host);                 /* seconds since 1970 */
    uint64_t (*monotonic_ns)(const ph_host_api *host);
    void (*random_bytes)(const ph_host_api *host, uint8_t *out, size_t count);

    /* Request accessors (prepare, will_send). Getters return borrowed bytes. */
    ph_bytes (*request_method)(ph_request *request);
    ph_status (*request_set_method)(ph_request *request, ph_bytes method);     /* PH_OK; PH_INVALID unless a token */
    ph_bytes (*request_url)(ph_request *request);
    ph_status (*request_set_url)(ph_request *request, ph_bytes url);           /* PH_INVALID unless absolute http(s) */
    /* The index-th value of header `name` (case-insensitive): PH_OK or PH_NOT_FOUND. */
    ph_status (*request_header)(ph_request *request, ph_bytes name, size_t index, ph_bytes *value);
    size_t (*request_header_count)(ph_request *request);
    /* The index-th field in order: PH_OK, or PH_NOT_FOUND past request_header_count. Constant time. */
    ph_status (*request_header_at)(ph_request *request, size_t index, ph_bytes *name, ph_bytes *value);
    /* Replaces every field named `name`; PH_INVALID for a non-token name, or a value with CR, LF or
     * NUL or that is no buffer. */
    ph_status (*request_set_header)(ph_request *request, ph_bytes name, ph_bytes value);
    ph_status (*request_add_header)(ph_request *request, ph_bytes name, ph_bytes value);    /* as request_set_header */
    ph_status (*request_remove_header)(ph_request *request, ph_bytes name);  /* PH_OK; PH_INVALID for a non-token name */
    /* PH_OK with the body, or PH_NOT_FOUND when there is none. */
    ph_status (*request_body)(ph_request *request, ph_bytes *body);
    /* Replaces the body (`present` 0: no body). Bytes that are no buffer (see
     * request_set_body_checked) leave the body as it was. */
    void (*request_set_body)(ph_request *request, ph_bytes body, int32_t present);
    /* The timeout in seconds; INFINITY for none (a request whose timeout is 0, negative or NaN
     * has none, and reads so). */
    double (*request_timeout)(ph_request *request);
    /* Replaces the timeout: a positive number of seconds, or INFINITY for none. Zero, a negative
     * number or NaN changes nothing (read request_timeout back to know). */
    void (*request_set_timeout)(ph_request *request, double seconds);
    /* From prepare only: answer the request with this response (a short-circuit). PH_OK;
     * PH_INVALID outside prepare, for a status outside 100...999, an invalid header, or a body
     * that is no buffer. */
    ph_status (*request_respond)(ph_request *request, int32_t status, const ph_bytes *header_names,
                               const ph_bytes *header_values, size_t header_count, ph_bytes body);

    /* Result accessors (did_receive, process). */
    /* PH_FAILURE_NONE when the result is a response; otherwise the kind, with the message. */
    ph_failure_kind (*result_failure)(ph_result *result, ph_bytes *message);
    int32_t (*result_status)(ph_result *result);                              /* 0 for a failure */
    /* Replaces the status; a status outside 100...999, or a failure, changes nothing (read
     * result_status back to know). */
    void (*result_set_status)(ph_result *result, int32_t status);
    /* As the request's: PH_OK or PH_NOT_FOUND (also for a failure, which has no headers). */
    ph_status (*result_header)(ph_result *result, ph_bytes name, size_t index, ph_bytes *value);
    size_t (*result_header_count)(ph_result *result);
    ph_status (*result_header_at)(ph_result *result, size_t index, ph_bytes *name, ph_bytes *value);
    /* PH_OK; PH_INVALID for a failure (no response to edit) or an invalid name or value. */
    ph_status (*result_set_header)(ph_result *result, ph_bytes name, ph_bytes value);
    ph_status (*result_add_header)(ph_result *result, ph_bytes name, ph_bytes value);
    ph_status (*result_remove_header)(ph_result *result, ph_bytes name);
    ph_bytes (*result_body)(ph_result *result);
    /* Replaces the body; nothing for a failure. Bytes that are no buffer leave it as it was. */
    void (*result_set_body)(ph_result *result, ph_bytes body);
    /* From process only: replace the result (failure or not) with this response. PH_OK;
     * PH_INVALID outside process, for a status outside 100...999, an invalid header, or a body
     * that is no buffer. */
    ph_status (*result_replace)(ph_result *result, int32_t status, const ph_bytes *header_names,
                              const ph_bytes *header_values, size_t header_count, ph_bytes body);
    /* From process only: send the request again after `delay` seconds; when `refresh_key` is
     * not empty the host first refreshes that credential (rejected value: `stale_value`,
     * `has_stale` non-zero when known). PH_OK; PH_INVALID outside process, for a negative or
     * non-finite delay, or when `refresh_key` (or a known `stale_value`) is no buffer. A process
     * that calls both result_replace and result_retry retries (the replacement is dropped). */
    ph_status (*result_retry)(ph_result *result, double delay, ph_bytes refresh_key, ph_bytes stale_value, int32_t has_stale);

    /* Added in ABI 1.1 (a plugin built against 1.0 never reads past result_retry; a 1.1 plugin
     * checks host->abi_minor >= 1 before calling these). */

    /* From create only: the hooks this instance needs, as PH_HOOK_* bits. The host never calls
     * the others on this instance (e.g. a logger configured "off" declares none). Without the
     * call, every hook the descriptor implements is called. Returns PH_OK; PH_INVALID when
     * called outside create, or when a bit names a hook the descriptor does not implement (the
     * host then refuses the plugin: descriptorInvalid, naming the bits). */
    ph_status (*declare_hooks)(const ph_host_api *host, uint32_t hooks);
    /* 1 when at least one subscriber listens for events, else 0. Cheap (one atomic read): call
     * it before building an event, and skip the event when it returns 0. */
    int32_t (*has_subscribers)(const ph_host_api *host);
    /* Every header field of the request in one call (prepare, will_send): writes the first
     * min(count, capacity) names and values, in order, into names[] and values[] and returns
     * count, the number of fields (call again with larger arrays when count > capacity). The
     * bytes are borrowed: valid until the hook returns or a setter is called. */
    size_t (*request_headers)(ph_request *request, ph_bytes *names, ph_bytes *values, size_t capacity);
    /* Several header edits in one call, applied in order, all or none. Returns PH_OK; or
     * PH_INVALID, applying none, with *bad_index (when not NULL) set to the first refused edit:
     * an unknown op, a name that is not a token, a value with CR, LF or NUL, or count above
     * PH_MAX_HEADER_EDITS (then *bad_index is PH_MAX_HEADER_EDITS). The edits may point into
     * bytes request_headers lent (a field removed by the name read): they are copied before
     * those are released. */
    ph_status (*request_edit_headers)(ph_request *request, const ph_header_edit *edits, size_t count, size_t *bad_index);

    /* Added in ABI 1.2 (a plugin checks host->abi_minor >= 2 before calling it). */

    /* From prepare only: when the prepare phase is over and none of it failed, the host sends
     * the same request (as it was before any prepare ran) once more, in the background
     * (concurrently with the rest of this exchange, under a request id of its own), through the
     * whole chain, with this plugin's target option (pluginOptions[<plugin name>]) set to
     * `option`. Nobody waits for it: its outcome reaches the hooks like any other and is then
     * dropped (this is how a cache serves a stale response and revalidates it: RFC 5861
     * stale-while-revalidate). At most one per plugin and exchange: an attempt after a retry
     * that asks again is answered PH_OK, and nothing more is sent. PH_OK; PH_INVALID outside
     * prepare, from a background exchange, when this plugin already asked in this attempt, or
     * when `option` is no buffer. Asked and answered PH_OK, nothing is sent either for a request
     * whose body is a stream (read once, by the exchange that asked) or for an exchange
     * cancelled before its prepare phase ended. */
    ph_status (*request_background)(const ph_host_api *host, ph_request *request, ph_bytes option);

    /* Added in ABI 1.3 (a plugin checks host->abi_minor >= 3 before calling these). */

    /* Every header field of the response in one call (did_receive, process), as request_headers
     * gives a request's: writes the first min(count, capacity) names and values, in order, into
     * names[] and values[] and returns count (call again with larger arrays when count >
     * capacity); 0 for a failure, which has no response. The bytes are borrowed: valid until the
     * hook returns or a setter of this result is called. */
    size_t (*result_headers)(ph_result *result, ph_bytes *names, ph_bytes *values, size_t capacity);
    /* The header fields of the request this response answers, as the request phase left them
     * (after every will_send that ran: for a request a prepare answered, the will_send of the
     * plugins before that one, which run after the answer), with the Authorization the host
     * sent answering the origin's challenge (a credential hook's answer to a 401), in the same
     * way: a plugin that
     * needs the request as sent only when the response comes (a cache's Vary, credentials
     * added after its lookup) can then leave will_send out. After a redirect to another
     * origin (on the way, even if later ones came back) they are the last hop's: without
     * Authorization and Cookie, which the transports left behind. Returns count; 0 for a
     * failure, which has no response. The bytes are borrowed: valid until the hook returns. */
    size_t (*result_request_headers)(ph_result *result, ph_bytes *names, ph_bytes *values, size_t capacity);

    /* Added in ABI 1.5 (a plugin checks host->abi_minor >= 5 before calling these). The setters
     * of 1.0 that store bytes and return nothing change nothing when given bytes that are no
     * buffer (see ph_bytes), and the plugin cannot tell. These do the same and say so. */

    /* As request_set_body: PH_OK; PH_INVALID, the body unchanged, when `present` is non-zero and
     * `body` is no buffer. */
    ph_status (*request_set_body_checked)(ph_request *request, ph_bytes body, int32_t present);
    /* As result_set_body: PH_OK; PH_INVALID, nothing changed, for a failure (no response) or a
     * body that is no buffer. */
    ph_status (*result_set_body_checked)(ph_result *result, ph_bytes body);
    /* As kv_set: PH_OK; PH_INVALID, the store unchanged, when the key, or the value of a store
     * (remove 0), is no buffer. */
    ph_status (*kv_set_checked)(const ph_host_api *host, ph_bytes key, ph_bytes value, int32_t remove);

    /* Added in ABI 1.6 (a plugin checks host->abi_minor >= 6 before calling it). */

    /* 1 when the transport followed at least one redirect to get this response: it answers
     * another URL than the request's (a cache stores nothing for it under the request's URL);
     * 0 otherwise, for a response a hook made, and for a failure. */
    int32_t (*result_redirected)(ph_result *result);
};

/* Hooks. Each is optional (NULL when the plugin does not implement it). Hooks returning ph_status
 * return PH_OK, or PH_ERROR with a message in `error`. */
typedef struct ph_plugin_descriptor {
    uint32_t struct_size;               /* sizeof(ph_plugin_descriptor) as the plugin knew it */
    uint16_t abi_major;                 /* PH_ABI_MAJOR the plugin was built against */
    uint16_t abi_minor;
    const char *name;                   /* NUL-terminated, e.g. "logger"; must match the bundle */
    const char *version;                /* e.g. "1.0.0"; required (NULL or blank: refused) */
    const char *summary;
    const char *license;                /* SPDX identifier, e.g. "MIT" */
    const char *build_signature;        /* compiler and target, shown by tools */

    /* Creates an instance from its JSON configuration (an object; "{}" when empty). Returns
     * NULL and writes a message into `error` when the configuration is refused. */
    void *(*create)(ph_bytes config_json, const ph_host_api *host, ph_error_buf *error);
    void (*destroy)(void *instance);

    ph_status (*prepare)(void *instance, ph_request *request, const ph_context *context, ph_error_buf *error);
    ph_status (*will_send)(void *instance, ph_request *request, const ph_context *context, ph_error_buf *error);
    ph_status (*did_receive)(void *instance, ph_result *result, const ph_context *context, ph_error_buf *error);
    ph_status (*process)(void *instance, ph_result *result, const ph_context *context, ph_error_buf *error);
    /* Returns a PH_CREDENTIAL_* answer; for PH_CREDENTIAL_USE writes user and password into
     * the host's buffers (each `capacity` bytes: 65,536 from this host; hosts before it gave
     * 1,024) and their lengths into the *_len arguments. An answer that does not fit cannot be
     * given: return PH_CREDENTIAL_REJECT (the Swift SDK logs why at the error level). */
    ph_credential_answer (*credential)(void *instance, const ph_challenge *challenge, const ph_context *context,
                          uint8_t *user, size_t *user_len, uint8_t *password, size_t *password_len, size_t capacity);
} ph_plugin_descriptor;

/* The size of the first published descriptor (ABI 1.0): hosts refuse anything smaller. */
#define PH_DESCRIPTOR_SIZE_V1_0 (offsetof(ph_plugin_descriptor, credential) + sizeof(void *))

/* The one exported symbol's type. */
typedef const ph_plugin_descriptor *(*ph_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* PLUGINHOST_H */
