/* A plugin written in plain C against pluginhost.h (test fixture), as built against ABI 1.0:
 * its descriptor says 1.0 and has the 1.0 size, and it calls nothing 1.1 added.
 * prepare appends "cplugin" to X-Order; process appends it to X-Response-Order; credential answers
 * every Basic or Digest challenge with user "c-user", password "c-secret" (a 1.0 challenge does not
 * tell a proxy's 407 from a server's 401: the host must not ask it about a proxy).
 * Configuration: {} or {"fail": "message"} (create refuses with that message). */
#include <stdlib.h>
#include <string.h>
#include "pluginhost.h"

typedef struct { const ph_host_api *host; } instance_t;

static void set_error(ph_error_buf *error, const char *message) {
    size_t n = strlen(message);
    if (n > error->capacity) n = error->capacity;
    memcpy(error->data, message, n);
    error->len = n;
}

/* Finds "fail":"..." in the config, a deliberately tiny parser for a fixture. */
static int config_fail(ph_bytes config, char *out, size_t capacity) {
    const char *key = "\"fail\"";
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen < config.len; i++) {
        if (memcmp(config.data + i, key, klen) != 0) continue;
        size_t j = i + klen;
        while (j < config.len && config.data[j] != '"') j++;
        size_t start = ++j, n = 0;
        while (j < config.len && config.data[j] != '"' && n + 1 < capacity) out[n++] = (char)config.data[j++];
        out[n] = 0;
        return start <= config.len;
    }
    return 0;
}

static void *create(ph_bytes config, const ph_host_api *host, ph_error_buf *error) {
    char message[256];
    if (config_fail(config, message, sizeof message)) {
        set_error(error, message);
        return NULL;
    }
    instance_t *instance = malloc(sizeof *instance);
    instance->host = host;
    return instance;
}

static void destroy(void *instance) { free(instance); }

/* Appends "cplugin" to a comma-separated header value. */
static ph_bytes append_name(ph_bytes existing, int found, char *buffer, size_t capacity) {
    const char *name = "cplugin";
    size_t n = 0;
    if (found && existing.len + 1 + strlen(name) < capacity) {
        memcpy(buffer, existing.data, existing.len);
        n = existing.len;
        buffer[n++] = ',';
    }
    memcpy(buffer + n, name, strlen(name));
    n += strlen(name);
    return (ph_bytes){(const uint8_t *)buffer, n};
}

static int32_t prepare(void *instance, ph_request *request, const ph_context *context, ph_error_buf *error) {
    const ph_host_api *host = ((instance_t *)instance)->host;
    ph_bytes name = {(const uint8_t *)"X-Order", 7}, value;
    char buffer[512];
    int found = host->request_header(request, name, 0, &value) == PH_OK;
    if (host->request_set_header(request, name, append_name(value, found, buffer, sizeof buffer)) != PH_OK) {
        set_error(error, "cannot set X-Order");
        return PH_ERROR;
    }
    (void)context;
    return PH_OK;
}

static int32_t process(void *instance, ph_result *result, const ph_context *context, ph_error_buf *error) {
    const ph_host_api *host = ((instance_t *)instance)->host;
    ph_bytes message;
    if (host->result_failure(result, &message) != PH_FAILURE_NONE) return PH_OK;
    ph_bytes name = {(const uint8_t *)"X-Response-Order", 16}, value;
    char buffer[512];
    int found = host->result_header(result, name, 0, &value) == PH_OK;
    host->result_set_header(result, name, append_name(value, found, buffer, sizeof buffer));
    (void)context;
    (void)error;
    return PH_OK;
}

static ph_credential_answer credential(void *instance, const ph_challenge *challenge, const ph_context *context, uint8_t *user,
                                       size_t *user_len, uint8_t *password, size_t *password_len, size_t capacity) {
    (void)instance;
    (void)context;
    if (challenge->previous_failure_count > 0 || capacity < 16) return PH_CREDENTIAL_DEFAULT;
    memcpy(user, "c-user", 6);
    *user_len = 6;
    memcpy(password, "c-secret", 8);
    *password_len = 8;
    return PH_CREDENTIAL_USE;
}

static const ph_plugin_descriptor descriptor = {
    .struct_size = PH_DESCRIPTOR_SIZE_V1_0,
    .abi_major = PH_ABI_MAJOR,
    .abi_minor = 0,
    .name = "cplugin",
    .version = "1.0.0",
    .summary = "A plugin written in C (test fixture)",
    .license = "MIT",
    .build_signature = "c99",
    .create = create,
    .destroy = destroy,
    .prepare = prepare,
    .process = process,
    .credential = credential,
};

const ph_plugin_descriptor *pluginhost_plugin_v1(void) { return &descriptor; }
