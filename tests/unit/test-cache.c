/* Unit tests for lib/cache, the build-id cache: where it is (XDG_CACHE_HOME,
 * off), entry names (only ids it may key by), adding a file (only when it has
 * the id; once), the least recently used going first when it is pruned (and
 * touching an entry keeping it), the temporaries of writers that are gone
 * swept, the size limit, a cache directory others may write refused, and the
 * filler's end leaving no thread behind. */
#define _GNU_SOURCE
#include "unit.h"

#include <signal.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "tally/cache.h"
#include "tally/elfinfo.h"
#include "tally/snapshot.h"
#include "lib/cache/internal.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

static char *dir;

/* The cache under the test's directory. */
static void use_dir(void)
{
	char *c = unit_path(dir, "cache");
	setenv("TALLY_BUILDID_CACHE", c, 1);
	unsetenv("TALLY_BUILDID_CACHE_SIZE");
	free(c);
}

static int setup(void **state)
{
	(void)state;
	dir = unit_tmpdir();
	use_dir();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tally_remove_tree(dir);
	free(dir);
	unsetenv("TALLY_BUILDID_CACHE");
	unsetenv("TALLY_BUILDID_CACHE_SIZE");
	return 0;
}

static void test_cache__key(void **state)
{
	(void)state;
	char key[TALLY_CACHE_KEY_MAX];
	assert_true(tally_cache_key("build-id", "93ac61ec5a8eb1396f9fbd350e3169a558528a40", key));
	assert_string_equal(key, "93ac61ec5a8eb1396f9fbd350e3169a558528a40");
	assert_true(tally_cache_key("xxh64", "00ff00ff00ff00ff", key));
	assert_string_equal(key, "xxh64-00ff00ff00ff00ff");
	/* no file to keep, or not an id: never a name that leaves the cache */
	assert_false(tally_cache_key("none", "00000000", key));
	assert_false(tally_cache_key("replaced", "00000000", key));
	assert_false(tally_cache_key("unreachable", "00000000", key));
	assert_false(tally_cache_key("build-id", "../../etc", key));
	assert_false(tally_cache_key("build-id", "ABCD", key));
	assert_false(tally_cache_key("build-id", "", key));
}

static void test_cache__path(void **state)
{
	(void)state;
	struct strbuf p = STRBUF_INIT;
	unsetenv("TALLY_BUILDID_CACHE");
	setenv("XDG_CACHE_HOME", "/x/cache", 1);
	assert_int_equal(tally_cache_path(&p), 0);
	assert_string_equal(p.buf, "/x/cache/tally/buildid");
	setenv("TALLY_BUILDID_CACHE", "off", 1);
	assert_int_equal(tally_cache_path(&p), -ENOENT);
	assert_errmsg_has("off");
	struct tally_cache c;
	assert_int_not_equal(tally_cache_open(&c, true), 0);
	assert_int_equal(c.fd, -1);
	unsetenv("XDG_CACHE_HOME");
	strbuf_release(&p);
	use_dir();
}

/* The build-id of this test's own executable (hex), or skip. */
static void self_id(char *hex)
{
	struct tally_elf_info info;
	assert_int_equal(tally_elf_info("/proc/self/exe", 0, &info), 0);
	if (!info.build_id_len)
		skip();
	tally_hex(info.build_id, info.build_id_len, hex);
}

/* No writer's temporary (.tmp-...) is left in the cache. */
static void no_temporaries(const struct tally_cache *c)
{
	DIR *d = opendir(c->path);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d)))
		assert_false(!strncmp(de->d_name, ".tmp-", 5));
	closedir(d);
}

