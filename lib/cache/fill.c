/* Filling the build-id cache while recording (tally/cache.h): the recording's
 * thread hands over each sampled image once (a look at the cache, and for one
 * it lacks an open of the file while its process runs); a thread of the
 * filler copies, never the recording's, and ends when nothing is queued; at
 * the end of tally record whatever is left goes on in a detached process, so
 * the end never waits for a copy: the thread gives up the file at hand, and
 * is joined (no thread outlives the filler). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tally/cache.h"

#include "lib/cache/internal.h"

struct item {
	char *id_kind, *id, *src, *recorded;
	int fd; /* the file, opened when handed over; -1: open src when copied */
};

/* What the thread and the owner share; the last of them frees it. */
struct shared {
	pthread_mutex_t mu;
	struct item *q; /* q[head..n): to copy; q[head] is at hand while busy */
	size_t head, n, alloc;
	bool stop, busy, running;
	/* the thread, until joined (it may have ended: running is false) */
	pthread_t th;
	bool joinable;
	int halt; /* atomic: the copy at hand gives up (tally_cache_copy_stop) */
	int refs;
	size_t copied;
	struct tally_cache cache;
};

struct tally_cache_filler {
	struct shared *s;
	size_t seen, cached;
	char **keys; /* handed over already */
	size_t nkeys, akeys;
	struct tally_hidx key_idx;
};

/* The most files kept open for the queue: past it, a file is opened by name
 * when it is copied. */
#define MAX_OPEN 256
/* The longest wait for the thread at the filler's end, seconds. */
#define FILL_JOIN_S 2

static void item_release(struct item *it)
{
	free(it->id_kind);
	free(it->id);
	free(it->src);
	free(it->recorded);
	if (it->fd >= 0)
		close(it->fd);
	memset(it, 0, sizeof(*it));
	it->fd = -1;
}

static void shared_unref(struct shared *s)
{
	pthread_mutex_lock(&s->mu);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&s->mu);
	if (!last)
		return;
	for (size_t i = s->head; i < s->n; i++)
		item_release(&s->q[i]);
	free(s->q);
	tally_cache_close(&s->cache);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void copy_one(struct tally_cache *c, struct item *it)
{
	uint64_t limit;
	if (tally_cache_add_image(c, it->id_kind, it->id, it->fd, it->src, it->recorded) == 0 &&
	    tally_cache_limit(c, &limit) == 0)
		tally_cache_prune(c, limit, NULL, NULL);
}

static void *filler_thread(void *arg)
{
	struct shared *s = arg;
	/* the recording's signals are its main thread's */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* copies wait for what the machine runs, the profiled program first
	 * (Linux: the nice value of this thread alone) */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	tally_cache_copy_stop(&s->halt);
	pthread_mutex_lock(&s->mu);
	/* until the queue is empty: an idle thread is none, so that the end of a
	 * recording rarely has one to stop */
	while (!s->stop && s->head < s->n) {
		struct item it = s->q[s->head];
		s->busy = true;
		pthread_mutex_unlock(&s->mu);
		copy_one(&s->cache, &it);
		pthread_mutex_lock(&s->mu);
		s->busy = false;
		/* a handoff may have taken the queue meanwhile (and the item with it) */
		if (s->head < s->n && s->q[s->head].id == it.id) {
			item_release(&s->q[s->head]);
			s->head++;
			s->copied++;
		}
	}
	s->running = false;
	pthread_mutex_unlock(&s->mu);
	shared_unref(s);
	return NULL;
}

struct tally_cache_filler *tally_cache_filler_new(char **why)
{
	if (why)
		*why = NULL;
	struct shared *s = xcalloc(1, sizeof(*s));
	if (tally_cache_open(&s->cache, true)) {
		if (why && strncmp(tally_errmsg(), "the build-id cache is off", 25))
			*why = xstrdup(tally_errmsg());
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	s->refs = 1;
	struct tally_cache_filler *f = xcalloc(1, sizeof(*f));
	f->s = s;
	return f;
}

static bool key_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_cache_filler *f = ctx;
	return !strcmp(f->keys[idx], key);
}

