// glibc's malloc statistics and trimming (malloc.h is not part of Swift's Glibc module).
#include <malloc.h>