static void test_cache__add_verified(void **state)
{
	(void)state;
	char id[160], key[TALLY_CACHE_KEY_MAX];
	self_id(id);
	struct tally_cache c;
	assert_int_equal(tally_cache_open(&c, true), 0);
	assert_true(tally_cache_key("build-id", id, key));
	assert_false(tally_cache_has(&c, key, TALLY_CACHE_IMAGE));
	/* another id: refused, nothing left behind */
	char other[160];
	strcpy(other, id);
	other[0] = other[0] == '0' ? '1' : '0';
	assert_int_equal(tally_cache_add(&c, "build-id", other, "/proc/self/exe", TALLY_CACHE_IMAGE,
					 "/bin/x"),
			 -ESTALE);
	char okey[TALLY_CACHE_KEY_MAX];
	assert_true(tally_cache_key("build-id", other, okey));
	assert_false(tally_cache_has(&c, okey, TALLY_CACHE_IMAGE));
	/* its own id: added once, then there already */
	assert_int_equal(
		tally_cache_add(&c, "build-id", id, "/proc/self/exe", TALLY_CACHE_IMAGE, "/bin/x"),
		1);
	assert_int_equal(
		tally_cache_add(&c, "build-id", id, "/proc/self/exe", TALLY_CACHE_IMAGE, "/bin/x"),
		0);
	char *p = tally_cache_find(&c, key, TALLY_CACHE_IMAGE);
	assert_non_null(p);
	struct tally_elf_info info;
	assert_int_equal(tally_elf_info(p, 0, &info), 0);
	char hex[160];
	tally_hex(info.build_id, info.build_id_len, hex);
	assert_string_equal(hex, id);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	free(p);
	assert_null(tally_cache_find(&c, key, TALLY_CACHE_DEBUG));
	struct tally_cache_list l;
	assert_int_equal(tally_cache_list(&c, &l), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.v[0].path, "/bin/x");
	assert_true(l.v[0].image && !l.v[0].debug);
	assert_true(l.bytes >= (uint64_t)st.st_size);
	tally_cache_list_release(&l);
	no_temporaries(&c);
	tally_cache_close(&c);
}

/* This process's threads (/proc/self/task). */
static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The filler's end leaves no thread of its own behind (valgrind called the
 * stack of one still copying at exit "possibly lost"), whether the copy at
 * hand was done or given up, and no temporary in the cache. */
static void test_cache__filler_joins(void **state)
{
	(void)state;
	char id[160];
	self_id(id);
	int before = threads();
	struct tally_cache_filler *f = tally_cache_filler_new(NULL);
	assert_non_null(f);
	struct stat st;
	assert_int_equal(stat("/proc/self/exe", &st), 0);
	tally_cache_filler_image(f, "build-id", id, "/proc/self/exe", "/bin/x", major(st.st_dev),
				 minor(st.st_dev), st.st_ino);
	/* at once: the thread has just begun its copy, or not even that */
	tally_cache_filler_free(f);
	assert_int_equal(threads(), before);
	struct tally_cache c;
	assert_int_equal(tally_cache_open(&c, false), 0);
	no_temporaries(&c);
	tally_cache_close(&c);
}

/* An entry made by hand: its image of size bytes, used at time t. */
static void make_entry(const struct tally_cache *c, const char *key, size_t size, time_t t)
{
	char *e = unit_path(c->path, key);
	assert_int_equal(mkdir(e, 0700), 0);
	char *img = unit_path(e, "image"), *used = unit_path(e, "used");
	char *buf = xcalloc(size + 1, 1);
	memset(buf, 'x', size); /* real blocks, not a hole */
	int fd = open(img, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0 && write(fd, buf, size) == (ssize_t)size);
	close(fd);
	fd = open(used, O_WRONLY | O_CREAT | O_EXCL, 0600);
	close(fd);
	struct timespec ts[2] = { { t, 0 }, { t, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, used, ts, 0), 0);
	free(buf);
	free(img);
	free(used);
	free(e);
}

static bool has_entry(const struct tally_cache *c, const char *key)
{
	return tally_cache_has(c, key, TALLY_CACHE_IMAGE);
}

static void test_cache__prune_lru(void **state)
{
	(void)state;
	struct tally_cache c;
	assert_int_equal(tally_cache_open(&c, true), 0);
	time_t now = time(NULL);
	/* four of 64 KiB: the oldest used first */
	make_entry(&c, "aaaa", 65536, now - 400);
	make_entry(&c, "bbbb", 65536, now - 300);
	make_entry(&c, "xxh64-cccc", 65536, now - 200);
	make_entry(&c, "dddd", 65536, now - 100);
	struct tally_cache_list l;
	assert_int_equal(tally_cache_list(&c, &l), 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.v[0].key, "dddd"); /* most recently used first */
	assert_string_equal(l.v[3].key, "aaaa");
	uint64_t one = l.v[0].bytes, all = l.bytes;
	assert_true(one >= 65536);
	tally_cache_list_release(&l);
	/* a report uses the oldest: it is now the newest */
	tally_cache_touch(&c, "aaaa");
	size_t removed;
	uint64_t freed;
	/* room for two: the two least recently used go (bbbb, cccc) */
	assert_int_equal(tally_cache_prune(&c, all - 2 * one, &removed, &freed), 0);
	assert_int_equal(removed, 2);
	assert_true(freed == 2 * one);
	assert_true(has_entry(&c, "aaaa"));
	assert_false(has_entry(&c, "bbbb"));
	assert_false(has_entry(&c, "xxh64-cccc"));
	assert_true(has_entry(&c, "dddd"));
	/* within the limit: nothing goes */
	assert_int_equal(tally_cache_prune(&c, all, &removed, NULL), 0);
	assert_int_equal(removed, 0);
	/* 0: everything */
	assert_int_equal(tally_cache_prune(&c, 0, &removed, NULL), 0);
	assert_int_equal(removed, 2);
	assert_int_equal(tally_cache_list(&c, &l), 0);
	assert_int_equal(l.n, 0);
	assert_true(l.bytes == 0);
	tally_cache_list_release(&l);
	tally_cache_close(&c);
}

