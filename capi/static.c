//go:build symheap_capi

/*
 * static.c - the program's static data (.data and .bss) made symmetric.
 *
 * OpenSHMEM says global and static variables are symmetric: another PE may
 * put into them, use them in atomics and as locks. Here:
 *
 *   1. Before main, while the process has a single thread (a constructor
 *      of priority 101, ahead of the Go runtime's own initialisation in
 *      the static library), the writable pages of the executable that
 *      follow its RELRO part (.got.plt, .data, .bss) are copied into a
 *      memfd and the memfd is mapped over them, MAP_SHARED|MAP_FIXED:
 *      the program sees the same bytes at the same addresses, now in
 *      shareable memory. Nothing else runs in the process then, so no
 *      store is lost between the copy and the mapping.
 *   2. At shmem_init every PE publishes its pid, the memfd's descriptor
 *      number and the window's size in its control block (the runtime's
 *      Init stores them before its barrier: cabi.Static); after it
 *      every PE opens every other C PE's memfd through /proc/PID/fd/N and
 *      maps it. PE p's copy of a static object at lo+off is then
 *      static_peer[p]+off: the base-plus-offset addressing of the heap,
 *      so PIE executables work (their static data lie at a different
 *      address in every PE). The descriptor stays open until every PE
 *      has left shmem_init (shmemi_static_close, after the runtime's
 *      Close barrier), so that its number names the memfd whenever a
 *      peer opens it.
 *   3. A Go PE of the job (docs/c.md, "Go and C in one job") has no
 *      copy of a C program's static data: static_peer is NULL for it,
 *      and an access is an error naming it.
 *
 * What it covers: the executable's own .data and .bss (and .got.plt,
 * which shares their pages). Not covered: shared libraries' data (a
 * library's globals are not symmetric), thread-local data (.tdata/.tbss
 * are per thread; the TLS initialisation image lies in the RELRO part and
 * is untouched), and the heap (malloc). After fork the child shares the
 * window with its parent (MAP_SHARED): fork only to exec.
 * SYMHEAP_STATIC=0 turns it off (static data are then not symmetric and
 * using them as targets is an error naming this).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shmem_internal.h"
#include "shmemi_go.h"

struct range {
	uintptr_t lo, hi;
	int found;
};

static int find_data(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct range *r = arg;
	uintptr_t relro_end = 0;
	const ElfW(Phdr) *w = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_GNU_RELRO)
			relro_end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && w == NULL)
			w = ph;
	}
	if (w != NULL) {
		uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
		uintptr_t lo = (info->dlpi_addr + w->p_vaddr) & ~(page - 1);
		uintptr_t hi = (info->dlpi_addr + w->p_vaddr + w->p_memsz + page - 1) & ~(page - 1);
		/* ld.so makes [lo, page_floor(relro_end)) read-only. */
		uintptr_t r_end = relro_end & ~(page - 1);
		if (r_end > lo && r_end <= hi)
			lo = r_end;
		r->lo = lo;
		r->hi = hi;
		r->found = 1;
	}
	return 1; /* the first object is the executable */
}

/* Set once before main, read-only after. Kept in the library's own data
 * (a static library's lies in the window: written after the remap). */
static int static_fd = -1;
static const char *static_fail;

