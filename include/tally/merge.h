/* What `tally merge` knows of its inputs before it sums them: each one's
 * events, how they were sampled, the recordings it holds and the labels its
 * samples get (lib/db/merge.c). The summing itself is the database builder's
 * (tally_db_builder_*, canonical mode); the checks that refuse a merge and
 * their messages are the command's. */
#ifndef TALLY_MERGE_H
#define TALLY_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/epoch.h"

/* A --label as given: an empty value drops the key (and its default). */
struct tally_merge_label {
	char *key, *value;
};

struct tally_merge_input {
	const char *path;
	struct tally_merge_label *labels; /* the --label options before it */
	size_t nlabels;
	/* from its session (tally_merge_input_read) */
	char **events;
	int nevents;
	char *sampling, *call_graph, *host;
	char **period_kinds; /* per event: "fixed", "adaptive", or "" */
	char **units;        /* per event: what its values are (ns, events: tally_db_unit) */
	/* per event: its samples have values (weights, or a period-mean to weigh them by) */
	bool *valued;
	bool per_pid;
	/* the recordings it holds: a merge's sources, or itself (tally_db_source) */
	uint64_t *ids;
	char **held; /* each one's labels ("host=h1,run=a.db"), for messages */
	size_t nids;
	bool merge; /* it is a merge (it has sources) */
};

/* An input at path, with copies of the n labels given before it. */
void tally_merge_input_init(struct tally_merge_input *in, const char *path,
			    const struct tally_merge_label *labels, size_t n);
void tally_merge_input_release(struct tally_merge_input *in);
/* Fills in what the input's session says, reading no profile where it can:
 * a database's session and sources files, a bundle's; a daemon's database
 * or a selection of epochs is opened whole. 0, or the opener's error
 * (tally_seterr). */
int tally_merge_input_read(struct tally_merge_input *in, const struct tally_db_select *sel);
/* The index of event ev in the input, or -1. */
int tally_merge_event_index(const struct tally_merge_input *in, const char *ev);
/* The events of the result: the inputs' list when they all have the same,
 * else the union by name, sorted (the same whatever the order of the
 * inputs). The array is the caller's; its names are the inputs'. */
char **tally_merge_events(const struct tally_merge_input *in, size_t n, int *nev);
/* The labels of an input's samples: host (from its session) and run (its
 * name) unless a --label says otherwise. */
void tally_merge_source_labels(const struct tally_merge_input *in, struct tally_labelset *set);

#endif
