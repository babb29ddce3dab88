/* What the export writers share: the selection applied to a database, output
 * buffers, the --percent-limit cut and names fit for line formats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tally/export.h"

struct strbuf *tally_export_out_file(struct tally_export_out *out, const char *suffix)
{
	GROW(out->files, out->alloc, out->n + 1);
	struct tally_export_file *f = &out->files[out->n++];
	f->suffix = xstrdup(suffix);
	f->put = 0;
	strbuf_init(&f->data);
	return &f->data;
}

int tally_export_out_flush(struct tally_export_out *out, struct strbuf *sb)
{
	if (!out->put || sb->len < (1u << 20))
		return 0;
	for (size_t i = 0; i < out->n; i++)
		if (&out->files[i].data == sb) {
			int r = out->put(out->ctx, i, sb->buf, sb->len);
			out->files[i].put += sb->len;
			strbuf_reset(sb);
			return r;
		}
	return 0;
}

void tally_export_out_release(struct tally_export_out *out)
{
	for (size_t i = 0; i < out->n; i++) {
		free(out->files[i].suffix);
		strbuf_release(&out->files[i].data);
	}
	free(out->files);
	tally_warnings_release(&out->warnings);
	free(out->note);
	memset(out, 0, sizeof(*out));
}

struct trie_node {
	uint32_t parent;
	uint32_t key;
};

struct trie {
	struct trie_node *nodes;
	size_t n, alloc;
	uint64_t *counts; /* n * nevents */
	size_t acounts;
	struct tally_hidx idx;
};

static bool node_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct trie *t = ctx;
	const struct trie_node *k = key;
	return t->nodes[idx].parent == k->parent && t->nodes[idx].key == k->key;
}

void tally_export_trim(const uint32_t *keys, const struct tally_trim_stack *stacks, size_t n,
		       const uint64_t *counts, int nevents, const uint64_t *min, uint32_t *keep)
{
	size_t ne = (size_t)nevents, nkeys = 0;
	bool any = false;
	for (size_t e = 0; e < ne; e++)
		any |= min[e] > 0;
	for (size_t i = 0; i < n; i++) {
		keep[i] = stacks[i].len;
		if (stacks[i].first + stacks[i].len > nkeys)
			nkeys = stacks[i].first + stacks[i].len;
	}
	if (!any)
		return;
	struct trie t = { 0 };
	uint32_t *node_of = xmalloc((nkeys + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < n; i++) {
		uint32_t parent = UINT32_MAX;
		for (uint32_t j = 0; j < stacks[i].len; j++) {
			struct trie_node k = { parent, keys[stacks[i].first + j] };
			uint64_t h = tally_hash_u64(k.key ^ tally_hash_u64((uint64_t)parent + 1));
			uint32_t id = tally_hidx_get(&t.idx, h, &k, node_eq, &t);
			if (id == TALLY_HIDX_NONE) {
				GROW(t.nodes, t.alloc, t.n + 1);
				GROW(t.counts, t.acounts, (t.n + 1) * ne);
				t.nodes[t.n] = k;
				memset(&t.counts[t.n * ne], 0, ne * sizeof(uint64_t));
				tally_hidx_put(&t.idx, h, (uint32_t)t.n);
				id = (uint32_t)t.n++;
			}
			for (size_t e = 0; e < ne; e++)
				t.counts[id * ne + e] += counts[i * ne + e];
			node_of[stacks[i].first + j] = id;
			parent = id;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t j;
		for (j = 0; j < stacks[i].len; j++) {
			uint32_t id = node_of[stacks[i].first + j];
			bool big = false;
			for (size_t e = 0; e < ne && !big; e++)
				big = min[e] && t.counts[id * ne + e] >= min[e];
			if (!big)
				break;
		}
		keep[i] = j;
	}
	free(node_of);
	free(t.nodes);
	free(t.counts);
	tally_hidx_release(&t.idx);
}

void tally_export_trim_min(const struct tally_export *x, const uint64_t *totals, uint64_t *min)
{
	for (int i = 0; i < x->nevents; i++)
		min[i] = x->percent_limit > 0
				 ? (uint64_t)ceil((double)totals[i] * x->percent_limit / 100.0)
				 : 0;
}

void tally_export_add_name(struct strbuf *sb, const char *name, const char *bad)
{
	for (const char *p = name; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c == 0x7f)
			strbuf_addch(sb, '?');
		else if (strchr(bad, c))
			strbuf_addch(sb, '_');
		else
			strbuf_addch(sb, (char)c);
	}
}

const char *tally_export_image_name(const struct tally_db_image *im, struct strbuf *sb)
{
	strbuf_reset(sb);
	if (!strcmp(im->kind, "kernel"))
		strbuf_addstr(sb, "[kernel.kallsyms]");
	else if (!strcmp(im->kind, "vdso"))
		strbuf_addstr(sb, "[vdso]");
	else if (im->path[0] && (!strcmp(im->kind, "exec") || !strcmp(im->kind, "lib")))
		strbuf_addstr(sb, im->path);
	else
		strbuf_addf(sb, "[%s]", im->name);
	return sb->buf;
}

bool tally_export_is_file(const struct tally_db_image *im)
{
	return strcmp(im->kind, "kernel") && strcmp(im->kind, "jit") && strcmp(im->kind, "nomap");
}

uint64_t tally_export_addr(struct tally_resolver *res, uint32_t image, uint64_t offset)
{
	uint64_t addr;
	return tally_resolver_addr(res, image, offset, &addr) < 0 ? offset : addr;
}

static int cmp_comm(const void *a, const void *b)
{
	const struct tally_export_comm *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

void tally_export_comms_init(struct tally_export_comms *c, const struct tally_db *db)
{
	c->v = xcalloc(db->ntasks + 1, sizeof(*c->v));
	c->n = db->ntasks;
	for (size_t i = 0; i < db->ntasks; i++)
		c->v[i] = (struct tally_export_comm){ db->tasks[i].pid, i, db->tasks[i].comm };
	tally_qsort(c->v, c->n, sizeof(*c->v), cmp_comm);
}

struct comm_key {
	const struct tally_export_comms *c;
	int pid;
};

static bool pid_upto(const void *ctx, size_t i)
{
	const struct comm_key *k = ctx;
	return k->c->v[i].pid <= k->pid;
}

size_t tally_export_comm_at(const struct tally_export_comms *c, int pid)
{
	struct comm_key k = { c, pid };
	size_t lo = tally_partition(c->n, pid_upto, &k);
	/* the last task of that pid, as tally_db_comm */
	return lo && c->v[lo - 1].pid == pid ? lo - 1 : SIZE_MAX;
}

const char *tally_export_comm(const struct tally_export_comms *c, int pid)
{
	size_t at = tally_export_comm_at(c, pid);
	return at == SIZE_MAX ? NULL : c->v[at].comm;
}

void tally_export_comms_release(struct tally_export_comms *c)
{
	free(c->v);
	memset(c, 0, sizeof(*c));
}
