//go:build symheap_capi

/*
 * coll.c - teams and collectives.
 *
 * Teams are the Go runtime's (internal/team): split, destroy and the sync
 * of a split team call into Go; this side keeps each team's world PEs, so
 * that translation and the collectives need no call. The collectives
 * themselves are made here, over the fast path: every member reads the
 * other members' copies directly (single copy: the segment maps every
 * partition), between two synchronisations of the group:
 *
 *   1. sync: every member's source is ready, every destination free;
 *   2. read the members' sources, combine into a private buffer
 *      (reductions) or straight into the destination (the others);
 *   3. sync: nobody reads a source any more; a reduction then copies its
 *      buffer to the destination (which may be the source).
 *
 * Broadcast needs less: a handshake of tickets between the root and the
 * others (broadcast, below), up to SHMEMI_POST_FLAT PEs; above, the
 * world's broadcasts of more than SHMEMI_POST_DATA and at most
 * SHMEMI_SCRATCH_SIZE bytes go down the Go runtime's binomial tree of
 * scratch buffers (shmemi_tree_bcast, shmemi_tree.h). A reduction of
 * more than REDUCE_SHARES bytes is folded in shares (reduce_shares). A
 * broadcast or reduction of at most SHMEMI_POST_DATA bytes over the whole
 * job goes through post lines instead (post_broadcast, post_reduce: above
 * SHMEMI_POST_FLAT PEs up and down a binomial tree). An fcollect of at
 * most SHMEMI_SCRATCH_SIZE bytes a PE over the whole job copies its
 * source into a scratch buffer and syncs once (scratch_fcollect).
 *
 * The sync of the world (barrier_all, sync_all, the syncs of
 * SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED) is the Go runtime's
 * dissemination barrier on the same words of the control blocks
 * (world_dissem); a split team's sync calls into Go, which runs the same
 * barrier. The active sets of OpenSHMEM 1.4 (PE_start, logPE_stride,
 * PE_size, pSync) keep a counter barrier in C (counter_barrier), whose
 * words must be back at SHMEM_SYNC_VALUE after each call; but an active
 * set of every PE in rank order syncs as the world (world_set, gsync). The words each routine
 * uses are a struct shmemi_sync (shmemi_formats.h, from capi/gen's
 * formats.go): in pSync for an active set, at the head of the world's
 * scratch block (struct shmemi_scratch, which also holds the collectives'
 * futex word and sleepers count, see coll_wake) for the world: the
 * barrier's arrivals, collect's counts and the broadcast's two tickets.
 * Each word is back to its value (SHMEM_SYNC_VALUE) once every member has
 * left the routine, as OpenSHMEM asks of pSync.
 *
 * A job on several nodes (shmemi_L.far_pe set) takes the route of a job
 * with Go PEs (go_route): barrier_all and the world's syncs are the
 * runtime's Barrier (hierarchical: the node in shared memory, the nodes'
 * leaders over the transport), the team collectives the runtime has run
 * its steps (internal/far's across nodes) on arrays in the heap, and an
 * active set of every PE in rank order runs as the world team. The
 * routines here (static arrays, collect, alltoalls with strides, the
 * scans) read a member of another node through the transport (peer_src)
 * into a private buffer; collect's counts word lives in the world's
 * scratch block, which such a job has not got, so collect of variable
 * sizes runs on the world only (far_collect). Every other active set is
 * refused with one message (shmemi_far_refuse). SHMEM_TEAM_SHARED is
 * this node's PEs (far_shared_team).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shmem_internal.h"
#include "shmemi_go.h"
#include "shmemi_tree.h"

struct shmemi_team {
	int id;       /* the Go runtime's; -1: not usable */
	int rank, size;
	int *world;   /* world PE of each rank */
	int *rank_of; /* rank of each world PE, -1 if not a member */
	shmem_team_config_t config;
};

static struct shmemi_team shmemi_team_world_, shmemi_team_shared_;
void shmemi_world_barrier(const char *op);

/* The world's symmetric scratch block (see the top), in the block the
 * runtime's Init allocates for the C library (shmemi_teams_init). */
static struct shmemi_scratch *shmemi_scratch;

/* psync views an active set's pSync (SHMEM_SYNC_SIZE longs). */
static struct shmemi_sync *psync(long *pSync)
{
	return (struct shmemi_sync *)pSync;
}

/*
 * Post lines: the world's broadcasts and reductions of at most SHMEMI_POST_DATA
 * bytes (a team of the whole job, SHMEM_TEAM_WORLD or SHMEM_TEAM_SHARED,
 * or an active set of every PE), as the Go runtime's team layer makes
 * them (internal/team, "Post lines"). A post line is one cache line that
 * its owner publishes, with a seq-cst store of its count, and that others
 * wait for; the data come along in the same transfer.
 *
 *   broadcast  the root copies its source into line n%SHMEMI_POST_RING of its
 *              ring (n: the world's small broadcasts so far) and publishes
 *              n+1; the others wait for it and copy out; every PE then
 *              publishes n+1 in its done line. The root returns at once:
 *              it reuses a line only once every PE is done with what the
 *              line held SHMEMI_POST_RING calls before (it reads the done lines
 *              only when what it saw last falls short, and then waits
 *              until the PE is half a ring further); a reader asks for the
 *              root's line SHMEMI_POST_AHEAD calls ahead of the one it reads.
 *   reduce     every PE publishes its source in its gather line g%2 (g:
 *              the world's small reductions so far), waits for every
 *              other's, and folds them all in rank order, so that every PE
 *              gets the same bits. A PE publishes g+2 in a line only after
 *              it has read every line of g+1, each published after its
 *              owner read the lines of g: two lines suffice.
 *
 * A pSync is then not touched: it stays at SHMEM_SYNC_VALUE, as OpenSHMEM
 * asks. Every PE makes the same calls in the same order, so the counts
 * agree.
 *
 * The lines and their block are the Go runtime's (internal/team's postLine
 * and the post lines of its teamSlot), generated into shmemi_formats.h
 * with the constants SHMEMI_POST_*: a PE's block holds the ring (post),
 * the gather lines and the done line, as a team slot of the Go runtime
 * does.
 */
static struct shmemi_post_block *shmemi_post;       /* this PE's (symmetric) */
static struct shmemi_post_block **shmemi_post_peer; /* every PE's, by PE */
static uint32_t post_bcasts, post_gathers;          /* small broadcasts, reductions so far */
static uint32_t *post_seen_done;                    /* each PE's done count, as last read */

/* The world's tree broadcasts (shmemi_tree.h): every PE's block of the
 * runtime's scratch_head format, after the scratch block in the C
 * library's block, and this PE's state. Used only by a job of C PEs on
 * one node (post_group): a job with Go PEs runs the team broadcasts in the
 * runtime, on its team slots. */
static struct shmemi_tree tree_world;

/* The world's fcollects of at most SHMEMI_SCRATCH_SIZE bytes a PE
 * (collect, fixed): every PE's second block of the scratch_head format,
 * after the tree's, of which they use the two scratch buffers; fc_calls
 * counts them. Call k copies the source into this PE's buffer k%2, syncs
 * the world once, and reads every member's buffer: no second sync. A
 * buffer is written again in call k+2, after the sync of call k+1, which
 * every PE enters only once it has read the buffers of call k. */
static struct shmemi_scratch_head **fc_block; /* every PE's, by PE */
static uint32_t fc_calls;

/* The world's full barrier (world_dissem) is the Go runtime's
 * dissemination barrier on the same words: the barrier area of each PE's
 * control block (internal/team, dissem.go; struct shmemi_barrier_* in
 * shmemi_formats.h), the world team's (id 0) count word and round lines,
 * in the order of the PEs' topology keys. */
static struct shmemi_barrier_count *dis_count;  /* this PE's count word for the world */
static struct shmemi_barrier_round **dis_mine;  /* this PE's round lines */
static struct shmemi_barrier_round **dis_from;  /* round r: the lines of the PE it waits for */
static int *dis_from_pe;                          /* round r: that PE */

/* The collective allocation's agreement (shmemi_agree) is the runtime's
 * (internal/team, agree.go): a dissemination barrier in the same order,
 * on the agreement's round lines, which follow the team ids' parts of the
 * barrier area, and whose post lines carry each PE's record. */
static struct shmemi_agree_round **agree_mine; /* this PE's agreement lines */
static struct shmemi_agree_round **agree_from; /* round r: those of the PE it waits for */

/* barrier_area is PE pe's barrier area; team id's count line follows the
 * head, its round lines follow the count line. */
static char *barrier_team(int pe, int id)
{
	return shmemi_L.cb_base + (uint64_t)pe * shmemi_L.cb_stride + shmemi_L.barrier +
	       sizeof(struct shmemi_barrier_head) +
	       (uint64_t)id * (sizeof(struct shmemi_barrier_count) +
			       (uint64_t)shmemi_L.barrier_rounds * sizeof(struct shmemi_barrier_round));
}

static struct shmemi_barrier_round *barrier_round(int pe, int id, int r)
{
	return (struct shmemi_barrier_round *)(barrier_team(pe, id) + sizeof(struct shmemi_barrier_count)) + r;
}

/* agree_round is PE pe's agreement lines of round r: no count line. */
static struct shmemi_agree_round *agree_round(int pe, int r)
{
	return (struct shmemi_agree_round *)barrier_team(pe, SHMEMI_BARRIER_TEAMS) + r;
}

/* barrier_order places this PE in the world's barrier as the Go runtime
 * does (internal/team, topo.go barrierOrder and dissem.go place): the
 * PEs sorted by (topology key, rank); in round r this PE waits for the
 * PE 2^r places before it. Every key was stored before the runtime's
 * Init barrier. */
