/* Unit tests for lib/symbols/elfinfo.c: ELF identity (build-id, content hash,
 * executable or library) and the kernel symbol snapshot from kallsyms-format
 * files. */
#define _GNU_SOURCE
#include "unit.h"

#include <link.h>
#include <xxhash.h>

#include "tally/elfinfo.h"

/* ---- helpers ---- */

struct lib_search {
	const char *want; /* substring of the base name */
	char path[4096];
};

static int find_lib_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct lib_search *s = data;
	if (!info->dlpi_name || info->dlpi_name[0] != '/')
		return 0;
	if (strstr(tally_basename(info->dlpi_name), s->want)) {
		snprintf(s->path, sizeof(s->path), "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

/* The path of a loaded shared library whose name contains want, or "". */
static void loaded_lib(const char *want, char *out, size_t n)
{
	struct lib_search s = { .want = want, .path = "" };
	dl_iterate_phdr(find_lib_cb, &s);
	snprintf(out, n, "%s", s.path);
}

static uint64_t file_hash(const char *path)
{
	size_t len = 0;
	char *b = unit_read(path, &len);
	assert_non_null(b);
	uint64_t h = XXH64(b, len, 0);
	free(b);
	return h;
}

/* ---- tally_elf_info ---- */

static void test_elfinfo__bin_true(void **state)
{
	(void)state;
	struct tally_elf_info info;
	assert_int_equal(tally_elf_info("/bin/true", 0, &info), 0);
	assert_true(info.is_elf);
	assert_int_equal(info.build_id_len, 20); /* GNU build-id: SHA-1 */
	uint8_t zero[20] = { 0 };
	assert_memory_not_equal(info.build_id, zero, 20);
	assert_false(info.have_hash); /* not asked for */

	/* want_hash 1: a build-id makes the hash unnecessary */
	struct tally_elf_info again;
	assert_int_equal(tally_elf_info("/bin/true", 1, &again), 0);
	assert_false(again.have_hash);
	assert_int_equal(again.build_id_len, info.build_id_len);
	assert_memory_equal(again.build_id, info.build_id, info.build_id_len);

	/* want_hash 2: always, and it is XXH64 of the whole file */
	assert_int_equal(tally_elf_info("/bin/true", 2, &again), 0);
	assert_true(again.have_hash);
	assert_int_equal(again.hash, file_hash("/bin/true"));
	assert_memory_equal(again.build_id, info.build_id, info.build_id_len);

	/* the build-id agrees with the one the toolchain reports */
	char hex[129];
	tally_hex(info.build_id, info.build_id_len, hex);
	assert_int_equal(strlen(hex), 40);
	FILE *p = popen("readelf -n /bin/true 2>/dev/null | sed -n 's/.*Build ID: *//p'", "r");
	if (p) {
		char line[256] = "";
		if (fgets(line, sizeof(line), p) && line[0]) {
			line[strcspn(line, "\n")] = '\0';
			assert_string_equal(hex, line);
		}
		pclose(p);
	}
}

static void test_elfinfo__shared_library(void **state)
{
	(void)state;
	/* libelf is linked into this test and has no interpreter */
	char path[4096];
	loaded_lib("libelf", path, sizeof(path));
	if (!path[0]) {
		fprintf(stderr, "skip: libelf is not loaded from a file\n");
		skip();
	}
	struct tally_elf_info info;
	assert_int_equal(tally_elf_info(path, 1, &info), 0);
	assert_true(info.is_elf);
}

static void test_elfinfo__libc(void **state)
{
	(void)state;
	/* libc.so.6 can run as a program, so the file cannot say whether it is an
	 * executable: the writer takes that from the task list (see test-db). Here
	 * only its identity is checked. */
	char path[4096];
	loaded_lib("libc.so", path, sizeof(path));
	if (!path[0]) {
		fprintf(stderr, "skip: libc is not loaded from a file\n");
		skip();
	}
	struct tally_elf_info info;
	assert_int_equal(tally_elf_info(path, 1, &info), 0);
	assert_true(info.is_elf);
	assert_true(info.build_id_len > 0);
	assert_false(info.have_hash);
	/* the build-id is the one of the mapped copy: two reads agree */
	struct tally_elf_info again;
	assert_int_equal(tally_elf_info(path, 2, &again), 0);
	assert_memory_equal(again.build_id, info.build_id, info.build_id_len);
	assert_int_equal(again.hash, file_hash(path));
}

static void test_elfinfo__not_elf(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *txt = unit_path(dir, "notes.txt");
	const char *content = "just some text, not an ELF file\n";
	unit_write_str(txt, content);
	struct tally_elf_info info;
	assert_int_equal(tally_elf_info(txt, 1, &info), 0);
	assert_false(info.is_elf);
	assert_int_equal(info.build_id_len, 0);
	assert_true(info.have_hash);
	assert_int_equal(info.hash, XXH64(content, strlen(content), 0));
	/* different content, different hash */
	unit_write_str(txt, "just some text, not an ELF file!\n");
	struct tally_elf_info other;
	assert_int_equal(tally_elf_info(txt, 1, &other), 0);
	assert_int_not_equal(other.hash, info.hash);
	/* without want_hash nothing is hashed */
	assert_int_equal(tally_elf_info(txt, 0, &other), 0);
	assert_false(other.have_hash);
	/* an empty file hashes too */
	unit_write_str(txt, "");
	assert_int_equal(tally_elf_info(txt, 1, &other), 0);
	assert_false(other.is_elf);
	assert_true(other.have_hash);
	assert_int_equal(other.hash, XXH64("", 0, 0));
	/* something that starts like ELF but is cut short */
	unit_write(txt, "\x7f" "ELF\x02\x01\x01", 7);
	assert_int_equal(tally_elf_info(txt, 1, &other), 0);
	assert_true(other.have_hash);
	assert_int_equal(tally_remove_tree(dir), 0);
	free(txt);
	free(dir);
}

static void test_elfinfo__missing(void **state)
{
	(void)state;
	struct tally_elf_info info;
	int r = tally_elf_info("/nonexistent/tally/file", 1, &info);
	assert_int_equal(r, -ENOENT);
	assert_errmsg_has("/nonexistent/tally/file");
	assert_false(info.is_elf);
	assert_false(info.have_hash);
}

static void test_elfinfo__hex(void **state)
{
	(void)state;
	const uint8_t b[] = { 0x00, 0x01, 0xab, 0xff, 0x7e };
	char buf[11];
	memset(buf, 'x', sizeof(buf));
	tally_hex(b, sizeof(b), buf);
	assert_string_equal(buf, "0001abff7e");
	tally_hex(b, 0, buf);
	assert_string_equal(buf, "");
}

/* ---- kallsyms ---- */

/* Unsorted, with aliases at one address (global preferred), data symbols that
 * must not cut a function short, a weak symbol, module symbols, and lines to
 * skip. */
static const char kallsyms_text[] =
	"ffffffff81000200 t func_c\n"
	"ffffffff81000100 T func_b\n"
	"ffffffff81000000 t _text_local_alias\n"
	"ffffffff81000000 T _stext\n"
	"ffffffff81000050 D some_data\n"
	"ffffffff81000060 d more_data\n"
	"ffffffff81000070 r read_only\n"
	"ffffffff81000080 b bss_thing\n"
	"ffffffff81000180 W weak_func\n"
	"0000000000000000 A fixed_percpu_data\n"
	"not a symbol line\n"
	"\n"
	"ffffffffc0000080 T mod_func2\t[mymod]\n"
	"ffffffffc0000000 t mod_func\t[mymod]\n"
	"ffffffffc0001000 t other_mod_func\t[other_mod]\n";

#define K(x) (0xffffffff81000000ULL + (x))
#define M(x) (0xffffffffc0000000ULL + (x))

static char *write_kallsyms(char **dir, const char *text)
{
	*dir = unit_tmpdir();
	char *p = unit_path(*dir, "kallsyms");
	unit_write_str(p, text);
	return p;
}

static void check_ksym(const struct tally_ksym *k, uint64_t addr, uint64_t size, char type,
		       const char *name, const char *module)
{
	if (k->addr != addr || k->size != size || k->type != type || strcmp(k->name, name) ||
	    (module ? !k->module || strcmp(k->module, module) : k->module != NULL))
		fail_msg("ksym %#llx+%#llx %c '%s' [%s], want %#llx+%#llx %c '%s' [%s]",
			 (unsigned long long)k->addr, (unsigned long long)k->size, k->type, k->name,
			 k->module ? k->module : "-", (unsigned long long)addr,
			 (unsigned long long)size, type, name, module ? module : "-");
}

static void test_elfinfo__kallsyms_needed(void **state)
{
	(void)state;
	char *dir;
	char *p = write_kallsyms(&dir, kallsyms_text);
	/* unsorted, with a duplicate; 0x1000 lies below every symbol */
	const uint64_t addrs[] = { M(0x10), K(0x60), K(0x100), 0x1000, K(0x60), K(0x17f) };
	struct tally_ksym dummy;
	struct tally_ksym *ks = &dummy; /* must be overwritten */
	size_t n = 99;
	int r = tally_kallsyms_needed(p, addrs, ARRAY_SIZE(addrs), &ks, &n);
	if (r)
		fail_msg("tally_kallsyms_needed: %s", tally_errmsg());
	assert_int_equal(n, 3);
	/* sorted by address; sizes run to the next text symbol, ignoring data */
	check_ksym(&ks[0], K(0), 0x100, 'T', "_stext", NULL);
	check_ksym(&ks[1], K(0x100), 0x80, 'T', "func_b", NULL);
	check_ksym(&ks[2], M(0), 0x80, 't', "mod_func", "mymod");
	tally_ksyms_free(ks, n);

	/* a module symbol followed by another module's, and the last symbol */
	const uint64_t more[] = { M(0x80), M(0x1000), K(0x180), K(0x200) };
	r = tally_kallsyms_needed(p, more, ARRAY_SIZE(more), &ks, &n);
	assert_int_equal(r, 0);
	assert_int_equal(n, 4);
	check_ksym(&ks[0], K(0x180), 0x80, 'W', "weak_func", NULL);
	assert_string_equal(ks[1].name, "func_c");
	check_ksym(&ks[2], M(0x80), 0xf80, 'T', "mod_func2", "mymod");
	assert_int_equal(ks[3].addr, M(0x1000));
	assert_true(ks[3].size > 0);
	assert_string_equal(ks[3].name, "other_mod_func");
	assert_string_equal(ks[3].module, "other_mod");
	/* the table answers lookups */
	assert_ptr_equal(tally_ksym_find(ks, n, M(0x100)), &ks[2]);
	tally_ksyms_free(ks, n);

	/* no addresses: nothing */
	r = tally_kallsyms_needed(p, addrs, 0, &ks, &n);
	assert_int_equal(r, 0);
	assert_int_equal(n, 0);
	tally_ksyms_free(ks, n);
	/* only an address below every symbol: nothing */
	const uint64_t low[] = { 0x1000 };
	r = tally_kallsyms_needed(p, low, 1, &ks, &n);
	assert_int_equal(r, 0);
	assert_int_equal(n, 0);
	tally_ksyms_free(ks, n);

	assert_int_equal(tally_remove_tree(dir), 0);
	free(p);
	free(dir);
}

static void test_elfinfo__kallsyms_hidden(void **state)
{
	(void)state;
	char *dir;
	char *p = write_kallsyms(&dir, "0000000000000000 T _stext\n"
				       "0000000000000000 t func_a\n"
				       "0000000000000000 D data\n"
				       "0000000000000000 t mod_f\t[m]\n");
	const uint64_t addrs[] = { K(0x10) };
	struct tally_ksym *ks = NULL;
	size_t n = 0;
	int r = tally_kallsyms_needed(p, addrs, 1, &ks, &n);
	assert_true(r < 0);
	assert_errmsg_has("kptr_restrict");
	assert_errmsg_has(p);
	assert_null(ks);
	assert_int_equal(n, 0);
	assert_int_equal(tally_remove_tree(dir), 0);
	free(p);
	free(dir);
}

static void test_elfinfo__kallsyms_missing(void **state)
{
	(void)state;
	const uint64_t addrs[] = { K(0x10) };
	struct tally_ksym *ks = NULL;
	size_t n = 0;
	int r = tally_kallsyms_needed("/nonexistent/kallsyms", addrs, 1, &ks, &n);
	assert_int_equal(r, -ENOENT);
	assert_errmsg_has("/nonexistent/kallsyms");
	assert_null(ks);
	assert_int_equal(n, 0);
}

static void test_elfinfo__kallsyms_real(void **state)
{
	(void)state;
	/* the running kernel: the address of a known text symbol resolves to it */
	FILE *f = fopen("/proc/kallsyms", "re");
	if (!f) {
		fprintf(stderr, "skip: no /proc/kallsyms\n");
		skip();
	}
	char line[512];
	unsigned long long addr = 0;
	char name[256] = "";
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char type, nm[256];
		if (sscanf(line, "%llx %c %255s", &a, &type, nm) == 3 && a && type == 'T' &&
		    !strchr(line, '\t') && !strcmp(nm, "schedule")) {
			addr = a;
			snprintf(name, sizeof(name), "%s", nm);
			break;
		}
	}
	fclose(f);
	if (!addr) {
		fprintf(stderr, "skip: kernel symbol addresses are hidden\n");
		skip();
	}
	const uint64_t addrs[] = { addr + 1 };
	struct tally_ksym *ks = NULL;
	size_t n = 0;
	int r = tally_kallsyms_needed(NULL, addrs, 1, &ks, &n);
	if (r)
		fail_msg("tally_kallsyms_needed: %s", tally_errmsg());
	assert_int_equal(n, 1);
	assert_int_equal(ks[0].addr, addr);
	assert_true(ks[0].size > 1);
	assert_string_equal(ks[0].name, name);
	assert_null(ks[0].module);
	tally_ksyms_free(ks, n);
}

static void test_elfinfo__ksym_find(void **state)
{
	(void)state;
	struct tally_ksym t[] = {
		{ .addr = 0x1000, .size = 0x100, .type = 'T', .name = (char *)"a" },
		{ .addr = 0x1100, .size = 0, .type = 'T', .name = (char *)"b" }, /* unknown size: one byte */
		{ .addr = 0x2000, .size = 0x10, .type = 't', .name = (char *)"c" },
		{ .addr = 0x2010, .size = 0x10, .type = 't', .name = (char *)"d" },
	};
	const size_t n = ARRAY_SIZE(t);
	assert_null(tally_ksym_find(t, n, 0));
	assert_null(tally_ksym_find(t, n, 0xfff));
	assert_ptr_equal(tally_ksym_find(t, n, 0x1000), &t[0]);
	assert_ptr_equal(tally_ksym_find(t, n, 0x10ff), &t[0]);
	assert_ptr_equal(tally_ksym_find(t, n, 0x1100), &t[1]);
	assert_null(tally_ksym_find(t, n, 0x1101)); /* a gap */
	assert_null(tally_ksym_find(t, n, 0x1fff));
	assert_ptr_equal(tally_ksym_find(t, n, 0x2000), &t[2]);
	assert_ptr_equal(tally_ksym_find(t, n, 0x200f), &t[2]);
	assert_ptr_equal(tally_ksym_find(t, n, 0x2010), &t[3]); /* adjacent: the next one */
	assert_ptr_equal(tally_ksym_find(t, n, 0x201f), &t[3]);
	assert_null(tally_ksym_find(t, n, 0x2020)); /* past the end */
	assert_null(tally_ksym_find(t, n, UINT64_MAX));
	assert_null(tally_ksym_find(t, 0, 0x1000));
	assert_ptr_equal(tally_ksym_find(t, 1, 0x1050), &t[0]);
	assert_null(tally_ksym_find(t, 1, 0x1100));
	tally_ksyms_free(NULL, 0);
}

static void test_elfinfo__kernel_build_id(void **state)
{
	(void)state;
	char buf[160];
	memset(buf, 'x', sizeof(buf));
	tally_kernel_build_id(buf, sizeof(buf));
	size_t len = strlen(buf);
	assert_true(len < sizeof(buf));
	/* hex or nothing */
	assert_int_equal(len % 2, 0);
	for (size_t i = 0; i < len; i++)
		assert_non_null(strchr("0123456789abcdef", buf[i]));
	/* a buffer too small for it gets "" rather than a cut id */
	char small[8];
	tally_kernel_build_id(small, sizeof(small));
	assert_string_equal(small, "");
}

/* one ELF note: namesz, descsz, type, name and desc padded to 4 */
static size_t put_note(unsigned char *p, const char *name, uint32_t type, const unsigned char *desc,
		       uint32_t descsz)
{
	uint32_t namesz = (uint32_t)strlen(name) + 1;
	memcpy(p, &namesz, 4);
	memcpy(p + 4, &descsz, 4);
	memcpy(p + 8, &type, 4);
	size_t o = 12;
	memset(p + o, 0, (namesz + 3) & ~3u);
	memcpy(p + o, name, namesz);
	o += (namesz + 3) & ~3u;
	memset(p + o, 0, (descsz + 3) & ~3u);
	memcpy(p + o, desc, descsz);
	return o + ((descsz + 3) & ~3u);
}

/* A module's /sys/module/NAME/notes/.note.gnu.build-id, as the kernel gives it:
 * raw notes, the build-id found after other notes, never from a damaged one. */
static void test_elfinfo__notes_build_id(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *path = unit_path(dir, "note");
	unsigned char id[20], buf[256];
	for (int i = 0; i < 20; i++)
		id[i] = (unsigned char)(0xa0 + i);
	char want[41];
	tally_hex(id, sizeof(id), want);
	char out[160];

	/* a Linux note first, then the GNU build-id */
	size_t n = put_note(buf, "Linux", 1, (const unsigned char *)"\1\2\3\4", 4);
	n += put_note(buf + n, "GNU", NT_GNU_BUILD_ID, id, sizeof(id));
	unit_write(path, buf, n);
	tally_notes_build_id(path, out, sizeof(out));
	assert_string_equal(out, want);

	/* a GNU note of another type is not a build-id */
	n = put_note(buf, "GNU", NT_GNU_ABI_TAG, id, 16);
	unit_write(path, buf, n);
	tally_notes_build_id(path, out, sizeof(out));
	assert_string_equal(out, "");

	/* cut inside the id: nothing rather than half an id */
	n = put_note(buf, "GNU", NT_GNU_BUILD_ID, id, sizeof(id));
	unit_write(path, buf, n - 8);
	tally_notes_build_id(path, out, sizeof(out));
	assert_string_equal(out, "");

	/* a descsz that runs past the file */
	uint32_t huge = 0xfffffff0u;
	memcpy(buf + 4, &huge, 4);
	unit_write(path, buf, n);
	tally_notes_build_id(path, out, sizeof(out));
	assert_string_equal(out, "");

	/* missing file, and a buffer too small */
	n = put_note(buf, "GNU", NT_GNU_BUILD_ID, id, sizeof(id));
	unit_write(path, buf, n);
	char small[20];
	tally_notes_build_id(path, small, sizeof(small));
	assert_string_equal(small, "");
	unlink(path);
	tally_notes_build_id(path, out, sizeof(out));
	assert_string_equal(out, "");
	rmdir(dir);
	free(path);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_elfinfo__bin_true),
		cmocka_unit_test(test_elfinfo__shared_library),
		cmocka_unit_test(test_elfinfo__libc),
		cmocka_unit_test(test_elfinfo__not_elf),
		cmocka_unit_test(test_elfinfo__missing),
		cmocka_unit_test(test_elfinfo__hex),
		cmocka_unit_test(test_elfinfo__kallsyms_needed),
		cmocka_unit_test(test_elfinfo__kallsyms_hidden),
		cmocka_unit_test(test_elfinfo__kallsyms_missing),
		cmocka_unit_test(test_elfinfo__kallsyms_real),
		cmocka_unit_test(test_elfinfo__notes_build_id),
		cmocka_unit_test(test_elfinfo__ksym_find),
		cmocka_unit_test(test_elfinfo__kernel_build_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
