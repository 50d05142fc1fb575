/* A plugin that misbehaves on purpose (test fixture). Configuration {"mode": M}:
 *   big-error     prepare fails with a 100 KB message (the host must truncate it safely)
 *   silent-error  prepare fails without writing a message
 *   repoint-error prepare fails pointing error->data at a message of its own (the host reads
 *                 only its own buffer)
 *   slow          prepare sleeps 1.5 s
 *   hang          prepare sleeps 300 s (a plugin that never answers, to the tests' patience)
 *   crlf          prepare tries to set a header whose value contains CR/LF (must be refused)
 *   bad-url       prepare tries to set an invalid URL (must be refused)
 *   bad-name      prepare tries to set a header named "X Bad" (must be refused)
 *   declare-extra create declares prepare and process, but only prepare is implemented (ABI 1.1;
 *                 the host must refuse the plugin)
 *   declare-retry create declares prepare and process (refused), then prepare alone: the refusal
 *                 stays, and the host refuses the plugin as for declare-extra
 *   declare-none  create declares no hook (ABI 1.1); prepare fails if it is ever called
 *   declare-late  prepare calls declare_hooks (outside create: must return PH_INVALID)
 *   unbuffered    prepare hands the setters that store bytes some that are no buffer (NULL
 *                 data with a length, a length of SIZE_MAX), through the 1.0 setters and the
 *                 checked ones of 1.5, then answers with what it saw: nothing may change
 *   timeouts      prepare sets the request's timeout to NaN, 0, -1 and -INFINITY (each must
 *                 change nothing), then to INFINITY (none), and answers with what it read back
 *   null-handles  prepare calls every accessor with a NULL request, result or host table (each
 *                 is none: nothing read, nothing changed, no crash) and answers with what each
 *                 returned
 *   log-then-fail prepare writes "the outer hook's own message", logs "nest", and fails
 *   refuse-create create writes "refused by create" and returns no instance */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pluginhost.h"

typedef struct { const ph_host_api *host; char mode[32]; } instance_t;

static void copy_mode(ph_bytes config, char *out, size_t capacity) {
    const char *key = "\"mode\"";
    size_t klen = strlen(key);
    out[0] = 0;
    for (size_t i = 0; i + klen < config.len; i++) {
        if (memcmp(config.data + i, key, klen) != 0) continue;
        size_t j = i + klen;
        while (j < config.len && config.data[j] != '"') j++;
        j++;
        size_t n = 0;
        while (j < config.len && config.data[j] != '"' && n + 1 < capacity) out[n++] = (char)config.data[j++];
        out[n] = 0;
        return;
    }
}

static void *create(ph_bytes config, const ph_host_api *host, ph_error_buf *error) {
    instance_t *instance = calloc(1, sizeof *instance);
    instance->host = host;
    copy_mode(config, instance->mode, sizeof instance->mode);
    if (strcmp(instance->mode, "refuse-create") == 0) {
        const char *message = "refused by create";
        size_t n = strlen(message) < error->capacity ? strlen(message) : error->capacity;
        memcpy(error->data, message, n);
        error->len = n;
        free(instance);
        return NULL;
    }
    if (host->abi_minor >= 1) {
        if (strcmp(instance->mode, "declare-extra") == 0) host->declare_hooks(host, PH_HOOK_PREPARE | PH_HOOK_PROCESS);
        if (strcmp(instance->mode, "declare-none") == 0) host->declare_hooks(host, 0);
        if (strcmp(instance->mode, "declare-retry") == 0) {
            host->declare_hooks(host, PH_HOOK_PREPARE | PH_HOOK_PROCESS);
            host->declare_hooks(host, PH_HOOK_PREPARE);
        }
    }
    return instance;
}

static void destroy(void *instance) { free(instance); }

static int32_t fail_with(ph_error_buf *error, const char *message) {
    size_t n = strlen(message);
    if (n > error->capacity) n = error->capacity;
    memcpy(error->data, message, n);
    error->len = n;
    return PH_ERROR;
}

/* Whether the request's body is `expected` now. */
static int body_is(const ph_host_api *host, ph_request *request, const char *expected) {
    ph_bytes body;
    if (host->request_body(request, &body) != PH_OK) return 0;
    return body.len == strlen(expected) && memcmp(body.data, expected, body.len) == 0;
}

