/* Aborts as soon as it is loaded (a constructor): whatever loads it dies with SIGABRT. For
 * pluginhost test, which must load it only in a child probe, and never when the manifest does not
 * enable it. */
#include <stdlib.h>
#include "broken_plugin.h"

__attribute__((constructor)) static void abort_when_loaded(void) { abort(); }

BROKEN_PLUGIN("abort", 1, 0, sizeof(ph_plugin_descriptor), "aborts when loaded")
