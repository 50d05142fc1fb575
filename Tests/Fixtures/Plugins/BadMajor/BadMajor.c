/* Speaks ABI 2.0: refused by a 1.x host. */
#include "broken_plugin.h"
BROKEN_PLUGIN("badmajor", 2, 0, sizeof(ph_plugin_descriptor), "speaks ABI 2.0")