static void barrier_order(void)
{
	int n = shmemi_L.npes, pos = 0;
	int *order = malloc(sizeof(int) * (size_t)n);
	uint64_t *key = malloc(sizeof(uint64_t) * (size_t)n);
	dis_mine = malloc(sizeof(*dis_mine) * (size_t)(shmemi_L.barrier_rounds + 1));
	dis_from = malloc(sizeof(*dis_from) * (size_t)(shmemi_L.barrier_rounds + 1));
	dis_from_pe = malloc(sizeof(*dis_from_pe) * (size_t)(shmemi_L.barrier_rounds + 1));
	agree_mine = malloc(sizeof(*agree_mine) * (size_t)(shmemi_L.barrier_rounds + 1));
	agree_from = malloc(sizeof(*agree_from) * (size_t)(shmemi_L.barrier_rounds + 1));
	if (order == NULL || key == NULL || dis_mine == NULL || dis_from == NULL || dis_from_pe == NULL ||
	    agree_mine == NULL || agree_from == NULL)
		shmemi_fatal("shmem_init", "out of memory");
	for (int p = 0; p < n; p++) {
		struct shmemi_barrier_head *h =
			(struct shmemi_barrier_head *)(shmemi_L.cb_base + (uint64_t)p * shmemi_L.cb_stride + shmemi_L.barrier);
		key[p] = __atomic_load_n(&h->key, __ATOMIC_SEQ_CST);
		/* Insertion sort: stable, by key then rank. */
		int i = p;
		for (; i > 0 && key[order[i - 1]] > key[p]; i--)
			order[i] = order[i - 1];
		order[i] = p;
	}
	for (int i = 0; i < n; i++)
		if (order[i] == shmemi_L.me)
			pos = i;
	dis_count = (struct shmemi_barrier_count *)barrier_team(shmemi_L.me, 0);
	for (int r = 0; r < shmemi_L.barrier_rounds; r++) {
		dis_mine[r] = barrier_round(shmemi_L.me, 0, r);
		dis_from_pe[r] = order[(pos - (1 << r) + n) % n];
		dis_from[r] = barrier_round(dis_from_pe[r], 0, r);
		agree_mine[r] = agree_round(shmemi_L.me, r);
		agree_from[r] = agree_round(dis_from_pe[r], r);
	}
	free(order);
	free(key);
}

static void team_fill(struct shmemi_team *t, int id, int size, int *world)
{
	t->id = id;
	t->size = size;
	t->world = world;
	t->rank_of = malloc(sizeof(int) * (size_t)shmemi_L.npes);
	if (t->rank_of == NULL)
		shmemi_fatal("shmem_team_split", "out of memory");
	t->rank = -1;
	for (int p = 0; p < shmemi_L.npes; p++)
		t->rank_of[p] = -1;
	for (int r = 0; r < size; r++) {
		t->rank_of[world[r]] = r;
		if (world[r] == shmemi_L.me)
			t->rank = r;
	}
}

/*
 * far_shared_team makes SHMEM_TEAM_SHARED of a job on several nodes: the
 * PEs of this node, a team of the runtime's split from the world, so that
 * its syncs and collectives run as a split team's. Every PE makes one
 * split per node, in node order (a collective call of the world each),
 * and keeps its own node's. A split takes a start, stride and size: when
 * some node's PEs are not evenly spaced in rank, every PE (each knows
 * every PE's node) makes none, and the shared team is this PE alone.
 */
static void far_shared_team(void)
{
	int n = shmemi_L.npes, nodes = 0, regular = 1;
	for (int p = 0; p < n; p++)
		nodes = shmemi_L.node_of[p] + 1 > nodes ? shmemi_L.node_of[p] + 1 : nodes;
	int *start = calloc((size_t)nodes, sizeof(int)), *stride = calloc((size_t)nodes, sizeof(int)),
	    *size = calloc((size_t)nodes, sizeof(int));
	int *world = malloc(sizeof(int) * (size_t)n);
	if (start == NULL || stride == NULL || size == NULL || world == NULL)
		shmemi_fatal("shmem_init", "out of memory");
	for (int p = 0; p < n; p++) {
		int k = shmemi_L.node_of[p];
		if (size[k] == 0)
			start[k] = p;
		else if (size[k] == 1)
			stride[k] = p - start[k];
		else if (p != start[k] + size[k] * stride[k])
			regular = 0;
		size[k]++;
	}
	int mine = shmemi_L.node_of[shmemi_L.me];
	if (!regular) {
		world[0] = shmemi_L.me;
		team_fill(&shmemi_team_shared_, 0, 1, world);
	}
	for (int k = 0; regular && k < nodes; k++) {
		char err[1024];
		int id = symheapc_go_team_split(0, start[k], stride[k] > 0 ? stride[k] : 1, size[k], world, err, sizeof err);
		if (id == -2)
			shmemi_fatal("shmem_init", "making SHMEM_TEAM_SHARED: %s", err);
		if (k == mine)
			team_fill(&shmemi_team_shared_, id, size[k], world);
	}
	if (regular && shmemi_team_shared_.rank_of == NULL)
		shmemi_fatal("shmem_init", "making SHMEM_TEAM_SHARED: this PE is in no node's team");
	free(start);
	free(stride);
	free(size);
}

void shmemi_teams_init(void)
{
	int *w = malloc(sizeof(int) * (size_t)shmemi_L.npes);
	int *w2 = malloc(sizeof(int) * (size_t)shmemi_L.npes);
	if (w == NULL || w2 == NULL)
		shmemi_fatal("shmem_init", "out of memory");
	for (int p = 0; p < shmemi_L.npes; p++)
		w[p] = w2[p] = p;
	team_fill(&shmemi_team_world_, 0, shmemi_L.npes, w);
	if (shmemi_L.far_pe != NULL) {
		/* A job on several nodes: no block for the C library's own
		 * collectives (the runtime's run them); the shared team
		 * (far_shared_team). */
		free(w2);
		far_shared_team();
		return;
	}
	/* Every PE of a job shares this node's memory. */
	team_fill(&shmemi_team_shared_, 0, shmemi_L.npes, w2);
	/* The post lines, the scratch block (one cache line: an
	 * arrival's add and its sleepers load touch one line), the tree
	 * broadcast's block (shmemi_tree.h) and the fcollect's, in the block
	 * the runtime's Init allocated on every PE, Go PEs too (cabi_unsafe.go,
	 * "Go and C PEs in one job"). */
	_Static_assert(sizeof(struct shmemi_post_block) % 64 == 0 && sizeof(struct shmemi_scratch) % 64 == 0 &&
			       sizeof(struct shmemi_post_block) + sizeof(struct shmemi_scratch) +
					       2 * sizeof(struct shmemi_scratch_head) <=
				       SHMEMI_CBLOCK_SIZE,
		       "the C library's block does not hold the post lines, the scratch block, the tree's block and "
		       "the fcollect's");
	if (shmemi_L.cblock == NULL)
		shmemi_fatal("shmem_init", "the runtime allocated no block for the C library");
	shmemi_post = (struct shmemi_post_block *)shmemi_L.cblock;
	shmemi_scratch = (struct shmemi_scratch *)(shmemi_L.cblock + sizeof(struct shmemi_post_block));
	shmemi_post_peer = malloc(sizeof(*shmemi_post_peer) * (size_t)shmemi_L.npes);
	post_seen_done = calloc((size_t)shmemi_L.npes, sizeof(*post_seen_done));
	if (shmemi_post_peer == NULL || post_seen_done == NULL)
		shmemi_fatal("shmem_init", "out of memory");
	for (int p = 0; p < shmemi_L.npes; p++)
		shmemi_post_peer[p] = (struct shmemi_post_block *)shmemi_addr(shmemi_post, sizeof(struct shmemi_post_block),
									     p, "shmem_init");
	struct shmemi_scratch_head *tb = (struct shmemi_scratch_head *)(shmemi_scratch + 1);
	tree_world = (struct shmemi_tree){.rank = shmemi_L.me, .n = shmemi_L.npes, .kids_root = {-1, -1}};
	tree_world.block = malloc(sizeof(*tree_world.block) * (size_t)shmemi_L.npes);
	tree_world.seen = calloc((size_t)shmemi_L.npes, sizeof(*tree_world.seen));
	fc_block = malloc(sizeof(*fc_block) * (size_t)shmemi_L.npes);
	if (tree_world.block == NULL || tree_world.seen == NULL || fc_block == NULL)
		shmemi_fatal("shmem_init", "out of memory");
	for (int p = 0; p < shmemi_L.npes; p++) {
		tree_world.block[p] = (struct shmemi_scratch_head *)shmemi_addr(tb, sizeof *tb, p, "shmem_init");
		fc_block[p] = (struct shmemi_scratch_head *)shmemi_addr(tb + 1, sizeof *tb, p, "shmem_init");
	}
	barrier_order();
}

static struct shmemi_team *team_of(shmem_team_t team, const char *op)
{
	if (team == SHMEM_TEAM_INVALID)
		shmemi_fatal(op, "the team is SHMEM_TEAM_INVALID");
	if (team == SHMEM_TEAM_WORLD)
		team = &shmemi_team_world_;
	else if (team == SHMEM_TEAM_SHARED)
		team = &shmemi_team_shared_;
	if (!shmemi_L.initialized || shmemi_L.finalized)
		shmemi_fatal(op, "called outside shmem_init ... shmem_finalize");
	if (team->id < 0)
		shmemi_fatal(op, "the team was destroyed");
	return team;
}

int shmemi_team_world_pe(shmem_team_t team, int r, const char *op)
{
	struct shmemi_team *t = team_of(team, op);
	if (r < 0 || r >= t->size)
		return -1;
	return t->world[r];
}

int shmem_team_my_pe(shmem_team_t team)
{
	if (team == SHMEM_TEAM_INVALID)
		return -1;
	return team_of(team, "shmem_team_my_pe")->rank;
}

