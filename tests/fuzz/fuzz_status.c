/* dds_status_string called from C with any int: in C an enum object may hold any value of its
 * compatible integer type, so this is what a C caller or a binding can legally do. */
#include <dds/dds.h>

const char* fuzz_status_string_of_int(int32_t v) { return dds_status_string((dds_status)v); }
