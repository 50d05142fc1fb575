/* Claims a 16-byte descriptor: too small for ABI 1.0. */
#include "broken_plugin.h"
BROKEN_PLUGIN("smalldescriptor", 1, 0, 16, "claims a 16-byte descriptor")