int shmem_team_n_pes(shmem_team_t team)
{
	if (team == SHMEM_TEAM_INVALID)
		return -1;
	return team_of(team, "shmem_team_n_pes")->size;
}

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config)
{
	if (team == SHMEM_TEAM_INVALID)
		return -1;
	struct shmemi_team *t = team_of(team, "shmem_team_get_config");
	/* A mask of 0 asks for nothing, and config may then be NULL (1.6);
	 * NULL with a nonzero mask is undefined: refused. */
	if (config_mask == 0)
		return 0;
	if (config == NULL)
		return -1;
	if (config_mask & SHMEM_TEAM_NUM_CONTEXTS)
		config->num_contexts = t->config.num_contexts;
	return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team)
{
	if (src_team == SHMEM_TEAM_INVALID || dest_team == SHMEM_TEAM_INVALID)
		return -1;
	int w = shmemi_team_world_pe(src_team, src_pe, "shmem_team_translate_pe");
	if (w < 0)
		return -1;
	return team_of(dest_team, "shmem_team_translate_pe")->rank_of[w];
}

/* go_msg is the message of an error the Go runtime returned, for
 * shmemi_fatal, which says "symheap: PE n: call:" itself: without the
 * runtime's own "symheap: ". */
static const char *go_msg(const char *err)
{
	return strncmp(err, "symheap: ", 9) == 0 ? err + 9 : err;
}

int shmem_team_sync(shmem_team_t team)
{
	char err[1024];
	struct shmemi_team *t = team_of(team, "shmem_team_sync");
	if (t == &shmemi_team_world_ || (t == &shmemi_team_shared_ && shmemi_L.far_pe == NULL)) {
		shmemi_world_barrier("shmem_team_sync");
		return 0;
	}
	shmemi_full_fence();
	if (t->size == 1)
		return 0;
	if (symheapc_go_team_sync(t->id, err, sizeof err) != 0)
		shmemi_fatal("shmem_team_sync", "%s", go_msg(err));
	return 0;
}

static int split(struct shmemi_team *p, int start, int stride, int size, const shmem_team_config_t *config,
		 long mask, shmem_team_t *new_team, const char *op)
{
	char err[1024];
	if (p == &shmemi_team_shared_ && shmemi_L.far_pe != NULL && p->id == 0 && shmemi_L.npes > 1)
		shmemi_far_refuse(op); /* this PE alone, standing for the node's PEs (far_shared_team) */
	int *world = malloc(sizeof(int) * (size_t)(size > 0 ? size : 1));
	if (world == NULL)
		shmemi_fatal(op, "out of memory");
	shmemi_quiet();
	int id = symheapc_go_team_split(p->id, start, stride, size, world, err, sizeof err);
	if (id == -2) {
		free(world);
		shmemi_flush_stdio();
		fprintf(stderr, "%s (in %s)\n", err, op);
		*new_team = SHMEM_TEAM_INVALID;
		return -1;
	}
	if (id == -1) {
		free(world);
		*new_team = SHMEM_TEAM_INVALID;
		return 0;
	}
	struct shmemi_team *t = calloc(1, sizeof *t);
	if (t == NULL)
		shmemi_fatal(op, "out of memory");
	team_fill(t, id, size, world);
	if (config && (mask & SHMEM_TEAM_NUM_CONTEXTS))
		t->config.num_contexts = config->num_contexts;
	*new_team = t;
	return 0;
}

int shmem_team_split_strided(shmem_team_t parent, int start, int stride, int size,
			     const shmem_team_config_t *config, long config_mask, shmem_team_t *new_team)
{
	if (parent == SHMEM_TEAM_INVALID) {
		*new_team = SHMEM_TEAM_INVALID;
		return -1;
	}
	struct shmemi_team *p = team_of(parent, "shmem_team_split_strided");
	if (p->rank < 0) {
		*new_team = SHMEM_TEAM_INVALID;
		return -1;
	}
	return split(p, start, stride, size, config, config_mask, new_team, "shmem_team_split_strided");
}

int shmem_team_split_2d(shmem_team_t parent, int xrange, const shmem_team_config_t *xaxis_config,
			long xaxis_mask, shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
			long yaxis_mask, shmem_team_t *yaxis_team)
{
	const char *op = "shmem_team_split_2d";
	*xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
	if (parent == SHMEM_TEAM_INVALID)
		return -1;
	struct shmemi_team *p = team_of(parent, op);
	if (xrange < 1)
		shmemi_fatal(op, "xrange %d must be at least 1", xrange);
	int n = p->size;
	if (xrange > n)
		xrange = n;
	int rc = 0;
	/* Every member takes part in every split, in the same order: the
	 * rows (x teams), then the columns (y teams). */
	for (int start = 0; start < n; start += xrange) {
		int sz = n - start < xrange ? n - start : xrange;
		shmem_team_t t;
		rc |= split(p, start, 1, sz, xaxis_config, xaxis_mask, &t, op);
		if (t != SHMEM_TEAM_INVALID)
			*xaxis_team = t;
	}
	for (int c = 0; c < xrange; c++) {
		int sz = (n - c + xrange - 1) / xrange;
		shmem_team_t t;
		rc |= split(p, c, xrange, sz, yaxis_config, yaxis_mask, &t, op);
		if (t != SHMEM_TEAM_INVALID)
			*yaxis_team = t;
	}
	return rc ? -1 : 0;
}

void shmem_team_destroy(shmem_team_t team)
{
	char err[1024];
	if (team == SHMEM_TEAM_INVALID)
		return;
	if (team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED)
		shmemi_fatal("shmem_team_destroy", "SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED cannot be destroyed");
	struct shmemi_team *t = team_of(team, "shmem_team_destroy");
	shmemi_quiet();
	if (symheapc_go_team_destroy(t->id, err, sizeof err) != 0)
		shmemi_fatal("shmem_team_destroy", "%s", go_msg(err));
	t->id = -1;
	free(t->world);
	free(t->rank_of);
	t->world = t->rank_of = NULL;
	/* The handle stays allocated so that a later use is reported. */
}

/* ---- the active-set barrier over pSync ---- */

/*
 * The collectives' own wake-up channel: a futex word and a sleepers count
 * per PE in the world's scratch block (coll_word, coll_sleepers), apart from the signal
 * that puts and AMOs wake. A PE asleep in a barrier would otherwise make
 * every put aimed at it pay a FUTEX_WAKE. Every change a collective waits
 * for is a seq-cst RMW, so no membarrier is needed: a writer's RMW then its
 * sleepers load, against the waiter's sleepers increment then its
 * condition check, cannot both miss.
 */
static uint32_t *coll_word(int pe, const char *op)
{
	return (uint32_t *)shmemi_addr(&shmemi_scratch->coll_word, 4, pe, op);
}

static uint32_t *coll_sleepers(int pe, const char *op)
{
	return (uint32_t *)shmemi_addr(&shmemi_scratch->coll_sleepers, 4, pe, op);
}

static void coll_wake(int pe, const char *op)
{
	if (__atomic_load_n(coll_sleepers(pe, op), __ATOMIC_SEQ_CST) != 0) {
		uint32_t *w = coll_word(pe, op);
		__atomic_fetch_add(w, 1, __ATOMIC_SEQ_CST);
		shmemi_futex_wake(w);
	}
}

static void coll_block(int (*cond)(void *), void *arg, const char *op)
{
	shmemi_block_word(coll_word(shmemi_L.me, op), coll_sleepers(shmemi_L.me, op), 0, cond, arg, op);
}

/* c_only_pe refuses a collective that only the C library has (collect,
 * alltoalls, the scans, every active-set routine) over a group that has
 * PE pe, when pe runs a Go program. */
/* go_route: the team collectives go to the runtime (a job with Go PEs,
 * or on several nodes). */
static int go_route(void)
{
	return shmemi_L.go_pes > 0 || shmemi_L.far_pe != NULL;
}

/* far_world: in a job on several nodes, whether the active set is every
 * PE in rank order (which runs as the world team); any other refused. */
static int far_world(int start, int logstride, int size, const char *op)
{
	if (shmemi_L.far_pe == NULL)
		return 0;
	if (start == 0 && logstride == 0 && size == shmemi_L.npes)
		return 1;
	shmemi_far_refuse(op);
}

static void c_only_pe(int pe, const char *op)
{
	if (shmemi_go_pe(pe))
		shmemi_fatal(op, "PE %d of the group runs a Go program, which has no such collective: in a job with "
				 "Go PEs this one runs on a team or active set of C PEs only (the Go runtime has "
				 "barrier, sync, broadcast, reduce, fcollect and alltoall on teams: docs/c.md)",
			     pe);
}

static void set_check(int start, int logstride, int size, const char *op)
{
	if (size < 1 || start < 0 || logstride < 0 || logstride > 30 ||
	    start + (long)(size - 1) * (1L << logstride) >= shmemi_L.npes)
		shmemi_fatal(op, "the active set PE_start %d, logPE_stride %d, PE_size %d leaves the job's %d PEs",
			     start, logstride, size, shmemi_L.npes);
	int d = shmemi_L.me - start;
	if (d < 0 || d % (1 << logstride) != 0 || d >> logstride >= size)
		shmemi_fatal(op, "this PE (%d) is not in the active set PE_start %d, logPE_stride %d, PE_size %d",
			     shmemi_L.me, start, logstride, size);
	for (int i = 0; shmemi_L.go_pes > 0 && i < size; i++)
		c_only_pe(start + (i << logstride), op);
	(void)far_world(start, logstride, size, op);
}

/*
 * counter_barrier: the barrier of the active sets (pSync).
 * Every member adds one to every other member's copy of the counter word
 * cnt (seq-cst RMWs: full fences, so every store before the barrier is
 * visible to whoever sees the arrival), wakes them, then waits until its
 * own copy has counted size-1 arrivals and takes them off: a subtraction,
 * not a reset, so that the arrival of a member that has already left this
 * episode for the next one stays counted. The word is back to its value
 * before the call (SHMEM_SYNC_VALUE for a pSync) once every member has
 * left: OpenSHMEM's rule for reusing pSync.
 */
