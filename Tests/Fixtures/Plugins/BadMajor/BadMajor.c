/* Speaks ABI 2.0: refused by a 1.x host. Its descriptor claims 8 bytes, the part every major
 * shares (size and version): a host of another major reads no more of it. */
#include "broken_plugin.h"
BROKEN_PLUGIN("badmajor", 2, 0, 8, "speaks ABI 2.0")
