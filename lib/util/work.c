/* Work in parallel: every call on a thread of its own, all at once. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "lib/util/internal.h"

#include <pthread.h>
#include <stdlib.h>

struct par_job {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t i;
};

static void *par_thread(void *arg)
{
	struct par_job *j = arg;
	j->fn(j->ctx, j->i);
	return NULL;
}

void tally_run_parallel(size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct par_job *j = xcalloc(n + 1, sizeof(*j));
	pthread_t *t = xcalloc(n + 1, sizeof(*t));
	bool *made = xcalloc(n + 1, sizeof(bool));
	for (size_t i = 0; i < n; i++) {
		j[i] = (struct par_job){ fn, ctx, i };
		if (pthread_create(&t[i], NULL, par_thread, &j[i]) == 0)
			made[i] = true;
		else
			fn(ctx, i); /* no thread to be had: here, in turn */
	}
	for (size_t i = 0; i < n; i++)
		if (made[i])
			pthread_join(t[i], NULL);
	free(made);
	free(t);
	free(j);
}