struct count_wait {
	long *p;
	long v;
};

static int count_reached(void *arg)
{
	struct count_wait *c = arg;
	return __atomic_load_n(c->p, __ATOMIC_SEQ_CST) >= c->v;
}

static void counter_barrier(long *cnt, int start, int logstride, int size, const char *op)
{
	shmemi_quiet();
	if (size == 1)
		return;
	(void)shmemi_amo_addr(cnt, sizeof(long), shmemi_L.me, op);
	for (int i = 0; i < size; i++) {
		int q = start + (i << logstride);
		if (q != shmemi_L.me)
			__atomic_fetch_add((long *)shmemi_amo_addr(cnt, sizeof(long), q, op), 1, __ATOMIC_SEQ_CST);
	}
	for (int i = 0; i < size; i++) {
		int q = start + (i << logstride);
		if (q != shmemi_L.me)
			coll_wake(q, op);
	}
	struct count_wait c = {cnt, size - 1};
	if (!count_reached(&c))
		coll_block(count_reached, &c, op);
	__atomic_fetch_sub(cnt, size - 1, __ATOMIC_SEQ_CST);
}

static void set_barrier(int start, int logstride, int size, long *pSync, const char *op)
{
	counter_barrier(&psync(pSync)->barrier, start, logstride, size, op);
}

/* ---- post lines: publishing a count, waiting for one ---- */

struct post_wait {
	uint32_t *seq;
	uint32_t want;
};

static int post_reached(void *arg)
{
	struct post_wait *w = arg;
	/* seq-cst; pairs with the owner's store in post_publish. Compares
	 * across the wrap. */
	return (int32_t)(__atomic_load_n(w->seq, __ATOMIC_SEQ_CST) - w->want) >= 0;
}

/* publish_word makes the caller's earlier stores (a line's data among
 * them) visible with the count v in seq, and wakes its sleepers. The
 * store is seq-cst, so that the load of sleepers after it cannot miss a
 * waiter that announced itself before testing the count; or, relaxed (a
 * process registered for membarrier whose waiters fence before they
 * sleep: post_await with fenced), a release store, which the load of
 * sleepers may pass and a sleeper's membarrier orders. */
static void publish_word(uint32_t *seq, uint32_t *sleepers, uint32_t v, int relaxed)
{
	/* Two stores, not one with a computed order: GCC makes a store whose
	 * order is not a constant seq-cst. */
	if (relaxed)
		__atomic_store_n(seq, v, __ATOMIC_RELEASE);
	else
		__atomic_store_n(seq, v, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0)
		shmemi_futex_wake(seq);
}

/* post_publish is publish_word for a post line. */
static void post_publish(struct shmemi_post_line *pl, uint32_t v, int relaxed)
{
	publish_word(&pl->seq, &pl->sleepers, v, relaxed);
}

/* post_await waits until the line pl (another PE's) has reached count
 * want: poll, yield, then sleep on it; fenced when its owner publishes
 * relaxed. */
static void post_await(struct shmemi_post_line *pl, uint32_t want, int fenced, const char *op)
{
	struct post_wait w = {&pl->seq, want};
	if (!post_reached(&w))
		shmemi_block_word(&pl->seq, &pl->sleepers, fenced, post_reached, &w, op);
}

/* post_await_done is the root's wait for a PE's done line d to reach
 * want, as the Go runtime's (internal/team, awaitDone): once short, the
 * root has run a whole ring ahead of that PE, so it waits until the PE is
 * done with enough (half a ring further), reading the line only every
 * SHMEMI_POST_DONE_PAUSES pauses while it polls. Every read takes the line from
 * its owner, whose next publication must fetch it back. */
static int post_reached_spaced(void *arg)
{
	if (shmemi_L.polls > 0) {
		for (int i = 0; i < SHMEMI_POST_DONE_PAUSES; i++)
			shmemi_pause();
	}
	return post_reached(arg);
}

static void post_await_done(struct shmemi_post_line *d, uint32_t want, uint32_t enough, const char *op)
{
	struct post_wait w = {&d->seq, want};
	if (post_reached(&w))
		return;
	w.want = enough;
	shmemi_block_word(&d->seq, &d->sleepers, 0, post_reached_spaced, &w, op);
}

/* The tree broadcast's waits and wake-ups (shmemi_tree.h): an arrival is
 * a seq-cst store, so the waiter needs no fence. */
struct tree_wait {
	uint32_t *word, want;
};

static int tree_reached(void *arg)
{
	struct tree_wait *w = arg;
	return shmemi_tree_reached(__atomic_load_n(w->word, __ATOMIC_SEQ_CST), w->want);
}

static void shmemi_tree_block(uint32_t *word, uint32_t *sleepers, uint32_t want, const char *op)
{
	struct tree_wait w = {word, want};
	shmemi_block_word(word, sleepers, 0, tree_reached, &w, op);
}

static void shmemi_tree_wake(uint32_t *word)
{
	shmemi_futex_wake(word);
}

/*
 * world_dissem: the world's full barrier, the Go runtime's dissemination
 * barrier (internal/team, dissem.go) on the same words, so that a Go call
 * and a C call of one process take their numbers from one count word and
 * meet the other PEs' rounds alike. In barrier c (this PE's count for the
 * world, plus one; the world's bases are 0), for each of the
 * barrier_rounds rounds: publish c in this PE's line (r, c%2), then wait
 * until the line (r, c%2) of the PE 2^r places before it in the order
 * holds c. Each line has one writer and one reader: ⌈log₂ N⌉ lines
 * written and read per PE, ⌈log₂ N⌉ transfers on the critical path. With
 * two PEs it is the pair barrier it replaced: one line each way. Where
 * the runtime publishes its post lines relaxed (registered for
 * membarrier, a CPU for every PE of the node: internal/team, "Post
 * lines", Sleeping) the publication is a release store (post_publish,
 * relaxed): every store before the barrier (puts
 * included, after quiet's SFENCE) is visible to the PE that sees the
 * count, and transitively to the later rounds' readers; a waiter that
 * goes to sleep fences for the publisher's load of sleepers (wait.c W2).
 * Once through, this PE asks for the next barrier's lines in the
 * exclusive state: their reader read them in the barrier before.
 */
static void call_differs(uint64_t rec, uint64_t theirs, int q, const char *op) __attribute__((noreturn, cold));

static void world_dissem(const char *op)
{
	shmemi_quiet();
	/* Owner only: a relaxed load, a release store (the runtime's). */
	uint32_t c = __atomic_load_n(&dis_count->count, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&dis_count->count, c, __ATOMIC_RELEASE);
	int relaxed = shmemi_L.post_relaxed;
	/* The record of this PE's call, which each round's line carries to
	 * its reader, as the runtime's barrier (internal/team, dissem.go):
	 * PEs in one barrier are in one call, with the same arguments. */
	uint64_t rec = shmemi_call_record(0);
	for (int r = 0; r < shmemi_L.barrier_rounds; r++) {
		struct shmemi_post_line *pl = &dis_mine[r]->line[c & 1];
		__atomic_store_n((uint64_t *)(void *)(pl->data + SHMEMI_BARRIER_RECORD_OFF), rec, __ATOMIC_RELAXED);
		post_publish(pl, c, relaxed);
		/* A few pauses before the first look at the other's line, which a
		 * PE arriving about now is writing (shmsync.SettlePolls). */
		for (int i = 0; i < shmemi_L.settle; i++)
			shmemi_pause();
		struct shmemi_post_line *src = &dis_from[r]->line[c & 1];
		post_await(src, c, relaxed, op);
		uint64_t theirs = __atomic_load_n((uint64_t *)(void *)(src->data + SHMEMI_BARRIER_RECORD_OFF), __ATOMIC_RELAXED);
		if (SHMEMI_UNLIKELY(rec != 0 && theirs != 0 && theirs != rec))
			call_differs(rec, theirs, dis_from_pe[r], op);
	}
	for (int r = 0; r < shmemi_L.barrier_rounds; r++)
		shmemi_prefetch_w(&dis_mine[r]->line[(c + 1) & 1]);
}

/*
 * shmemi_agree: phase seq of the collective allocation's agreement, the
 * runtime's (internal/team, agree.go, on the same lines and in the same
 * order, so that Go and C PEs of one job meet in it): for each of the
 * barrier_rounds rounds, store rec (or, once a difference was seen, the
 * poisoned record: every word all ones) in this PE's line (r, seq%2),
 * publish seq, wait until the line (r, seq%2) of the PE 2^r places before
 * it holds seq, and compare its words with rec. It returns 1 when every
 * PE's record equals rec, on every PE alike. The caller quieted (its
 * owed fence is paid by the release store, or the store is seq-cst). A
 * line's words are rewritten in phase seq+2, after its reader has left
 * seq.
 */
