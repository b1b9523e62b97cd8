/*
 * x_addr.c - the C side of the cross-language test of address
 * translation (capi/tests/xlang): the library's own shmemi_addr (the
 * inline fast path of shmem_internal.h) and its slow cases (addr.c),
 * over a layout the Go side describes, on the Go side's inputs.
 *
 * Standard input:
 *   L base wbase part_off part_stride heap_size me npes static_lo static_size
 *   P static_peer[0] ... static_peer[npes-1]      (0: not reachable)
 *   Q addr n pe                                   (any number of them)
 * Standard output, a line per Q: "ok ADDR" (where this PE reaches PE pe's
 * copy of the n bytes at addr) or "err MESSAGE" (the library's message,
 * which ends the job in the library and returns to the loop here).
 * Numbers in any base strtoull reads (0x for hexadecimal).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmem_internal.h"

struct shmemi_layout shmemi_L;
__thread int shmemi_owed __attribute__((tls_model("initial-exec")));

static sigjmp_buf failed;

void shmemi_fatal(const char *op, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	printf("err %s: %s\n", op, msg);
	siglongjmp(failed, 1);
}

void shmemi_need_init(const char *op)
{
	if (!shmemi_L.initialized)
		shmemi_fatal(op, "called before shmem_init");
}

static unsigned long long num(char **s)
{
	char *end;
	unsigned long long v = strtoull(*s, &end, 0);
	if (end == *s) {
		fprintf(stderr, "x_addr: a number expected at \"%s\"\n", *s);
		exit(2);
	}
	*s = end;
	return v;
}

int main(void)
{
	char line[4096];
	while (fgets(line, sizeof line, stdin) != NULL) {
		char *s = line + 1;
		switch (line[0]) {
		case 'L':
			shmemi_L.base = (char *)(uintptr_t)num(&s);
			shmemi_L.wbase = (char *)(uintptr_t)num(&s);
			shmemi_L.part_off = num(&s);
			shmemi_L.part_stride = num(&s);
			shmemi_L.heap_size = num(&s);
			shmemi_L.me = (int)num(&s);
			shmemi_L.npes = (int)num(&s);
			shmemi_L.static_lo = (char *)(uintptr_t)num(&s);
			shmemi_L.static_size = num(&s);
			shmemi_L.static_peer = calloc((size_t)shmemi_L.npes, sizeof(char *));
			shmemi_L.initialized = 1;
			break;
		case 'P':
			for (int p = 0; p < shmemi_L.npes; p++)
				shmemi_L.static_peer[p] = (char *)(uintptr_t)num(&s);
			break;
		case 'Q': {
			const void *addr = (const void *)(uintptr_t)num(&s);
			size_t n = (size_t)num(&s);
			int pe = (int)(long long)num(&s);
			if (sigsetjmp(failed, 0) == 0)
				printf("ok 0x%llx\n", (unsigned long long)(uintptr_t)shmemi_addr(addr, n, pe, "x_addr"));
			break;
		}
		default:
			fprintf(stderr, "x_addr: unknown line \"%s\"\n", line);
			return 2;
		}
	}
	return 0;
}