/* The `unbuffered` mode (the request's body is "keep"; the store holds k = "secret"). */
static int32_t unbuffered(const ph_host_api *host, ph_request *request, ph_error_buf *error) {
    if (host->abi_minor < 5) return fail_with(error, "the host is older than ABI 1.5");
    const ph_bytes no_data = {NULL, 5}, endless = {(const uint8_t *)"x", (size_t)-1};
    const ph_bytes fine = {(const uint8_t *)"new", 3}, key = {(const uint8_t *)"k", 1};
    int respond = host->request_respond(request, 200, NULL, NULL, 0, no_data);
    host->request_set_body(request, no_data, 1);
    host->request_set_body(request, endless, 1);
    int kept = body_is(host, request, "keep");
    int checked_no_data = host->request_set_body_checked(request, no_data, 1);
    int checked_endless = host->request_set_body_checked(request, endless, 1);
    kept = kept && body_is(host, request, "keep");
    host->kv_set(host, key, endless, 0);
    host->kv_set(host, no_data, fine, 0);
    int store_checked = host->kv_set_checked(host, key, no_data, 0);
    uint8_t stored[16];
    int64_t stored_len = host->kv_get(host, key, stored, sizeof stored);
    int checked_fine = host->request_set_body_checked(request, fine, 1);
    char findings[256];
    snprintf(findings, sizeof findings, "respond %d, set_body kept %s, checked %d %d, store %.*s %d, then %d", respond,
             kept ? "yes" : "no", checked_no_data, checked_endless, (int)(stored_len > 0 && stored_len <= 16 ? stored_len : 0),
             (const char *)stored, store_checked, checked_fine);
    ph_bytes name = {(const uint8_t *)"X-Findings", 10}, value = {(const uint8_t *)findings, strlen(findings)}, body;
    if (host->request_body(request, &body) != PH_OK) body = (ph_bytes){NULL, 0};
    return host->request_respond(request, 200, &name, &value, 1, body) == PH_OK ? PH_OK : fail_with(error, "respond refused");
}

/* The `timeouts` mode: what request_timeout reads after each setter call. */
static int32_t timeouts(const ph_host_api *host, ph_request *request, ph_error_buf *error) {
    const double refused[] = {NAN, 0, -1, -INFINITY};
    char findings[256];
    int used = snprintf(findings, sizeof findings, "given %g:", host->request_timeout(request));
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        host->request_set_timeout(request, refused[i]);
        used += snprintf(findings + used, sizeof findings - (size_t)used, " %g", host->request_timeout(request));
    }
    host->request_set_timeout(request, INFINITY);
    snprintf(findings + used, sizeof findings - (size_t)used, ", then %g", host->request_timeout(request));
    ph_bytes name = {(const uint8_t *)"X-Findings", 10}, value = {(const uint8_t *)findings, strlen(findings)};
    return host->request_set_header(request, name, value) == PH_OK ? PH_OK : fail_with(error, "the findings were refused");
}

/* The `null-handles` mode: what every accessor returns for a NULL handle. */
static int32_t null_handles(const ph_host_api *host, ph_request *request, ph_error_buf *error) {
    if (host->abi_minor < 6) return fail_with(error, "the host is older than ABI 1.6");
    const ph_bytes name = {(const uint8_t *)"X-A", 3}, value = {(const uint8_t *)"1", 1}, empty = {NULL, 0};
    ph_bytes got = {(const uint8_t *)"untouched", 9}, other = got;
    ph_header_edit edit = {PH_EDIT_SET, name, value};
    size_t bad = 99;
    uint8_t out[8];
    char findings[512];
    /* The ones that answer nothing first: none may crash. */
    host->log(NULL, PH_LOG_ERROR, value);
    host->kv_set(NULL, name, value, 0);
    host->emit(NULL, name, &name, &value, 1);
    host->request_set_body(NULL, value, 1);
    host->request_set_timeout(NULL, 5);
    host->result_set_status(NULL, 200);
    host->result_set_body(NULL, value);
    snprintf(findings, sizeof findings,
             "request: method %zu url %zu set_method %d set_url %d header %d count %zu at %d set %d add %d remove %d "
             "headers %zu edit %d bad %zu body %d set_body %d timeout %g respond %d background %d; "
             "result: failure %d status %d header %d count %zu at %d set %d add %d remove %d body %zu set_body %d "
             "replace %d retry %d headers %zu request_headers %zu redirected %d; "
             "host: kv_get %lld kv_set %d declare %d subscribers %d; borrowed %.*s",
             host->request_method(NULL).len, host->request_url(NULL).len, host->request_set_method(NULL, value),
             host->request_set_url(NULL, value), host->request_header(NULL, name, 0, &got), host->request_header_count(NULL),
             host->request_header_at(NULL, 0, &got, &other), host->request_set_header(NULL, name, value),
             host->request_add_header(NULL, name, value), host->request_remove_header(NULL, name),
             host->request_headers(NULL, &got, &other, 1), host->request_edit_headers(NULL, &edit, 1, &bad), bad,
             host->request_body(NULL, &got), host->request_set_body_checked(NULL, value, 1), host->request_timeout(NULL),
             host->request_respond(NULL, 200, NULL, NULL, 0, empty), host->request_background(host, NULL, value),
             host->result_failure(NULL, &got), host->result_status(NULL), host->result_header(NULL, name, 0, &got),
             host->result_header_count(NULL), host->result_header_at(NULL, 0, &got, &other),
             host->result_set_header(NULL, name, value), host->result_add_header(NULL, name, value),
             host->result_remove_header(NULL, name), host->result_body(NULL).len, host->result_set_body_checked(NULL, value),
             host->result_replace(NULL, 200, NULL, NULL, 0, empty), host->result_retry(NULL, 0, empty, empty, 0),
             host->result_headers(NULL, &got, &other, 1), host->result_request_headers(NULL, &got, &other, 1),
             host->result_redirected(NULL), (long long)host->kv_get(NULL, name, out, sizeof out),
             host->kv_set_checked(NULL, name, value, 0), host->declare_hooks(NULL, PH_HOOK_PREPARE), host->has_subscribers(NULL),
             (int)got.len, (const char *)got.data);
    /* A NULL host table with a real request: refused too. */
    if (host->request_background(NULL, request, value) != PH_INVALID) return fail_with(error, "background with no host table");
    /* Nothing is written through an out-parameter for a NULL host table. */
    uint8_t sentinel[8] = {0};
    host->random_bytes(NULL, sentinel, sizeof sentinel);
    for (size_t i = 0; i < sizeof sentinel; i++) {
        if (sentinel[i] != 0) return fail_with(error, "random_bytes wrote through a NULL host table");
    }
    ph_bytes header = {(const uint8_t *)"X-Findings", 10}, text = {(const uint8_t *)findings, strlen(findings)};
    return host->request_respond(request, 200, &header, &text, 1, empty) == PH_OK ? PH_OK : fail_with(error, "respond refused");
}