int shmemi_agree(uint64_t seq, const uint64_t *rec, const char *op)
{
	uint32_t s = (uint32_t)seq; /* lines compare modulo 2^32 */
	int relaxed = shmemi_L.post_relaxed, ok = 1;
	for (int r = 0; r < shmemi_L.barrier_rounds; r++) {
		struct shmemi_agree_line *pl = &agree_mine[r]->line[s & 1];
		uint64_t *w = (uint64_t *)(void *)pl->data;
		for (int i = 0; i < SHMEMI_AGREE_WORDS; i++)
			__atomic_store_n(&w[i], ok ? rec[i] : ~(uint64_t)0, __ATOMIC_RELAXED);
		/* As post_publish, with the sleepers on the next line (the
		 * runtime's agreeLine says why). */
		publish_word(&pl->seq, &pl->sleepers, s, relaxed);
		/* A few pauses before the first look at the other's line
		 * (shmsync.SettlePolls). */
		for (int i = 0; i < shmemi_L.settle; i++)
			shmemi_pause();
		struct shmemi_agree_line *src = &agree_from[r]->line[s & 1];
		struct post_wait pw = {&src->seq, s};
		if (!post_reached(&pw))
			shmemi_block_word(&src->seq, &src->sleepers, relaxed, post_reached, &pw, op);
		if (ok) {
			/* Loads after the seq load that saw s. */
			const uint64_t *theirs = (const uint64_t *)(const void *)src->data;
			for (int i = 0; i < SHMEMI_AGREE_WORDS && ok; i++)
				ok = __atomic_load_n(&theirs[i], __ATOMIC_RELAXED) == rec[i];
		}
	}
	for (int r = 0; r < shmemi_L.barrier_rounds; r++)
		shmemi_prefetch_w(&agree_mine[r]->line[(s + 1) & 1].seq);
	return ok;
}

/* shmemi_world_barrier is barrier_all and the sync of SHMEM_TEAM_WORLD and
 * SHMEM_TEAM_SHARED (the same PEs on one node): the dissemination barrier
 * of the world team, the Go runtime's. */
/* shmemi_call_broken ends the job at a collective call made after the
 * runtime found the PEs' calls diverged (it said how on stderr). */
/* call_differs ends the job: this PE's call (record rec) met PE q's call
 * of record theirs in a step of one protocol (internal/calls, Differs). */
static void call_differs(uint64_t rec, uint64_t theirs, int q, const char *op)
{
	char err[1024];
	symheapc_go_differs(rec, theirs, q, err, sizeof err);
	shmemi_flush_stdio();
	fprintf(stderr, "symheap: %s (PE %d in %s)\n", err, shmemi_L.me, op);
	fflush(stderr);
	_exit(1);
}

void shmemi_call_broken(int kind)
{
	(void)kind;
	shmemi_fatal("collective call", "an earlier collective call diverged (the message above says how): "
					"every PE must make the same collective calls in the same order");
}

void shmemi_world_barrier(const char *op)
{
	if (SHMEMI_UNLIKELY(shmemi_L.far_pe != NULL)) {
		/* The runtime's barrier, which publishes its call and quiets. */
		char err[1024];
		shmemi_quiet();
		if (symheapc_go_barrier_all(err, sizeof err) != 0)
			shmemi_fatal(op, "%s", go_msg(err));
		return;
	}
	/* Published as a Barrier whatever the caller (barrier_all, the sync
	 * of the world team): they all meet here (internal/calls). */
	shmemi_call_enter(SHMEMI_CALL_BARRIER, 0, 0);
	if (shmemi_L.npes > 1)
		world_dissem(op);
	else
		shmemi_quiet();
	shmemi_call_leave();
}


/* world_set: whether an active set is every PE in rank order, whose
 * barrier and sync are the world's (shmemi_world_barrier: the
 * dissemination barrier, its pSync left at SHMEM_SYNC_VALUE). */
static int world_set(int start, int logstride, int size)
{
	return start == 0 && logstride == 0 && size == shmemi_L.npes;
}

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
	set_check(PE_start, logPE_stride, PE_size, "shmem_barrier");
	if (far_world(PE_start, logPE_stride, PE_size, "shmem_barrier") || world_set(PE_start, logPE_stride, PE_size)) {
		shmemi_world_barrier("shmem_barrier");
		return;
	}
	set_barrier(PE_start, logPE_stride, PE_size, pSync, "shmem_barrier");
}

/* The deprecated active-set form; shmem.h's C11 shmem_sync macro picks it
 * or shmem_team_sync by the number of arguments. */
#undef shmem_sync
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
	set_check(PE_start, logPE_stride, PE_size, "shmem_sync");
	if (far_world(PE_start, logPE_stride, PE_size, "shmem_sync") || world_set(PE_start, logPE_stride, PE_size)) {
		shmemi_world_barrier("shmem_sync");
		return;
	}
	set_barrier(PE_start, logPE_stride, PE_size, pSync, "shmem_sync");
}

/* ---- the collectives, over a group: a team or an active set ---- */

struct group {
	int rank, size;
	const int *world; /* team: world PE of each rank; NULL: active set */
	int start, logstride;
	long *pSync;
	shmem_team_t team;
};

/* call_team is the team id whose count a collective over g publishes
 * (internal/calls): the team's, 0 for an active set of every PE in rank
 * order, -1 (nothing published) for any other active set, which has no
 * team of its own. */
static int call_team(const struct group *g)
{
	if (g->world)
		return team_of(g->team, "collective")->id;
	return g->start == 0 && g->logstride == 0 && g->size == shmemi_L.npes ? 0 : -1;
}

/* call_enter publishes a call of kind on g's team, if it has an id, with
 * its arguments (shmemi_call_args; 0: none to compare). */
static void call_enter(const struct group *g, int kind, uint64_t args)
{
	int id = call_team(g);
	if (id >= 0)
		shmemi_call_enter(kind, id, args);
}

static void call_leave(const struct group *g)
{
	if (call_team(g) >= 0)
		shmemi_call_leave();
}

static int gpe(const struct group *g, int r)
{
	return g->world ? g->world[r] : g->start + (r << g->logstride);
}

/* gsync: the sync of a collective's group, a step of the caller's call.
 * The world's PEs (call_team 0: a team of the whole job, or an active set
 * of every PE in rank order) take the world's dissemination barrier,
 * ⌈log₂ n⌉ lines a member, where the counter barrier on pSync costs n-1
 * (its pSync stays at SHMEM_SYNC_VALUE); another team takes the
 * runtime's barrier of that team. Neither enters a call of its own: the
 * lines carry the record of the caller's call, so members that passed
 * other sizes or another root fail here (internal/calls, "Arguments")
 * instead of copying each other's bytes as if they agreed. */
static void gsync(const struct group *g, const char *op)
{
	int id = call_team(g);
	if (shmemi_L.far_pe != NULL && g->world) {
		shmem_team_sync(g->team); /* the runtime's, across nodes */
	} else if (id == 0) {
		if (shmemi_L.npes > 1)
			world_dissem(op);
		else
			shmemi_quiet();
	} else if (g->world) {
		char err[1024];
		shmemi_full_fence();
		if (team_of(g->team, op)->size > 1 && symheapc_go_team_sync_in_call(id, err, sizeof err) != 0)
			shmemi_fatal(op, "%s", go_msg(err));
	} else {
		set_barrier(g->start, g->logstride, g->size, g->pSync, op);
	}
}

static int team_group(shmem_team_t team, struct group *g, const char *op)
{
	struct shmemi_team *t = team_of(team, op);
	if (t->rank < 0)
		shmemi_fatal(op, "this PE is not a member of the team");
	*g = (struct group){t->rank, t->size, t->world, 0, 0, NULL, team};
	return 0;
}

static void set_group(int start, int logstride, int size, long *pSync, struct group *g, const char *op)
{
	set_check(start, logstride, size, op);
	*g = (struct group){(shmemi_L.me - start) >> logstride, size, NULL, start, logstride, pSync, NULL};
}

/* peer_src returns where this PE reads the n bytes at src of PE pe: its
 * copy, or, for a PE on another node, *buf (grown as needed, freed by
 * the caller) after a get through the transport (far.c). */
static const char *peer_src(const void *src, size_t n, int pe, char **buf, size_t *cap, const char *op)
{
	if (!shmemi_goes_far(pe))
		return shmemi_addr(src, n, pe, op);
	if (n > *cap) {
		free(*buf);
		*buf = malloc(n);
		*cap = n;
		if (*buf == NULL)
			shmemi_fatal(op, "out of memory for %zu bytes", n);
	}
	shmemi_far_get(*buf, src, n, pe, op);
	return *buf;
}

/* post_group reports whether the group is every PE of the job in rank
 * order, which the post lines serve (none in a job on several nodes). */
static int post_group(const struct group *g)
{
	if (shmemi_L.far_pe != NULL)
		return 0;
	if (g->world)
		return g->team == SHMEM_TEAM_WORLD || g->team == SHMEM_TEAM_SHARED;
	return g->start == 0 && g->logstride == 0 && g->size == shmemi_L.npes;
}

static void post_broadcast(void *dest, const void *src, size_t bytes, int root, int self, const char *op)
{
	uint32_t n = post_bcasts++;
	int me = shmemi_L.me;
	if (me == root) {
		if (n >= SHMEMI_POST_RING) {
			/* Line n%SHMEMI_POST_RING last held call n-SHMEMI_POST_RING: every PE
			 * must be done with it. */
			for (int j = 0; j < shmemi_L.npes; j++) {
				uint32_t want = n - SHMEMI_POST_RING + 1;
				if (j == me || (int32_t)(post_seen_done[j] - want) >= 0)
					continue;
				struct shmemi_post_line *d = &shmemi_post_peer[j]->done;
				post_await_done(d, want, n - SHMEMI_POST_RING / 2, op);
				post_seen_done[j] = __atomic_load_n(&d->seq, __ATOMIC_SEQ_CST);
			}
		}
		shmemi_quiet();
		struct shmemi_post_line *pl = &shmemi_post->post[n % SHMEMI_POST_RING];
		shmemi_memcpy(pl->data, src, bytes);
		post_publish(pl, n + 1, 0);
		/* The next two calls' lines: their readers are most likely done
		 * with them; ask for each exclusive two calls ahead and again
		 * one call ahead, as the Go runtime's root does
		 * (internal/team, postBcast). */
		shmemi_prefetch_w(&shmemi_post->post[(n + 1) % SHMEMI_POST_RING]);
		shmemi_prefetch_w(&shmemi_post->post[(n + 2) % SHMEMI_POST_RING]);
		if (self && dest != src && bytes)
			memmove(dest, src, bytes);
	} else {
		struct shmemi_post_line *pl = &shmemi_post_peer[root]->post[n % SHMEMI_POST_RING];
		post_await(pl, n + 1, 0, op);
		shmemi_memcpy(dest, pl->data, bytes);
		/* A later call's line: a root that runs ahead has written it,
		 * and its transfer overlaps the calls in between. */
		__builtin_prefetch(&shmemi_post_peer[root]->post[(n + SHMEMI_POST_AHEAD) % SHMEMI_POST_RING], 0, 3);
	}
	/* A line of our own that a root reads once every few calls; after the
	 * copy out of the root's line. */
	post_publish(&shmemi_post->done, n + 1, 0);
}