static void test_cache__prune_sweeps_temporaries(void **state)
{
	(void)state;
	struct tally_cache c;
	assert_int_equal(tally_cache_open(&c, true), 0);
	/* a writer that is gone (a child reaped) and one that lives (this process) */
	pid_t pid = fork();
	if (!pid)
		_exit(0);
	assert_true(pid > 0);
	waitpid(pid, NULL, 0);
	char gone[64], mine[64];
	snprintf(gone, sizeof(gone), ".tmp-%d-0123456789abcdef", (int)pid);
	snprintf(mine, sizeof(mine), ".tmp-%d-0123456789abcdef", (int)getpid());
	for (int i = 0; i < 2; i++) {
		int fd = openat(c.fd, i ? mine : gone, O_WRONLY | O_CREAT | O_EXCL, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(tally_cache_prune(&c, UINT64_MAX, NULL, NULL), 0);
	struct stat st;
	assert_int_not_equal(fstatat(c.fd, gone, &st, 0), 0);
	assert_int_equal(fstatat(c.fd, mine, &st, 0), 0);
	unlinkat(c.fd, mine, 0);
	tally_cache_close(&c);
}

static void test_cache__limit(void **state)
{
	(void)state;
	struct tally_cache c;
	assert_int_equal(tally_cache_open(&c, true), 0);
	uint64_t v;
	assert_int_equal(tally_cache_limit(&c, &v), 0);
	assert_true(v > 0 && v <= TALLY_CACHE_DEFAULT_MAX);
	setenv("TALLY_BUILDID_CACHE_SIZE", "512M", 1);
	assert_int_equal(tally_cache_limit(&c, &v), 0);
	assert_true(v == UINT64_C(512) << 20);
	setenv("TALLY_BUILDID_CACHE_SIZE", "lots", 1);
	assert_int_equal(tally_cache_limit(&c, &v), -EINVAL);
	assert_errmsg_has("TALLY_BUILDID_CACHE_SIZE");
	unsetenv("TALLY_BUILDID_CACHE_SIZE");
	tally_cache_close(&c);
}

static void test_cache__refuses_shared_dir(void **state)
{
	(void)state;
	/* a directory above the cache that others may write: never used */
	char *open_dir = unit_path(dir, "open");
	assert_int_equal(mkdir(open_dir, 0700), 0);
	assert_int_equal(chmod(open_dir, 0777), 0);
	char *c_path = unit_path(open_dir, "cache");
	setenv("TALLY_BUILDID_CACHE", c_path, 1);
	struct tally_cache c;
	assert_int_not_equal(tally_cache_open(&c, true), 0);
	assert_errmsg_has("writable by others");
	assert_int_equal(c.fd, -1);
	free(c_path);
	free(open_dir);
	/* another user's home (root given a user's XDG_CACHE_HOME by sudo -E):
	 * refused before anything is made in it, or through its links */
	if (geteuid() == 0) {
		char *home = unit_path(dir, "u"), *victim = unit_path(dir, "victim"),
		     *lnk = unit_path(home, "lnk");
		assert_int_equal(mkdir(home, 0755), 0);
		assert_int_equal(mkdir(victim, 0755), 0);
		assert_int_equal(symlink(victim, lnk), 0);
		assert_int_equal(lchown(lnk, 65534, 65534), 0);
		assert_int_equal(chown(home, 65534, 65534), 0);
		const char *under[] = { "/.cache/tally/buildid", "/lnk/.cache/tally/buildid" };
		for (size_t i = 0; i < 2; i++) {
			char *p = unit_path(home, under[i] + 1);
			setenv("TALLY_BUILDID_CACHE", p, 1);
			assert_int_not_equal(tally_cache_open(&c, true), 0);
			assert_int_equal(c.fd, -1);
			free(p);
		}
		assert_int_equal(unit_dir_entries(home), 1); /* the link alone */
		assert_int_equal(unit_dir_entries(victim), 0);
		free(home);
		free(victim);
		free(lnk);
	}
	use_dir();
}

/* A core kernel text address from /proc/kallsyms, or 0 when they are hidden. */
static uint64_t kernel_text_addr(void)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];
	uint64_t a = 0;
	while (f && !a && fgets(line, sizeof(line), f)) {
		unsigned long long x;
		char t;
		if (sscanf(line, "%llx %c", &x, &t) == 2 && t == 'T' && !strchr(line, '['))
			a = x + 1;
	}
	if (f)
		fclose(f);
	return a;
}

