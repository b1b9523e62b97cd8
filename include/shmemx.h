/*
 * shmemx.h - symheap's extensions to OpenSHMEM (libsymheap).
 */
#ifndef SYMHEAP_SHMEMX_H
#define SYMHEAP_SHMEMX_H

#include <shmem.h>

#ifdef __cplusplus
extern "C" {
#endif

/* shmemx_heap_base returns the address of PE pe's symmetric heap as this
 * PE maps it (the segment is mapped at the same address in every PE when
 * shmemx_same_address() is 1). */
void *shmemx_heap_base(int pe);
int shmemx_same_address(void);

#ifdef __cplusplus
}
#endif

#endif