__attribute__((constructor(101))) static void shmemi_static_ctor(void)
{
	const char *e = getenv("SYMHEAP_STATIC");
	if (e && strcmp(e, "0") == 0) {
		static_fail = "SYMHEAP_STATIC=0 turned it off";
		return;
	}
	struct range r = {0, 0, 0};
	dl_iterate_phdr(find_data, &r);
	if (!r.found || r.hi <= r.lo) {
		static_fail = "the executable has no writable data segment";
		return;
	}
	size_t n = r.hi - r.lo;
	/* From here to the mmap, nothing may store into [lo, hi): only
	 * locals and syscalls. */
	int fd = (int)syscall(SYS_memfd_create, "symheap-static", MFD_CLOEXEC);
	if (fd < 0) {
		static_fail = "memfd_create failed";
		return;
	}
	if (ftruncate(fd, (off_t)n) != 0) {
		close(fd);
		static_fail = "ftruncate of the memfd failed";
		return;
	}
	/* Page by page, skipping pages of zeros (most of a large .bss): the
	 * memfd reads as zeros there and takes no memory until written. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	for (size_t at = 0; at < n; at += page) {
		const uint64_t *w = (const uint64_t *)(r.lo + at);
		size_t k = 0;
		while (k < page / 8 && w[k] == 0)
			k++;
		if (k == page / 8)
			continue;
		size_t done = 0;
		while (done < page) {
			ssize_t m = pwrite(fd, (const char *)r.lo + at + done, page - done, (off_t)(at + done));
			if (m <= 0) {
				close(fd);
				static_fail = "copying the static data into the memfd failed";
				return;
			}
			done += (size_t)m;
		}
	}
	void *m = mmap((void *)r.lo, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	if (m == MAP_FAILED) {
		/* MAP_FIXED failed: the old mapping is still in place. */
		close(fd);
		static_fail = "mapping the memfd over the static data failed";
		return;
	}
	static_fd = fd;
	shmemi_L.static_lo = (char *)r.lo;
	shmemi_L.static_size = n;
}

int shmemi_static_fd(void)
{
	return static_fd;
}

int shmemi_static_init(void)
{
	const char *op = "shmem_init";
	int npes = shmemi_L.npes;
	shmemi_L.static_peer = calloc((size_t)npes, sizeof(char *));
	if (shmemi_L.static_peer == NULL)
		return -1;
	if (static_fd < 0) {
		shmemi_L.static_why = static_fail;
		return 0;
	}
	shmemi_L.static_peer[shmemi_L.me] = shmemi_L.static_lo;
	for (int q = 0; q < npes; q++) {
		if (q == shmemi_L.me || shmemi_go_pe(q))
			continue; /* a Go PE has no copy (the top, step 3) */
		if (shmemi_goes_far(q))
			continue; /* another node's: reached through the transport (far.c) */
		/* Stored before the runtime's Init barrier. */
		struct shmemi_control *c = shmemi_ctl(q);
		int64_t pid = __atomic_load_n(&c->static_pid, __ATOMIC_RELAXED);
		int64_t pfd = __atomic_load_n(&c->static_fd, __ATOMIC_RELAXED);
		uint64_t size = __atomic_load_n(&c->static_size, __ATOMIC_RELAXED);
		if (size == 0)
			shmemi_fatal(op, "PE %d has no symmetric static data (SYMHEAP_STATIC=0, or it failed there), this PE "
					 "has: set SYMHEAP_STATIC alike on every PE",
				     q);
		if (size != shmemi_L.static_size)
			shmemi_fatal(op, "PE %d's static data are %llu bytes, this PE's %llu: every C PE must run the "
					 "same executable",
				     q, (unsigned long long)size, (unsigned long long)shmemi_L.static_size);
		char path[64];
		snprintf(path, sizeof path, "/proc/%lld/fd/%lld", (long long)pid, (long long)pfd);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			shmemi_fatal(op, "opening PE %d's static data (%s): %s (the PEs must run as one user, "
					 "and /proc must be mounted)",
				     q, path, strerror(errno));
		struct stat st;
		if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != size)
			shmemi_fatal(op, "PE %d's static data (%s) are not its window of %llu bytes", q, path,
				     (unsigned long long)size);
		void *m = mmap(NULL, shmemi_L.static_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			shmemi_fatal(op, "mapping PE %d's static data: %s", q, strerror(errno));
		shmemi_L.static_peer[q] = m;
	}
	return 0;
}

void shmemi_static_close(void)
{
	if (static_fd >= 0)
		close(static_fd);
	static_fd = -1;
}

void shmemi_static_finalize(void)
{
	/* The program may still use its static data after shmem_finalize:
	 * its own window stays mapped; the others' are unmapped. */
	for (int q = 0; shmemi_L.static_peer && q < shmemi_L.npes; q++) {
		if (q != shmemi_L.me && shmemi_L.static_peer[q])
			munmap(shmemi_L.static_peer[q], shmemi_L.static_size);
		shmemi_L.static_peer[q] = NULL;
	}
}