static void same_symbol(const struct tally_kallsyms *x, const struct tally_kallsyms *y, uint64_t a)
{
	struct tally_ksym p, q;
	assert_true(tally_kallsyms_lookup(x, a, &p));
	assert_true(tally_kallsyms_lookup(y, a, &q));
	assert_true(p.addr == q.addr && p.size == q.size && p.type == q.type);
	assert_string_equal(p.name, q.name);
	free(p.name);
	free(p.module);
	free(q.name);
	free(q.module);
}

/* The kernel's symbols of a short recording: /proc/kallsyms read once per boot
 * and set of modules, the copy in the cache serving the next recordings for the
 * addresses it covers; a copy of another boot, other modules, or damaged, is
 * read again from /proc/kallsyms (and made again). */
static void test_cache__kernel_symbols(void **state)
{
	(void)state;
	uint64_t a = kernel_text_addr();
	if (!a) {
		fprintf(stderr,
			"skipped: kernel symbol addresses are hidden here (kernel.kptr_restrict, not root)\n");
		skip();
	}
	const char *mods = "# name size address build-id\n";
	struct tally_kallsyms *t1, *t2, *t3;
	bool hit;
	assert_int_equal(tally_kernel_symbols_for(&a, 1, mods, &t1, &hit), 0);
	assert_false(hit); /* an empty cache */
	assert_int_equal(tally_kernel_symbols_for(&a, 1, mods, &t2, &hit), 0);
	assert_true(hit);
	same_symbol(t1, t2, a);
	tally_kallsyms_free(t2);

	/* an address outside the core kernel and every module (a BPF program made
	 * since): read from /proc/kallsyms, the copy kept */
	uint64_t two[2] = { a, 0x1000 };
	assert_int_equal(tally_kernel_symbols_for(two, 2, mods, &t2, &hit), 0);
	assert_false(hit);
	same_symbol(t1, t2, a);
	tally_kallsyms_free(t2);
	/* ... unless a module holds it */
	char m2[256];
	snprintf(m2, sizeof(m2), "%s%s", mods, "fake 8192 0x0000000000001000 -\n");
	assert_int_equal(tally_kernel_symbols_for(two, 2, m2, &t2, &hit), 0);
	assert_false(hit); /* other modules: another tag, the copy made again */
	tally_kallsyms_free(t2);
	assert_int_equal(tally_kernel_symbols_for(two, 2, m2, &t2, &hit), 0);
	assert_true(hit);
	tally_kallsyms_free(t2);

	/* the copy, damaged at every length: never taken */
	struct tally_cache c;
	assert_int_equal(tally_cache_open(&c, false), 0);
	struct strbuf full = STRBUF_INIT;
	assert_int_equal(tally_cache_read_file(&c, "kernel-symbols", &full, 0), 0);
	struct strbuf tag = STRBUF_INIT, boot = STRBUF_INIT;
	char kid[160];
	tally_kernel_build_id(kid, sizeof(kid));
	assert_int_equal(strbuf_read_file(&boot, "/proc/sys/kernel/random/boot_id", 128), 0);
	strbuf_addf(&tag, "boot %skernel %s\n%s", boot.buf, kid[0] ? kid : "-", m2);
	/* whole: taken */
	assert_int_equal(tally_kallsyms_load(full.buf, full.len, tag.buf, &t3), 0);
	same_symbol(t1, t3, a);
	tally_kallsyms_free(t3);
	for (size_t cut = 0; cut < full.len; cut += 1 + cut / 3)
		assert_int_equal(tally_kallsyms_load(full.buf, cut, tag.buf, &t3), -EINVAL);
	strbuf_release(&tag);
	strbuf_release(&boot);
	full.buf[full.len - 1] = 'x'; /* the names no longer end */
	assert_int_equal(tally_cache_write_file(&c, "kernel-symbols", full.buf, full.len), 0);
	assert_int_equal(tally_kernel_symbols_for(two, 2, m2, &t2, &hit), 0);
	assert_false(hit);
	same_symbol(t1, t2, a);
	tally_kallsyms_free(t2);
	/* a copy of another boot */
	strbuf_reset(&full);
	tally_kallsyms_save(t1, "boot 00000000-0000-0000-0000-000000000000\nkernel -\n", &full);
	assert_int_equal(tally_cache_write_file(&c, "kernel-symbols", full.buf, full.len), 0);
	assert_int_equal(tally_kernel_symbols_for(&a, 1, mods, &t2, &hit), 0);
	assert_false(hit);
	tally_kallsyms_free(t2);
	assert_int_equal(tally_kernel_symbols_for(&a, 1, mods, &t2, &hit), 0);
	assert_true(hit);
	tally_kallsyms_free(t2);
	strbuf_release(&full);
	tally_cache_close(&c);
	tally_kallsyms_free(t1);
}

