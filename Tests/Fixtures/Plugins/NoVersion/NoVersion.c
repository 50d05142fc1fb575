/* Gives an empty version: a bundle of it would have a plugin.json every load refuses. */
#include "broken_plugin.h"
BROKEN_PLUGIN_VERSION("noversion", "", 1, 0, sizeof(ph_plugin_descriptor), "gives no version")