/* post_reduce is the small reduction, the g-th, as the Go runtime's
 * (internal/team, postReduce): flat up to SHMEMI_POST_FLAT PEs, else up
 * and down a binomial tree of ranks over the gather lines. */
static void post_reduce(void *dest, const void *src, size_t n, size_t bytes, shmemi_combine_fn combine,
			const char *op)
{
	uint32_t g = post_gathers++;
	int me = shmemi_L.me, npes = shmemi_L.npes;
	struct shmemi_post_line *mine = &shmemi_post->gather[g & 1];
	if (npes > SHMEMI_POST_FLAT) {
		/* The tree (internal/team, postReduceTree has the steps and why
		 * the lines of call g are free again at g+2): rank r's parent is
		 * r minus its lowest set bit, its children r+1, r+2, r+4, ...
		 * below that bit. Up: fold the children's lines (seq 2g+1), lowest
		 * first, into our own and publish it; down: copy the result from
		 * the parent's line (seq 2g+2) and publish it to our children.
		 * Every PE gets the bits PE 0 computed. */
		uint32_t up = 2 * g + 1, down = 2 * g + 2;
		int low = me & -me, children = 0;
		shmemi_memcpy(mine->data, src, bytes);
		for (int c = 1; me + c < npes && (me == 0 || c < low); c <<= 1) {
			struct shmemi_post_line *pl = &shmemi_post_peer[me + c]->gather[g & 1];
			children = 1;
			post_await(pl, up, 0, op);
			combine(mine->data, pl->data, n);
		}
		if (me != 0) {
			post_publish(mine, up, 0);
			struct shmemi_post_line *pl = &shmemi_post_peer[me - low]->gather[g & 1];
			post_await(pl, down, 0, op);
			memcpy(mine->data, pl->data, bytes);
		}
		if (children)
			post_publish(mine, down, 0);
		shmemi_memcpy(dest, mine->data, bytes);
		shmemi_prefetch_w(&shmemi_post->gather[(g + 1) & 1]);
		return;
	}
	shmemi_memcpy(mine->data, src, bytes);
	post_publish(mine, g + 1, 0);
	/* A few pauses before the first look at another PE's line, which a PE
	 * arriving about now is writing (shmsync.SettlePolls, as world_dissem). */
	for (int i = 0; i < shmemi_L.settle; i++)
		shmemi_pause();
	for (int j = 0; j < npes; j++)
		if (j != me)
			post_await(&shmemi_post_peer[j]->gather[g & 1], g + 1, 0, op);
	/* Every PE folds in rank order, so all get the same bits. */
	unsigned char acc[SHMEMI_POST_DATA];
	memcpy(acc, shmemi_post_peer[0]->gather[g & 1].data, bytes);
	for (int j = 1; j < npes; j++)
		combine(acc, shmemi_post_peer[j]->gather[g & 1].data, n);
	shmemi_memcpy(dest, acc, bytes);
}

/*
 * Go and C PEs in one job (docs/c.md): the team collectives the Go
 * runtime has (broadcast, reduce, fcollect, alltoall) run its steps, on
 * every PE of the job (go_collective, go_reduce); the others (collect,
 * alltoalls with strides, the scans, every active-set routine) run here
 * and only on groups of C PEs (c_only), as a Go PE could not take part.
 * The arrays must lie in the symmetric heap (the runtime has no view of
 * a C program's static data).
 */
static int go_arrays(const struct group *g, const void *dest, const void *src, size_t dbytes, size_t sbytes,
		     const char *op)
{
	uint64_t off;
	if ((dbytes > 0 && shmemi_locate(dest, dbytes, &off) == 2) || (sbytes > 0 && shmemi_locate(src, sbytes, &off) == 2)) {
		/* A job on several nodes: this library's own steps, which
		 * read the members' static data through the transport. */
		(void)g;
		if (shmemi_L.far_pe != NULL && shmemi_L.go_pes == 0)
			return 1;
		shmemi_fatal(op, "in a job with Go PEs a collective's arrays must lie in the symmetric heap (shmem_malloc): "
				 "static data are symmetric among the C PEs only");
	}
	return 0;
}

/* go_bounce: the heap block of a world collective on static arrays in a
 * job on several nodes (go_arrays): dbytes for dest, then sbytes holding
 * a copy of src. Every PE of the world passes the same arrays, so every
 * one makes the same collective allocation. */
static char *go_bounce(const void *src, size_t dbytes, size_t sbytes, const char *op)
{
	char *b = shmem_malloc(dbytes + sbytes);
	if (b == NULL)
		shmemi_fatal(op, "no heap block of %zu bytes for a collective on static data across nodes "
				 "(raise SHMEM_SYMMETRIC_SIZE)",
			     dbytes + sbytes);
	shmemi_memcpy(b + dbytes, src, sbytes);
	return b;
}

static void go_collective(int kind, const struct group *g, void *dest, const void *src, size_t n, int root,
			  const char *op)
{
	char err[1024];
	shmemi_quiet();
	if (g->size == 1 && g->team == SHMEM_TEAM_SHARED) { /* this PE alone (a job on several nodes) */
		if (dest != src && n)
			memmove(dest, src, n);
		return;
	}
	if (symheapc_go_collective(kind, team_of(g->team, op)->id, dest, (void *)src, n, root, err, sizeof err) != 0)
		shmemi_fatal(op, "%s", go_msg(err));
}

static void go_reduce(const struct group *g, void *dest, const void *src, size_t n, size_t size,
		      shmemi_combine_fn combine, const char *op)
{
	char err[1024];
	if (size && n > SIZE_MAX / size)
		shmemi_fatal(op, "%zu elements overflow", n);
	shmemi_quiet();
	if (g->size == 1 && g->team == SHMEM_TEAM_SHARED) {
		if (dest != src && n * size != 0)
			memmove(dest, src, n * size);
		return;
	}
	if (symheapc_go_reduce(team_of(g->team, op)->id, dest, (void *)src, n, size, combine, err, sizeof err) != 0)
		shmemi_fatal(op, "%s", go_msg(err));
}

/* c_only refuses a collective that only the C library has over a group
 * with a Go PE (c_only_pe). */
static void c_only(const struct group *g, const char *op)
{
	(void)op;
	for (int r = 0; shmemi_L.go_pes > 0 && r < g->size; r++)
		c_only_pe(gpe(g, r), op);
}

/* REDUCE_SHARES is the bytes above which a reduction is split in shares
 * (reduce_shares), as the Go runtime's above its scratch buffer
 * (internal/team, reduce); REDUCE_CHUNK the bytes of a share folded at a
 * time, so that they stay in the cache while every source is folded in. */
#define REDUCE_SHARES SHMEMI_SCRATCH_SIZE
#define REDUCE_CHUNK 4096

/* reduce_shares is the large reduction, as the Go runtime's: a reduce-
 * scatter and an allgather in one pass between two syncs. Member r folds
 * its share of the elements (equal shares rounded up to whole 64-byte
 * lines) over every member's source, in its own destination, and writes
 * the result into every other member's destination. A member reads and
 * writes only its share of anyone's arrays, so dest == src is safe; each
 * moves about twice the array's bytes, where folding every member's whole
 * source moved the array's bytes times the group's size. */
static void reduce_shares(const struct group *g, void *dest, const void *src, size_t n, size_t size,
			  shmemi_combine_fn combine, const char *op)
{
	size_t q = size < 64 ? 64 / size : 1;
	size_t per = (n + (size_t)g->size - 1) / (size_t)g->size;
	per = (per + q - 1) / q * q;
	size_t lo = (size_t)g->rank * per < n ? (size_t)g->rank * per : n;
	size_t hi = lo + per < n ? lo + per : n;
	size_t step = REDUCE_CHUNK / size ? REDUCE_CHUNK / size : 1;
	gsync(g, op);
	for (size_t c = lo; c < hi; c += step) {
		size_t e = c + step < hi ? c + step : hi, off = c * size, nb = (e - c) * size;
		char *acc = (char *)dest + off;
		if (dest != src)
			memcpy(acc, (const char *)src + off, nb);
		for (int r = 0; r < g->size; r++)
			if (r != g->rank)
				/* Direct loads of the member's share: single copy. */
				combine(acc, shmemi_addr((const char *)src + off, nb, gpe(g, r), op), e - c);
		for (int r = 0; r < g->size; r++)
			if (r != g->rank)
				memcpy(shmemi_addr((char *)dest + off, nb, gpe(g, r), op), acc, nb);
	}
	gsync(g, op);
}

