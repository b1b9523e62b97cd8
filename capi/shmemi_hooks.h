//go:build symheap_capi

/* shmemi_hooks.h - the memory hooks' ring (hooks.c), read by the Go side
 * (export_hooks_unsafe.go). The kinds are memhook.Kind's values (checked
 * there). */
#ifndef SHMEMI_HOOKS_H
#define SHMEMI_HOOKS_H
#include <stdint.h>

#define SHMEMI_HOOK_FREE 1
#define SHMEMI_HOOK_CHUNK 2
#define SHMEMI_HOOK_UNMAP 3
#define SHMEMI_HOOK_REMOVE 4

struct shmemi_hook_event {
	uint64_t kind, start, end;
};

void shmemi_hooks_listen(int on);
/* Copies up to max events from *cursor on into out, advances *cursor;
 * *lost: some events were lost (report everything released). */
int shmemi_hooks_take(uint64_t *cursor, struct shmemi_hook_event *out, int max, int *lost);
#endif
