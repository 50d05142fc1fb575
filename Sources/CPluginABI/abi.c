// The ABI is the header (include/pluginhost.h); this file only gives the C target a translation unit.
#include "pluginhost.h"

typedef int ph_abi_translation_unit;
