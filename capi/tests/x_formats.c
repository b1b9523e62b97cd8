/*
 * x_formats.c - the C side of the cross-language test of the shared
 * formats (internal/cabi/cabitest; the Go sides are the root's
 * TestCFormats and internal/team's TestCFormatsPost).
 *
 *   x_formats control FILE   FILE holds the fixed part of a control block
 *   x_formats post FILE      FILE holds a PE's post block
 *
 * The Go side wrote every field through its own types, each with its own
 * tag (T32, T64, TB below: the same formulas as the Go side's). This
 * program reads them through the generated declarations
 * (shmemi_formats.h), checks each, then writes the complement of each tag
 * into its field and writes the buffer back, for the Go side to read
 * through its types. A field whose offset differs between the two sides
 * reads another field's tag, or padding: the check names it and the
 * program exits 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmemi_formats.h"

#define T32(n) ((uint32_t)0xc0de0000u | (uint32_t)(n))
#define T64(n) (UINT64_C(0xc0de000000000000) | (uint64_t)(n) << 32 | (uint64_t)(n))
#define TB(line, j) ((unsigned char)((line) * 31 + (j) * 7 + 1))

static int failures;

/* CHECK compares field f with tag want, then stores the tag's complement. */
#define CHECK(f, want)                                                                                   \
	do {                                                                                             \
		uint64_t got_ = (uint64_t)(f), want_ = (uint64_t)(want);                                \
		if (got_ != want_) {                                                                     \
			fprintf(stderr, "x_formats: %s is %#" PRIx64 ", the Go side wrote %#" PRIx64 "\n", #f, \
				got_, want_);                                                            \
			failures++;                                                                      \
		}                                                                                        \
		(f) = ~(f);                                                                              \
	} while (0)

static void control(struct shmemi_control *c)
{
	CHECK(c->exit_code, T32(1));
	CHECK(c->exit_word, T32(2));
	CHECK(c->exit_sleepers, T32(3));
	CHECK(c->watch_stop, T32(4));
	CHECK(c->exit_ready, T32(5));
	CHECK(c->far_lost, T64(6));
	CHECK(c->sig.word, T32(7));
	CHECK(c->sig.sleepers, T32(8));
	CHECK(c->sleeping, T32(9));
	CHECK(c->probe, T64(10));
	for (int k = 0; k < 2; k++) {
		struct shmemi_alloc_record *r = &c->alloc_rec[k].alloc_record;
		int n = 16 + 8 * k;
		CHECK(r->seq, T64(n + 0));
		CHECK(r->call, T64(n + 1));
		CHECK(r->kind, T64(n + 2));
		CHECK(r->size, T64(n + 3));
		CHECK(r->align, T64(n + 4));
		CHECK(r->in, T64(n + 5));
		CHECK(r->out, T64(n + 6));
		CHECK(r->hints, T64(n + 7));
	}
}

/* line checks post line number l of the block (post, gather, done in
 * order), which the block calls what. */
static void line(struct shmemi_post_line *p, int l, const char *what)
{
	uint32_t seq = T32(0x100 + l), sleepers = T32(0x200 + l);
	if (p->seq != seq || p->sleepers != sleepers) {
		fprintf(stderr, "x_formats: line %d (%s) holds seq %#x, sleepers %#x; the Go side wrote %#x, %#x\n", l,
			what, p->seq, p->sleepers, seq, sleepers);
		failures++;
	}
	p->seq = ~p->seq;
	p->sleepers = ~p->sleepers;
	for (int j = 0; j < SHMEMI_POST_DATA; j++) {
		if (p->data[j] != TB(l, j)) {
			fprintf(stderr, "x_formats: line %d (%s) data[%d] is %#x, the Go side wrote %#x\n", l, what, j,
				p->data[j], TB(l, j));
			failures++;
		}
		p->data[j] = (unsigned char)~p->data[j];
	}
}

static void post(struct shmemi_post_block *b)
{
	int l = 0;
	for (int i = 0; i < SHMEMI_POST_RING; i++)
		line(&b->post[i], l++, "post");
	for (int i = 0; i < 2; i++)
		line(&b->gather[i], l++, "gather");
	line(&b->done, l++, "done");
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "control") != 0 && strcmp(argv[1], "post") != 0)) {
		fprintf(stderr, "usage: x_formats control|post FILE\n");
		return 2;
	}
	int ctl = strcmp(argv[1], "control") == 0;
	size_t size = ctl ? SHMEMI_CONTROL_SIZE : sizeof(struct shmemi_post_block);
	if (ctl && sizeof(struct shmemi_control) > SHMEMI_CONTROL_SIZE) {
		fprintf(stderr, "x_formats: struct shmemi_control (%zu bytes) is larger than SHMEMI_CONTROL_SIZE\n",
			sizeof(struct shmemi_control));
		return 1;
	}
	FILE *f = fopen(argv[2], "r+b");
	if (f == NULL) {
		perror(argv[2]);
		return 2;
	}
	void *buf = aligned_alloc(64, (size + 63) / 64 * 64);
	if (buf == NULL) {
		perror("x_formats");
		return 2;
	}
	size_t n = fread(buf, 1, size + 1, f);
	if (n != size) {
		fprintf(stderr, "x_formats: %s holds %zu bytes, the C side's %s is %zu\n", argv[2], n, argv[1], size);
		return 1;
	}
	if (ctl)
		control(buf);
	else
		post(buf);
	if (fseek(f, 0, SEEK_SET) != 0 || fwrite(buf, 1, size, f) != size || fclose(f) != 0) {
		perror(argv[2]);
		return 2;
	}
	free(buf);
	return failures ? 1 : 0;
}