static int32_t prepare(void *opaque, ph_request *request, const ph_context *context, ph_error_buf *error) {
    instance_t *self = opaque;
    const ph_host_api *host = self->host;
    (void)context;
    if (strcmp(self->mode, "big-error") == 0) {
        size_t size = 100 * 1024;
        char *message = malloc(size + 1);
        for (size_t i = 0; i < size; i++) message[i] = 'A' + (char)(i % 26);
        message[size] = 0;
        /* Writes honestly up to the capacity; also claims a huge length, which the host must clamp. */
        size_t n = size < error->capacity ? size : error->capacity;
        memcpy(error->data, message, n);
        error->len = size;
        free(message);
        return PH_ERROR;
    }
    if (strcmp(self->mode, "silent-error") == 0) return PH_ERROR;
    if (strcmp(self->mode, "repoint-error") == 0) {
        static char own[] = "a message in the plugin's own memory";
        error->data = (uint8_t *)own;
        error->len = sizeof own - 1;
        return PH_ERROR;
    }
    if (strcmp(self->mode, "declare-none") == 0) return fail_with(error, "prepare ran although create declared no hook");
    if (strcmp(self->mode, "declare-late") == 0) {
        return self->host->declare_hooks(self->host, 0) == PH_INVALID ? fail_with(error, "declare_hooks outside create: PH_INVALID")
                                                                       : fail_with(error, "declare_hooks outside create was accepted");
    }
    if (strcmp(self->mode, "slow") == 0) {
        struct timespec pause = {1, 500000000};
        nanosleep(&pause, NULL);
        return PH_OK;
    }
    if (strcmp(self->mode, "hang") == 0) {
        struct timespec pause = {300, 0};
        nanosleep(&pause, NULL);
        return PH_OK;
    }
    if (strcmp(self->mode, "crlf") == 0) {
        ph_bytes name = {(const uint8_t *)"X-Evil", 6}, value = {(const uint8_t *)"a\r\nInjected: yes", 16};
        if (host->request_set_header(request, name, value) != PH_OK) return fail_with(error, "the host refused a CR/LF header value");
        return PH_OK;
    }
    if (strcmp(self->mode, "bad-name") == 0) {
        ph_bytes name = {(const uint8_t *)"X Bad", 5}, value = {(const uint8_t *)"v", 1};
        if (host->request_set_header(request, name, value) != PH_OK) return fail_with(error, "the host refused a bad header name");
        return PH_OK;
    }
    if (strcmp(self->mode, "unbuffered") == 0) return unbuffered(host, request, error);
    if (strcmp(self->mode, "timeouts") == 0) return timeouts(host, request, error);
    if (strcmp(self->mode, "null-handles") == 0) return null_handles(host, request, error);
    if (strcmp(self->mode, "log-then-fail") == 0) {
        const char *message = "the outer hook's own message";
        size_t n = strlen(message) < error->capacity ? strlen(message) : error->capacity;
        memcpy(error->data, message, n);
        error->len = n;
        const ph_bytes nest = {(const uint8_t *)"nest", 4};
        host->log(host, PH_LOG_ERROR, nest);
        return PH_ERROR;
    }
    if (strcmp(self->mode, "bad-url") == 0) {
        ph_bytes url = {(const uint8_t *)"not a url", 9};
        if (host->request_set_url(request, url) != PH_OK) return fail_with(error, "the host refused an invalid URL");
        return PH_OK;
    }
    return PH_OK;
}

static const ph_plugin_descriptor descriptor = {
    .struct_size = sizeof(ph_plugin_descriptor),
    .abi_major = PH_ABI_MAJOR,
    .abi_minor = PH_ABI_MINOR,
    .name = "hostile",
    .version = "0.0.1",
    .summary = "Misbehaves on purpose (test fixture)",
    .license = "MIT",
    .build_signature = "c99",
    .create = create,
    .destroy = destroy,
    .prepare = prepare,
};

const ph_plugin_descriptor *pluginhost_plugin_v1(void) { return &descriptor; }