static void reduce(const struct group *g, void *dest, const void *src, size_t n, size_t size,
		   shmemi_combine_fn combine, const char *op)
{
	size_t bytes = n * size;
	if (size && n > SIZE_MAX / size)
		shmemi_fatal(op, "%zu elements overflow", n);
	(void)shmemi_addr(dest, bytes, shmemi_L.me, op);
	(void)shmemi_addr(src, bytes, shmemi_L.me, op);
	if (bytes <= SHMEMI_POST_DATA && post_group(g)) {
		post_reduce(dest, src, n, bytes, combine, op);
		return;
	}
	if (bytes > REDUCE_SHARES && shmemi_L.far_pe == NULL) {
		reduce_shares(g, dest, src, n, size, combine, op);
		return;
	}
	/* Up to REDUCE_SHARES bytes; and any size in a job on several nodes,
	 * whose far members' sources are fetched whole (peer_src). */
	char stackbuf[REDUCE_SHARES];
	char *acc = bytes <= sizeof stackbuf ? stackbuf : malloc(bytes);
	if (acc == NULL)
		shmemi_fatal(op, "out of memory for %zu bytes", bytes);
	gsync(g, op);
	shmemi_memcpy(acc, src, bytes);
	char *fb = NULL;
	size_t fcap = 0;
	for (int r = 0; r < g->size; r++) {
		if (r == g->rank)
			continue;
		/* Direct loads of the member's source: single copy. */
		combine(acc, peer_src(src, bytes, gpe(g, r), &fb, &fcap, op), n);
	}
	gsync(g, op);
	shmemi_memcpy(dest, acc, bytes);
	free(fb);
	if (acc != stackbuf)
		free(acc);
}

int shmemi_team_reduce(shmem_team_t team, void *dest, const void *src, size_t n, size_t size,
		       shmemi_combine_fn combine, const char *op)
{
	struct group g;
	team_group(team, &g, op);
	if (go_route() && !go_arrays(&g, dest, src, n * size, n * size, op)) {
		go_reduce(&g, dest, src, n, size, combine, op);
		return 0;
	}
	call_enter(&g, SHMEMI_CALL_REDUCE, shmemi_call_args(n * size, -1));
	reduce(&g, dest, src, n, size, combine, op);
	call_leave(&g);
	return 0;
}

void shmemi_set_reduce(void *dest, const void *src, size_t n, size_t size, int start, int logstride,
		       int psize, long *pSync, shmemi_combine_fn combine, const char *op)
{
	struct group g;
	set_group(start, logstride, psize, pSync, &g, op);
	if (shmemi_L.far_pe != NULL) { /* every PE: the world (set_check) */
		shmemi_team_reduce(SHMEM_TEAM_WORLD, dest, src, n, size, combine, op);
		return;
	}
	call_enter(&g, SHMEMI_CALL_REDUCE, shmemi_call_args(n * size, -1));
	reduce(&g, dest, src, n, size, combine, op);
	call_leave(&g);
}

/* broadcast: every member but the root copies the root's source (team
 * form: the root copies its own too, as OpenSHMEM 1.5 says): from its
 * post line (at most SHMEMI_POST_DATA bytes), down the tree of scratch
 * buffers (the world above SHMEMI_POST_FLAT PEs, at most
 * SHMEMI_SCRATCH_SIZE bytes), else from its source. */
static void broadcast(const struct group *g, void *dest, const void *src, size_t bytes, int root, int self,
		      const char *op)
{
	if (root < 0 || root >= g->size)
		shmemi_fatal(op, "root %d is not a rank of the group (0 to %d)", root, g->size - 1);
	(void)shmemi_addr(dest, bytes, shmemi_L.me, op);
	(void)shmemi_addr(src, bytes, shmemi_L.me, op);
	if (bytes <= SHMEMI_POST_DATA && post_group(g)) {
		post_broadcast(dest, src, bytes, root, self, op);
		return;
	}
	if (bytes <= SHMEMI_SCRATCH_SIZE && g->size > SHMEMI_POST_FLAT && post_group(g)) {
		if (g->rank == root)
			shmemi_quiet();
		shmemi_tree_bcast(&tree_world, dest, src, bytes, root, self, op);
		return;
	}
	long *tick = NULL; /* two counter words: see below */
	if (!g->world)
		tick = psync(g->pSync)->bcast;
	else if ((g->team == SHMEM_TEAM_WORLD || g->team == SHMEM_TEAM_SHARED) && g->size <= SHMEMI_POST_FLAT &&
		 shmemi_L.far_pe == NULL)
		tick = shmemi_scratch->sync.bcast;
	/* A split team, or the world of more than SHMEMI_POST_FLAT PEs and
	 * more than SHMEMI_SCRATCH_SIZE bytes: two syncs of the team, each the dissemination barrier, ⌈log₂ n⌉ lines
	 * for every member, where the root of the handshake adds to n-1
	 * members' tickets and n-1 members add to its one (an active set's
	 * sync is the counter barrier, n-1 lines a member, so it keeps the
	 * handshake). */
	if (tick == NULL) {
		gsync(g, op);
		char *fb = NULL;
		size_t fcap = 0;
		if (g->rank != root && bytes > 0)
			memcpy(dest, peer_src(src, bytes, gpe(g, root), &fb, &fcap, op), bytes);
		else if (g->rank == root && self && dest != src && bytes)
			memmove(dest, src, bytes);
		free(fb);
		gsync(g, op);
		return;
	}
	/*
	 * A handshake instead of two barriers: the root hands every other
	 * member a ticket in its tick[0] (its source is ready), each member
	 * copies from the root's source and hands the root a ticket in the
	 * root's tick[1]; the root returns once it has them all (its source
	 * may then change). Tickets are counted and subtracted, as the
	 * barrier's arrivals.
	 */
	int rootpe = gpe(g, root);
	(void)shmemi_amo_addr(&tick[1], sizeof(long), shmemi_L.me, op);
	if (g->rank == root) {
		shmemi_quiet();
		for (int r = 0; r < g->size; r++)
			if (r != root)
				__atomic_fetch_add((long *)shmemi_amo_addr(&tick[0], sizeof(long), gpe(g, r), op), 1,
						   __ATOMIC_SEQ_CST);
		for (int r = 0; r < g->size; r++)
			if (r != root)
				coll_wake(gpe(g, r), op);
		if (self && dest != src && bytes)
			memmove(dest, src, bytes);
		struct count_wait c = {&tick[1], g->size - 1};
		if (!count_reached(&c))
			coll_block(count_reached, &c, op);
		__atomic_fetch_sub(&tick[1], g->size - 1, __ATOMIC_SEQ_CST);
		return;
	}
	struct count_wait c = {&tick[0], 1};
	if (!count_reached(&c))
		coll_block(count_reached, &c, op);
	__atomic_fetch_sub(&tick[0], 1, __ATOMIC_SEQ_CST);
	shmemi_memcpy(dest, shmemi_addr(src, bytes, rootpe, op), bytes);
	__atomic_fetch_add((long *)shmemi_amo_addr(&tick[1], sizeof(long), rootpe, op), 1, __ATOMIC_SEQ_CST);
	coll_wake(rootpe, op);
}

int shmemi_team_broadcast(shmem_team_t team, void *dest, const void *src, size_t n, int root, const char *op)
{
	struct group g;
	team_group(team, &g, op);
	if (go_route() && !go_arrays(&g, dest, src, n, n, op)) {
		go_collective(SHMEMI_GO_COLL_BROADCAST, &g, dest, src, n, root, op);
		return 0;
	}
	call_enter(&g, SHMEMI_CALL_BROADCAST, shmemi_call_args(n, root));
	broadcast(&g, dest, src, n, root, 1, op);
	call_leave(&g);
	return 0;
}

void shmemi_set_broadcast(void *dest, const void *src, size_t n, int root, int start, int logstride, int size,
			  long *pSync, const char *op)
{
	struct group g;
	set_group(start, logstride, size, pSync, &g, op);
	if (shmemi_L.far_pe != NULL) {
		/* The world's broadcast, but the root's dest stays as it was
		 * (OpenSHMEM 1.4's active-set form). */
		char *keep = NULL;
		if (g.rank == root && n > 0 && dest != src) {
			keep = malloc(n);
			if (keep == NULL)
				shmemi_fatal(op, "out of memory for %zu bytes", n);
			memcpy(keep, dest, n);
		}
		shmemi_team_broadcast(SHMEM_TEAM_WORLD, dest, src, n, root, op);
		if (keep != NULL) {
			memcpy(dest, keep, n);
			free(keep);
		}
		return;
	}
	call_enter(&g, SHMEMI_CALL_BROADCAST, shmemi_call_args(n, root));
	broadcast(&g, dest, src, n, root, 0, op);
	call_leave(&g);
}

/* scratch_fcollect is the world's fcollect of n <= SHMEMI_SCRATCH_SIZE
 * bytes a PE (fc_block) on more than 2 PEs: one sync of the world between
 * copying the source into this PE's scratch buffer and reading every
 * PE's, where collect reads the sources in place between two. (On 2 PEs
 * a sync is one line each way, and the copy costs more than it saves:
 * 0.39 µs a call at 512 bytes against 0.25, 2 PEs of the VM in
 * docs/bench/scale.md.) */
static void scratch_fcollect(void *dest, const void *src, size_t n, const char *op)
{
	uint32_t k = fc_calls++;
	int me = shmemi_L.me, np = shmemi_L.npes;
	(void)shmemi_addr(dest, n * (size_t)np, me, op);
	memcpy(fc_block[me]->scratch[k & 1], src, n);
	world_dissem(op);
	for (int r = 0; r < np; r++)
		memcpy((char *)dest + (size_t)r * n, r == me ? src : (const void *)fc_block[r]->scratch[k & 1], n);
}

/* collect: member r's n_r bytes go to dest at the sum of the n of the
 * ranks before it. fixed: every n is the same (fcollect). The counts are
 * published in the collect word of the world's scratch block (team) or of
 * pSync (active set). */
