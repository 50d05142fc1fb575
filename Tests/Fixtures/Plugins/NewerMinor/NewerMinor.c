/* Needs ABI 1.7: refused by a 1.0 host. */
#include "broken_plugin.h"
BROKEN_PLUGIN("newerminor", 1, 7, sizeof(ph_plugin_descriptor), "needs ABI 1.7")
