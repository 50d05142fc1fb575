/* Names itself "../evil": no plugin name (a bundle of it would be made outside its directory). */
#include "broken_plugin.h"
BROKEN_PLUGIN("../evil", 1, 0, sizeof(ph_plugin_descriptor), "names itself ../evil")
