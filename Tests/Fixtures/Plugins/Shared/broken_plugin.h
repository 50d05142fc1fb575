/* A deliberately broken plugin library (test fixture): a valid create/destroy pair behind a
 * descriptor whose ABI version or size, name or version is wrong. */
#include <stddef.h>
#include "pluginhost.h"

static void *broken_create(ph_bytes config, const ph_host_api *host, ph_error_buf *error) {
    (void)config; (void)host; (void)error;
    return (void *)1;
}

static void broken_destroy(void *instance) { (void)instance; }

#define BROKEN_PLUGIN(NAME, MAJOR, MINOR, SIZE, SUMMARY)                         \
    BROKEN_PLUGIN_VERSION(NAME, "0.0.1", MAJOR, MINOR, SIZE, SUMMARY)

#define BROKEN_PLUGIN_VERSION(NAME, VERSION, MAJOR, MINOR, SIZE, SUMMARY)        \
    static const ph_plugin_descriptor descriptor = {                             \
        .struct_size = (SIZE), .abi_major = (MAJOR), .abi_minor = (MINOR),       \
        .name = (NAME), .version = (VERSION), .summary = (SUMMARY),              \
        .license = "MIT", .build_signature = "c99",                              \
        .create = broken_create, .destroy = broken_destroy,                      \
    };                                                                           \
    const ph_plugin_descriptor *pluginhost_plugin_v1(void) { return &descriptor; }
