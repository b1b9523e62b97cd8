//go:build symheap_capi

/* shmemi_go.h - the functions the Go runtime exports to the C library
 * (export_unsafe.go). err/n: a buffer for the error message, which says "symheap:". */
#ifndef SHMEMI_GO_H
#define SHMEMI_GO_H
#include <stddef.h>
#include <stdint.h>

struct shmemi_layout;
extern int symheapc_go_init(struct shmemi_layout *l, char *err, size_t n);
extern int symheapc_go_finalize(char *err, size_t n);
struct shmemi_smalloc_info;
extern int symheapc_go_smalloc(struct shmemi_smalloc_info *out, uint64_t size, char *err, size_t n); /* smalloc.c */
extern int symheapc_go_shared_free(void *p, char *err, size_t n);
extern void symheapc_go_global_exit(int code);
extern int symheapc_go_pe_alive(int pe);
/* The allocation calls first give back the flush[nflush] blocks (offsets
 * in the heap) whose Free symalloc.c exchanged already. */
extern void *symheapc_go_malloc(int kind, size_t size, size_t align, long hints, uint64_t *flush, int nflush,
				char *err, size_t n);
extern void *symheapc_go_realloc(void *p, size_t size, uint64_t *flush, int nflush, char *err, size_t n);
extern int symheapc_go_free_exchanged(uint64_t *offs, int n, char *err, size_t errn);
/* The message of this PE's last allocation phase, found different on some
 * PE by symalloc.c (out compared only if with_out). */
extern void symheapc_go_diverged(int with_out, char *err, size_t n);
extern int symheapc_go_free(void *p, char *err, size_t n);
/* The registration cache (export_reg_unsafe.go): get returns 0 and the
 * handle in *out, or nonzero with the message in err; valid returns 1, 0,
 * or -1 for a handle not held; put returns 0 or -1 for a handle not held. */
extern int symheapc_go_reg_get(uintptr_t addr, size_t len, uint64_t *out, char *err, size_t n);
extern int symheapc_go_reg_valid(uint64_t h);
extern int symheapc_go_reg_put(uint64_t h);
extern int symheapc_go_barrier_all(char *err, size_t n);
extern int symheapc_go_check_peers(char *err, size_t n);
/* Moves this PE onto a core of its own if it may (shmsync.Place): a wait
 * found its peer running on its core. Returns 1 if it moved. */
extern int symheapc_go_place(void);
/* Fills err with the divergence of this PE's call (record mine) that met
 * PE q's call of record theirs (internal/calls, Tracker.Differs). */
extern void symheapc_go_differs(uint64_t mine, uint64_t theirs, int q, char *err, size_t n);
extern int symheapc_go_team_sync(int id, char *err, size_t n);
/* The team's barrier as a step of the caller's collective call on it: its
 * lines carry the call's record (internal/team, SyncInCall). */
extern int symheapc_go_team_sync_in_call(int id, char *err, size_t n);
/* Splits team parent (start, stride, size over its ranks). Returns the new
 * team's id (>= 0) and fills world[] with its members' world PEs, -1 when
 * this PE is not a member, -2 on error. */
extern int symheapc_go_team_split(int parent, int start, int stride, int size, int *world, char *err, size_t n);
extern int symheapc_go_team_destroy(int id, char *err, size_t n);
/* The runtime's team collectives, for a job with Go PEs (coll.c): kind
 * SHMEMI_GO_COLL_*; n bytes each (fcollect: dst holds n per member). */
enum { SHMEMI_GO_COLL_BROADCAST, SHMEMI_GO_COLL_FCOLLECT, SHMEMI_GO_COLL_ALLTOALL };
extern int symheapc_go_collective(int kind, int id, void *dst, void *src, size_t n, int root, char *err, size_t en);
extern int symheapc_go_reduce(int id, void *dst, void *src, size_t n, size_t size,
			      void (*combine)(void *acc, const void *in, size_t n), char *err, size_t en);

/* A job on several nodes (far.c): operations on PE pe of another node,
 * on region r (SHMEMI_REGION_*) at offset off; amo is SHMEMI_AMO_*
 * (shmem_internal.h), its old value in *old. */
enum { SHMEMI_REGION_HEAP, SHMEMI_REGION_STATIC };
extern int symheapc_go_far_put(int r, int pe, uint64_t off, void *src, size_t n, int nbi, char *err, size_t en);
extern int symheapc_go_far_get(int r, void *dst, int pe, uint64_t off, size_t n, char *err, size_t en);
extern int symheapc_go_far_amo(int r, int amo, int pe, uint64_t off, int size, uint64_t v, uint64_t cmp,
			       uint64_t *old, char *err, size_t en);
extern int symheapc_go_far_fence(char *err, size_t en);
extern int symheapc_go_far_quiet(char *err, size_t en);

void shmemi_flush_stdio(void);
#endif