void tally_cache_filler_image(struct tally_cache_filler *f, const char *id_kind, const char *id,
			      const char *src, const char *recorded, uint32_t maj, uint32_t min,
			      uint64_t ino)
{
	char key[TALLY_CACHE_KEY_MAX];
	if (!f || !tally_cache_key(id_kind, id, key))
		return;
	uint64_t h = tally_hash_bytes(key, strlen(key), 0);
	if (tally_hidx_get(&f->key_idx, h, key, key_eq, f) != TALLY_HIDX_NONE)
		return;
	GROW(f->keys, f->akeys, f->nkeys + 1);
	f->keys[f->nkeys] = xstrdup(key);
	tally_hidx_put(&f->key_idx, h, (uint32_t)f->nkeys++);
	f->seen++;
	struct shared *s = f->s;
	if (tally_cache_has(&s->cache, key, TALLY_CACHE_IMAGE)) {
		f->cached++;
		tally_cache_touch(&s->cache, key);
		return;
	}
	/* the file that was mapped, opened now: a program rebuilt in place once
	 * the recording is over is not the one copied */
	int fd = -1;
	pthread_mutex_lock(&s->mu);
	size_t queued = s->n - s->head;
	pthread_mutex_unlock(&s->mu);
	if (queued < MAX_OPEN) {
		struct stat st;
		fd = tally_open_regular(AT_FDCWD, src, TALLY_OPEN_FOLLOW, 0, &st);
		if (fd >= 0 && ino &&
		    (st.st_ino != ino || major(st.st_dev) != maj || minor(st.st_dev) != min)) {
			close(fd); /* replaced since it was mapped */
			return;
		}
		if (fd < 0)
			return;
	}
	pthread_mutex_lock(&s->mu);
	GROW(s->q, s->alloc, s->n + 1);
	s->q[s->n++] = (struct item){ xstrdup(id_kind), xstrdup(id), xstrdup(src),
				      recorded ? xstrdup(recorded) : NULL, fd };
	pthread_t ended;
	bool reap = false;
	if (!s->running && !s->stop) {
		/* the last thread emptied the queue and ended (or is ending: it
		 * takes the lock once more), joined once this one is unlocked */
		ended = s->th;
		reap = s->joinable;
		s->joinable = false;
		s->refs++;
		if (pthread_create(&s->th, NULL, filler_thread, s) == 0)
			s->running = s->joinable = true;
		else
			s->refs--; /* copied at the handoff, or not at all */
	}
	pthread_mutex_unlock(&s->mu);
	if (reap)
		pthread_join(ended, NULL);
}

void tally_cache_filler_counts(const struct tally_cache_filler *f, size_t *seen, size_t *cached,
			       size_t *copied)
{
	*seen = f ? f->seen : 0;
	*cached = f ? f->cached : 0;
	*copied = 0;
	if (f) {
		pthread_mutex_lock(&f->s->mu);
		*copied = f->s->copied;
		pthread_mutex_unlock(&f->s->mu);
	}
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return x < y ? -1 : x > y;
}

/* In the detached process: every descriptor but the files to copy closed,
 * the standard ones on /dev/null (nothing waits on a pipe we hold). */
static void detach_fds(const struct item *q, size_t n)
{
	int *keep = xcalloc(n + 1, sizeof(int));
	size_t nk = 0;
	for (size_t i = 0; i < n; i++)
		if (q[i].fd > 2)
			keep[nk++] = q[i].fd;
	tally_qsort(keep, nk, sizeof(int), cmp_int);
	unsigned from = 3;
	for (size_t i = 0; i < nk; i++) {
		if ((unsigned)keep[i] > from)
			close_range(from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	close_range(from, ~0U, 0);
	free(keep);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
}

void tally_cache_filler_handoff(struct tally_cache_filler *f)
{
	if (!f)
		return;
	struct shared *s = f->s;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	/* the file at hand goes with the queue: the thread gives it up */
	__atomic_store_n(&s->halt, 1, __ATOMIC_RELAXED);
	if (s->head == s->n) {
		pthread_mutex_unlock(&s->mu);
		return;
	}
	/* the queue, the file at hand too, goes with the process; the lock is
	 * held across the fork, so the copy of it is consistent */
	pid_t pid = fork();
	if (pid == 0) {
		if (fork() != 0)
			_exit(0); /* the grandchild is init's: nothing to reap */
		setsid();
		(void)setpriority(PRIO_PROCESS, 0, 19);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGTERM, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		detach_fds(s->q + s->head, s->n - s->head);
		struct tally_cache c;
		if (tally_cache_open(&c, true) == 0) {
			for (size_t i = s->head; i < s->n; i++)
				copy_one(&c, &s->q[i]);
			tally_cache_close(&c);
		}
		_exit(0);
	}
	if (pid > 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		/* the process copies them: this one does not */
		for (size_t i = s->head; i < s->n; i++)
			if (!(s->busy && i == s->head))
				item_release(&s->q[i]);
		if (s->busy) {
			/* the thread still reads its item: it stays, released with the queue */
			s->n = s->head + 1;
		} else {
			s->n = s->head;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

void tally_cache_filler_free(struct tally_cache_filler *f)
{
	if (!f)
		return;
	struct shared *s = f->s;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	__atomic_store_n(&s->halt, 1, __ATOMIC_RELAXED);
	bool join = s->joinable;
	s->joinable = false;
	pthread_t th = s->th;
	pthread_mutex_unlock(&s->mu);
	if (join) {
		/* it gives up its copy within a block (64 KiB) or a section; a
		 * thread stuck longer than FILL_JOIN_S in a read is left to end
		 * alone, as it used to be */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += FILL_JOIN_S;
		if (pthread_timedjoin_np(th, NULL, &until))
			pthread_detach(th);
	}
	shared_unref(s);
	for (size_t i = 0; i < f->nkeys; i++)
		free(f->keys[i]);
	free(f->keys);
	tally_hidx_release(&f->key_idx);
	free(f);
}
