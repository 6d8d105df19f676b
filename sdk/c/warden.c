/* The SDK is header-only (weak definitions in warden.h); this file exists
 * so that builds listing sdk/c/warden.c keep working. */
#include "warden.h"