static void collect(const struct group *g, void *dest, const void *src, size_t n, int fixed, const char *op)
{
	(void)shmemi_addr(src, n, shmemi_L.me, op);
	if (fixed && n <= SHMEMI_SCRATCH_SIZE && g->size > 2 && post_group(g)) {
		scratch_fcollect(dest, src, n, op);
		return;
	}
	uint64_t *cnt = (uint64_t *)(g->world ? &shmemi_scratch->sync.collect : &psync(g->pSync)->collect);
	if (!fixed)
		__atomic_store_n(cnt, (uint64_t)n + 1, __ATOMIC_SEQ_CST);
	gsync(g, op);
	size_t off = 0;
	char *fb = NULL;
	size_t fcap = 0;
	for (int r = 0; r < g->size; r++) {
		size_t nr = n;
		if (!fixed)
			nr = (size_t)(__atomic_load_n((uint64_t *)shmemi_addr(cnt, 8, gpe(g, r), op), __ATOMIC_SEQ_CST) - 1);
		if (nr == 0)
			continue; /* src and dest may be NULL */
		(void)shmemi_addr(dest, off + nr, shmemi_L.me, op);
		memcpy((char *)dest + off, peer_src(src, nr, gpe(g, r), &fb, &fcap, op), nr);
		off += nr;
	}
	free(fb);
	gsync(g, op);
	if (!fixed)
		__atomic_store_n(cnt, g->world ? 0 : (uint64_t)SHMEM_SYNC_VALUE, __ATOMIC_SEQ_CST);
}

/*
 * far_collect: collect on the world of a job on several nodes, from the
 * runtime's fcollect over heap blocks (every PE of the world makes the
 * same allocations): the counts by an fcollect, then every source padded
 * to the largest by a second, compacted in rank order. (The counts word
 * of collect below is in the world's scratch block, which a job on
 * several nodes has not got.)
 */
static void far_collect(const struct group *g, void *dest, const void *src, size_t n, const char *op)
{
	size_t np = (size_t)g->size;
	uint64_t *cnt = (uint64_t *)go_bounce(&(uint64_t){n}, np * 8, 8, op);
	go_collective(SHMEMI_GO_COLL_FCOLLECT, g, cnt, cnt + np, 8, 0, op);
	size_t max = 0;
	for (size_t r = 0; r < np; r++)
		max = cnt[r] > max ? cnt[r] : max;
	if (max > 0) {
		char *b = shmem_calloc(np + 1, max);
		if (b == NULL)
			shmemi_fatal(op, "no heap block of %zu bytes for a collect across nodes (raise SHMEM_SYMMETRIC_SIZE)",
				     (np + 1) * max);
		shmemi_memcpy(b + np * max, src, n);
		go_collective(SHMEMI_GO_COLL_FCOLLECT, g, b, b + np * max, max, 0, op);
		size_t off = 0;
		for (size_t r = 0; r < np; r++) {
			shmemi_memcpy((char *)dest + off, b + r * max, cnt[r]);
			off += cnt[r];
		}
		shmem_free(b);
	}
	shmem_free(cnt);
}

/* far_world_group: a group of the whole world in a job on several nodes,
 * where far_collect serves. */
static int far_world_group(const struct group *g)
{
	return shmemi_L.far_pe != NULL && shmemi_L.go_pes == 0 && g->size == shmemi_L.npes && g->size > 1;
}

int shmemi_team_collect(shmem_team_t team, void *dest, const void *src, size_t n, int fixed, const char *op)
{
	struct group g;
	team_group(team, &g, op);
	if (!fixed && far_world_group(&g)) {
		far_collect(&g, dest, src, n, op);
		return 0;
	}
	if (!fixed && shmemi_L.far_pe != NULL && g.size > 1)
		shmemi_far_refuse(op);
	if (go_route() && fixed && !go_arrays(&g, dest, src, n * (size_t)g.size, n, op)) {
		go_collective(SHMEMI_GO_COLL_FCOLLECT, &g, dest, src, n, 0, op);
		return 0;
	}
	c_only(&g, op);
	call_enter(&g, (fixed ? SHMEMI_CALL_FCOLLECT : SHMEMI_CALL_COLLECT), fixed ? shmemi_call_args(n, -1) : 0);
	collect(&g, dest, src, n, fixed, op);
	call_leave(&g);
	return 0;
}

void shmemi_set_collect(void *dest, const void *src, size_t n, int fixed, int start, int logstride, int size,
			long *pSync, const char *op)
{
	struct group g;
	set_group(start, logstride, size, pSync, &g, op);
	if (shmemi_L.far_pe != NULL) {
		shmemi_team_collect(SHMEM_TEAM_WORLD, dest, src, n, fixed, op);
		return;
	}
	call_enter(&g, (fixed ? SHMEMI_CALL_FCOLLECT : SHMEMI_CALL_COLLECT), fixed ? shmemi_call_args(n, -1) : 0);
	collect(&g, dest, src, n, fixed, op);
	call_leave(&g);
}

/* alltoalls: from member j's source, the block for this rank goes to dest
 * block j. Strides (in elements) apply within each block. */
static void alltoalls(const struct group *g, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
		      size_t nelems, size_t size, const char *op)
{
	if (dst < 1 || sst < 1)
		shmemi_fatal(op, "strides dst %td and sst %td must be at least 1", dst, sst);
	size_t span_s = nelems ? ((nelems - 1) * (size_t)sst + 1) * size : 0;
	size_t span_d = nelems ? ((nelems - 1) * (size_t)dst + 1) * size : 0;
	size_t blk_s = nelems * (size_t)sst * size, blk_d = nelems * (size_t)dst * size;
	(void)shmemi_addr(src, blk_s * (size_t)(g->size - 1) + span_s, shmemi_L.me, op);
	(void)shmemi_addr(dest, blk_d * (size_t)(g->size - 1) + span_d, shmemi_L.me, op);
	gsync(g, op);
	char *fb = NULL;
	size_t fcap = 0;
	for (int j = 0; j < g->size && nelems > 0; j++) { /* none: src and dest may be NULL */
		const char *s = peer_src((const char *)src + blk_s * (size_t)g->rank, span_s, gpe(g, j), &fb, &fcap, op);
		char *d = (char *)dest + blk_d * (size_t)j;
		if (dst == 1 && sst == 1)
			memcpy(d, s, nelems * size);
		else
			for (size_t i = 0; i < nelems; i++)
				memcpy(d + i * (size_t)dst * size, s + i * (size_t)sst * size, size);
	}
	free(fb);
	gsync(g, op);
}

int shmemi_team_alltoalls(shmem_team_t team, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			  size_t nelems, size_t size, const char *op)
{
	struct group g;
	team_group(team, &g, op);
	if (go_route() && dst == 1 && sst == 1 && !go_arrays(&g, dest, src, nelems * size * (size_t)g.size, nelems * size * (size_t)g.size, op)) {
		if (size && nelems > SIZE_MAX / size / (size_t)g.size)
			shmemi_fatal(op, "%zu elements overflow", nelems);
		go_collective(SHMEMI_GO_COLL_ALLTOALL, &g, dest, src, nelems * size * (size_t)g.size, 0, op);
		return 0;
	}
	c_only(&g, op);
	call_enter(&g, SHMEMI_CALL_ALLTOALLS, shmemi_call_args(nelems * size, -1));
	alltoalls(&g, dest, src, dst, sst, nelems, size, op);
	call_leave(&g);
	return 0;
}

void shmemi_set_alltoalls(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
			  size_t size, int start, int logstride, int psize, long *pSync, const char *op)
{
	struct group g;
	set_group(start, logstride, psize, pSync, &g, op);
	if (shmemi_L.far_pe != NULL) {
		shmemi_team_alltoalls(SHMEM_TEAM_WORLD, dest, src, dst, sst, nelems, size, op);
		return;
	}
	call_enter(&g, SHMEMI_CALL_ALLTOALLS, shmemi_call_args(nelems * size, -1));
	alltoalls(&g, dest, src, dst, sst, nelems, size, op);
	call_leave(&g);
}

/* ---- scans (OpenSHMEM 1.6) ---- */

/*
 * shmemi_team_scan: shmem_sum_inscan and shmem_sum_exscan
 * (shmem_scan.tex). As a reduction (the top): a sync, so that every
 * member's source is ready (the specification does not ask the caller to
 * synchronise first) and every destination free; then each member folds
 * the sources of the ranks before it, read directly from their
 * partitions, in rank order (ranks 0 to i, or 0 to i-1 for the exclusive
 * scan, whose rank 0 gets zero: all bits clear, which is 0 and +0.0 for
 * every type of the table); a sync, after which no member reads a
 * source; and the copy into dest, which may be the source itself ("in
 * place"). Published as a call of its own kind (internal/calls), so that
 * a scan met by a reduction on another PE is reported as a divergence.
 */
int shmemi_team_scan(shmem_team_t team, void *dest, const void *src, size_t n, size_t size,
		     shmemi_combine_fn combine, int exclusive, const char *op)
{
	struct group g;
	team_group(team, &g, op);
	c_only(&g, op);
	if (size && n > SIZE_MAX / size)
		shmemi_fatal(op, "%zu elements overflow", n);
	size_t bytes = n * size;
	(void)shmemi_addr(dest, bytes, shmemi_L.me, op);
	(void)shmemi_addr(src, bytes, shmemi_L.me, op);
	call_enter(&g, SHMEMI_CALL_SCAN, shmemi_call_args(bytes, -1));
	char stackbuf[512];
	char *acc = bytes <= sizeof stackbuf ? stackbuf : malloc(bytes);
	if (acc == NULL)
		shmemi_fatal(op, "out of memory for %zu bytes", bytes);
	gsync(&g, op);
	int upto = exclusive ? g.rank : g.rank + 1; /* the ranks whose sources count */
	char *fb = NULL;
	size_t fcap = 0;
	if (bytes > 0) {
		if (upto == 0)
			memset(acc, 0, bytes);
		else
			memcpy(acc, peer_src(src, bytes, gpe(&g, 0), &fb, &fcap, op), bytes);
		for (int r = 1; r < upto; r++)
			combine(acc, peer_src(src, bytes, gpe(&g, r), &fb, &fcap, op), n);
	}
	free(fb);
	gsync(&g, op);
	shmemi_memcpy(dest, acc, bytes);
	if (acc != stackbuf)
		free(acc);
	call_leave(&g);
	return 0;
}
