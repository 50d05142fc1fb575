// mkostemp, which Swift's Glibc module does not declare (ph_curl.h).
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>
#include "ph_curl.h"

int ph_mkostemp(char *path_template, int flags) { return mkostemp(path_template, flags); }
