/* A deliberately broken plugin library (test fixture): speaks ABI 2.0 */
#include <stddef.h>
#include "pluginhost.h"

static void *create(ph_bytes config, const ph_host_api *host, ph_error_buf *error) {
    (void)config; (void)host; (void)error;
    return (void *)1;
}
static void destroy(void *instance) { (void)instance; }

static const ph_plugin_descriptor descriptor = {
    .struct_size = sizeof(ph_plugin_descriptor),
    .abi_major = 2,
    .abi_minor = 0,
    .name = "badmajor",
    .version = "0.0.1",
    .summary = "speaks ABI 2.0",
    .license = "MIT",
    .build_signature = "c99",
    .create = create,
    .destroy = destroy,
};

const ph_plugin_descriptor *pluginhost_plugin_v1(void) { return &descriptor; }