/* A copy made while another process moves the descriptor's position (the
 * filler hands its work to a process of its own, with the same descriptors):
 * the image kept is the file, byte for byte. */
static void test_cache__copy_ignores_shared_position(void **state)
{
	(void)state;
	char id[160], key[TALLY_CACHE_KEY_MAX];
	self_id(id);
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	pid_t kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		for (unsigned x = 1;; x = x * 1103515245u + 12345u)
			lseek(fd, (off_t)(x % (unsigned)st.st_size), SEEK_SET);
	}
	struct tally_cache c;
	assert_int_equal(tally_cache_open(&c, true), 0);
	int r = tally_cache_add_fd(&c, "build-id", id, fd, "/proc/self/exe", TALLY_CACHE_IMAGE,
				   NULL);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	assert_int_equal(r, 1);
	assert_true(tally_cache_key("build-id", id, key));
	char *p = tally_cache_find(&c, key, TALLY_CACHE_IMAGE);
	assert_non_null(p);
	size_t n1, n2;
	char *a = unit_read("/proc/self/exe", &n1), *b = unit_read(p, &n2);
	assert_true(n1 == n2 && n1 == (size_t)st.st_size);
	assert_memory_equal(a, b, n1);
	free(a);
	free(b);
	free(p);
	close(fd);
	tally_cache_close(&c);
}

/* A debug file whose compressed section claims far more than DWARF deflates
 * to (a bomb beside a program root records) is refused before libelf
 * allocates what it claims. */
static void test_cache__inflate_bounded(void **state)
{
	(void)state;
	char *src = unit_path(dir, "t.c"), *obj = unit_path(dir, "t.o"),
	     *out = unit_path(dir, "t.out");
	unit_write_str(src, "int f(int x) { return x * 3; }\nint g(int y) { return f(y) + 1; }\n");
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cc -g -c -o %s %s && objcopy --compress-debug-sections=zlib %s",
		 obj, src, obj);
	if (system(cmd) != 0) {
		fprintf(stderr, "skipped: cannot make a compressed debug file (cc, objcopy): %s\n",
			cmd);
		skip();
	}
	/* the object as it is: decompressed */
	int fd = open(obj, O_RDWR | O_CLOEXEC),
	    o = open(out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0 && o >= 0);
	assert_int_equal(tally_cache_decompress_elf(fd, o, obj), 0);
	/* its first compressed section made to claim 1 GiB */
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	uint64_t at = 0;
	for (Elf_Scn *scn = NULL; !at && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED))
			at = sh.sh_offset;
	}
	elf_end(e);
	assert_true(at != 0);
	uint64_t huge = UINT64_C(1) << 30;
	assert_int_equal(pwrite(fd, &huge, 8, (off_t)(at + offsetof(Elf64_Chdr, ch_size))), 8);
	assert_int_equal(ftruncate(o, 0), 0);
	assert_int_equal(tally_cache_decompress_elf(fd, o, obj), -EFBIG);
	assert_non_null(strstr(tally_errmsg(), "not cached"));
	close(fd);
	close(o);
	free(src);
	free(obj);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cache__key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__add_verified, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__prune_lru, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__prune_sweeps_temporaries, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cache__limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__refuses_shared_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__filler_joins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__kernel_symbols, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache__copy_ignores_shared_position, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cache__inflate_bounded, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
