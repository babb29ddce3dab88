/* ELF identity (build-id, content hash, kind) and kernel symbol snapshots. */
#define _GNU_SOURCE
#include "tally/elfinfo.h"
#include "tally/util.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

void tally_hex(const uint8_t *p, size_t len, char *buf)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		buf[2 * i] = hx[p[i] >> 4];
		buf[2 * i + 1] = hx[p[i] & 15];
	}
	buf[2 * len] = '\0';
}

static int hash_fd(int fd, uint64_t *out)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size == 0) {
		*out = XXH64(NULL, 0, 0);
		return 0;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	*out = XXH64(m, (size_t)st.st_size, 0);
	munmap(m, (size_t)st.st_size);
	return 0;
}

int tally_elf_info(const char *path, int want_hash, struct tally_elf_info *out)
{
	memset(out, 0, sizeof(*out));
	int fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, NULL);
	if (fd < 0)
		return fd;
	int ret = tally_elf_info_fd(fd, path, want_hash, out);
	close(fd);
	return ret;
}

int tally_elf_info_fd(int fd, const char *path, int want_hash, struct tally_elf_info *out)
{
	memset(out, 0, sizeof(*out));
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (e && elf_kind(e) == ELF_K_ELF) {
		GElf_Ehdr eh;
		out->is_elf = gelf_getehdr(e, &eh) != NULL;
		const void *bid = NULL;
		ssize_t n = dwelf_elf_gnu_build_id(e, &bid);
		if (n > 0 && (size_t)n <= sizeof(out->build_id)) {
			memcpy(out->build_id, bid, (size_t)n);
			out->build_id_len = (size_t)n;
		}
	}
	if (e)
		elf_end(e);
	int ret = 0;
	if (want_hash == 2 || (want_hash && !out->build_id_len)) {
		ret = hash_fd(fd, &out->hash);
		out->have_hash = ret == 0;
		if (ret)
			tally_seterr(ret, "cannot read '%s': %s", path, strerror(-ret));
	}
	return ret;
}


void tally_ksyms_free(struct tally_ksym *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(s[i].name);
		free(s[i].module);
	}
	free(s);
}

const struct tally_ksym *tally_ksym_find(const struct tally_ksym *s, size_t n, uint64_t addr)
{
	size_t lo = TALLY_UPPER_U64(s, n, addr, addr);
	if (!lo)
		return NULL;
	const struct tally_ksym *k = &s[lo - 1];
	return addr < k->addr + (k->size ? k->size : 1) ? k : NULL;
}

struct tally_kallsyms {
	uint64_t *addr;    /* sorted; a symbol ends where the next begins */
	uint32_t *name;    /* offsets into names: "name" or "name\t[module]" */
	char *type;
	size_t n;
	struct strbuf names;
	const char *cnames; /* the names: names.buf, or within map */
	/* a table read back from its bytes (mapped): the arrays point into it */
	void *map;
	size_t maplen;
	uint64_t core_lo, core_hi; /* the core kernel's symbols' range; core_hi < core_lo: none */
};

void tally_kallsyms_free(struct tally_kallsyms *t)
{
	if (!t)
		return;
	if (t->map) {
		munmap(t->map, t->maplen);
	} else {
		free(t->addr);
		free(t->name);
		free(t->type);
	}
	strbuf_release(&t->names);
	free(t);
}

struct raw_ksym {
	uint64_t addr;
	uint32_t name_off;
	char type;
};

static int cmp_raw_ksym(const void *a, const void *b)
{
	const struct raw_ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* prefer global (upper-case) names for aliases at one address, then the file's order */
	int g = (x->type >= 'a') - (y->type >= 'a');
	if (g)
		return g;
	return x->name_off < y->name_off ? -1 : x->name_off > y->name_off;
}

int tally_kallsyms_open(const char *path, struct tally_kallsyms **out)
{
	*out = NULL;
	if (!path)
		path = "/proc/kallsyms";
	FILE *f = fopen(path, "re");
	if (!f)
		return tally_seterr(-errno, "cannot read '%s': %s", path, strerror(errno));
	/* /proc reports a 1 KiB block size: read it in large pieces, not 100,000 small ones */
	setvbuf(f, NULL, _IOFBF, 1 << 17);
	struct tally_kallsyms *t = xcalloc(1, sizeof(*t));
	struct raw_ksym *all = NULL;
	size_t nall = 0, aall = 0;
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		char *end;
		unsigned long long addr = strtoull(line, &end, 16);
		if (end == line || end[0] != ' ' || !end[1] || end[2] != ' ')
			continue;
		char type = end[1];
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		char *name = end + 3;
		name[strcspn(name, "\n")] = '\0';
		GROW(all, aall, nall + 1);
		all[nall].addr = addr;
		all[nall].type = type;
		all[nall].name_off = (uint32_t)t->names.len;
		strbuf_addstr(&t->names, name);
		strbuf_addch(&t->names, '\0');
		nall++;
	}
	fclose(f);
	bool zero = true;
	for (size_t i = 0; i < nall && zero; i++)
		zero = all[i].addr == 0;
	if (nall && zero) {
		free(all);
		tally_kallsyms_free(t);
		return tally_seterr(
			-EPERM,
			"kernel symbol addresses in '%s' are hidden (kernel.kptr_restrict; record as root)",
			path);
	}
	tally_qsort(all, nall, sizeof(*all), cmp_raw_ksym);
	t->addr = xmalloc((nall + 1) * sizeof(uint64_t));
	t->name = xmalloc((nall + 1) * sizeof(uint32_t));
	t->type = xmalloc(nall + 1);
	/* collapse aliases: keep the first (preferred) name at each address */
	for (size_t i = 0; i < nall; i++) {
		if (t->n && t->addr[t->n - 1] == all[i].addr)
			continue;
		t->addr[t->n] = all[i].addr;
		t->name[t->n] = all[i].name_off;
		t->type[t->n] = all[i].type;
		t->n++;
	}
	free(all);
	t->cnames = t->names.buf;
	t->core_lo = 1;
	t->core_hi = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (strchr(t->cnames + t->name[i], '\t'))
			continue;
		if (t->core_hi < t->core_lo)
			t->core_lo = t->addr[i];
		t->core_hi = t->addr[i];
	}
	*out = t;
	return 0;
}

size_t tally_kallsyms_bytes(const struct tally_kallsyms *t)
{
	return !t       ? 0
	       : t->map ? t->maplen
			: t->n * (sizeof(uint64_t) + sizeof(uint32_t) + 1) + t->names.alloc;
}

/* ---- the table as bytes (the kernel-symbols cache, lib/record/kcache.c) ----
 * In this machine's byte order (the file never leaves it), laid out to be
 * used where it is mapped: a header (magic, the tag's length, n, the names'
 * length, the core range), the tag padded to 8 bytes, n addresses (u64), n
 * name offsets (u32), n types, the names (each NUL-terminated). */
static const char ksyms_magic[16] = "tally-ksyms 2\n\0";
struct ksyms_head {
	char magic[16];
	uint64_t taglen, n, nameslen, core_lo, core_hi;
};

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

void tally_kallsyms_save(const struct tally_kallsyms *t, const char *tag, struct strbuf *out)
{
	struct ksyms_head h;
	memcpy(h.magic, ksyms_magic, sizeof(h.magic));
	h.taglen = strlen(tag);
	h.n = t->n;
	h.nameslen = t->names.len;
	h.core_lo = t->core_lo;
	h.core_hi = t->core_hi;
	static const char zeros[8];
	strbuf_add(out, &h, sizeof(h));
	strbuf_add(out, tag, h.taglen);
	strbuf_add(out, zeros, pad8(h.taglen) - h.taglen);
	strbuf_add(out, t->addr, t->n * sizeof(uint64_t));
	strbuf_add(out, t->name, t->n * sizeof(uint32_t));
	strbuf_add(out, t->type, t->n);
	strbuf_add(out, t->cnames ? t->cnames : "", t->names.len);
}

/* Whether len bytes at p are a table saved with this tag: every size within
 * them, every name offset within the names, the addresses sorted. */
static bool ksyms_ok(const unsigned char *p, size_t len, const char *tag, struct ksyms_head *h)
{
	size_t tl = strlen(tag);
	if (len < sizeof(*h))
		return false;
	memcpy(h, p, sizeof(*h));
	if (memcmp(h->magic, ksyms_magic, sizeof(h->magic)) || h->taglen != tl || h->n > len / 13 ||
	    h->nameslen > len || h->nameslen > UINT32_MAX ||
	    sizeof(*h) + pad8(tl) + h->n * 13 + h->nameslen != len ||
	    memcmp(p + sizeof(*h), tag, tl) || (h->nameslen && p[len - 1]) ||
	    (h->n && !h->nameslen))
		return false;
	const unsigned char *a = p + sizeof(*h) + pad8(tl);
	const uint64_t *addr = (const uint64_t *)a;
	const uint32_t *name = (const uint32_t *)(a + 8 * h->n);
	for (size_t i = 0; i < h->n; i++)
		if (name[i] >= h->nameslen || (i && addr[i] <= addr[i - 1]))
			return false;
	return true;
}

/* The table whose bytes (checked) are mapped at m: its arrays point there. */
static struct tally_kallsyms *table_in(void *m, size_t maplen, const struct ksyms_head *h)
{
	struct tally_kallsyms *t = xcalloc(1, sizeof(*t));
	unsigned char *a = (unsigned char *)m + sizeof(*h) + pad8(h->taglen);
	t->map = m;
	t->maplen = maplen;
	t->n = h->n;
	t->addr = (uint64_t *)a;
	t->name = (uint32_t *)(a + 8 * h->n);
	t->type = (char *)(a + 12 * h->n);
	t->cnames = (const char *)(a + 13 * h->n);
	t->core_lo = h->core_lo;
	t->core_hi = h->core_hi;
	return t;
}

int tally_kallsyms_load_fd(int fd, const char *tag, struct tally_kallsyms **out)
{
	*out = NULL;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)sizeof(struct ksyms_head))
		return -EINVAL;
	size_t len = (size_t)st.st_size;
	/* read, not mapped: a file cut while it is read must not end the process
	 * (SIGBUS); one read into memory of its own, page-aligned for the arrays */
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	for (size_t got = 0; got < len;) {
		ssize_t k = pread(fd, (char *)m + got, len - got, (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			munmap(m, len);
			return -EINVAL;
		}
		got += (size_t)k;
	}
	struct ksyms_head h;
	if (!ksyms_ok(m, len, tag, &h)) {
		munmap(m, len);
		return -EINVAL;
	}
	*out = table_in(m, len, &h);
	return 0;
}

int tally_kallsyms_load(const void *buf, size_t len, const char *tag, struct tally_kallsyms **out)
{
	*out = NULL;
	struct ksyms_head h;
	/* the arrays are read in place: an aligned copy of the bytes */
	void *m = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	memcpy(m, buf, len);
	if (!ksyms_ok(m, len, tag, &h)) {
		munmap(m, len ? len : 1);
		return -EINVAL;
	}
	*out = table_in(m, len ? len : 1, &h);
	return 0;
}

bool tally_kallsyms_core_range(const struct tally_kallsyms *t, uint64_t *lo, uint64_t *hi)
{
	if (!t || t->core_hi < t->core_lo)
		return false;
	*lo = t->core_lo;
	*hi = t->core_hi;
	return true;
}

bool tally_kallsyms_lookup(const struct tally_kallsyms *t, uint64_t addr, struct tally_ksym *out)
{
	size_t lo = tally_upper_u64(t->addr, t->n, sizeof(*t->addr), 0, addr);
	if (!lo)
		return false;
	size_t i = lo - 1;
	uint64_t size = i + 1 < t->n ? t->addr[i + 1] - t->addr[i] : 4096;
	if (addr >= t->addr[i] + (size ? size : 1))
		return false;
	out->addr = t->addr[i];
	out->size = size;
	out->type = t->type[i];
	const char *nm = t->cnames + t->name[i];
	const char *mod = strchr(nm, '\t');
	if (mod) {
		out->name = xstrndup(nm, (size_t)(mod - nm));
		mod++;
		while (*mod == ' ' || *mod == '[')
			mod++;
		out->module = xstrndup(mod, strcspn(mod, "]"));
	} else {
		out->name = xstrdup(nm);
		out->module = NULL;
	}
	return true;
}

int tally_kallsyms_needed(const char *path, const uint64_t *addrs, size_t naddrs,
			  struct tally_ksym **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	struct tally_kallsyms *t;
	int r = tally_kallsyms_open(path, &t);
	if (r)
		return r;
	uint64_t *sorted = xmalloc((naddrs ? naddrs : 1) * sizeof(uint64_t));
	memcpy(sorted, addrs, naddrs * sizeof(uint64_t));
	tally_qsort(sorted, naddrs, sizeof(uint64_t), tally_cmp_u64);
	size_t cap = 0;
	uint64_t prev = 0;
	bool have_prev = false;
	for (size_t i = 0; i < naddrs; i++) {
		struct tally_ksym k;
		if (!tally_kallsyms_lookup(t, sorted[i], &k))
			continue;
		if (have_prev && k.addr == prev) {
			free(k.name);
			free(k.module);
			continue;
		}
		prev = k.addr;
		have_prev = true;
		GROW(*out, cap, *n + 1);
		(*out)[(*n)++] = k;
	}
	free(sorted);
	tally_kallsyms_free(t);
	return 0;
}

void tally_kernel_build_id(char *buf, size_t n)
{
	tally_notes_build_id("/sys/kernel/notes", buf, n);
}

void tally_notes_build_id(const char *path, char *buf, size_t n)
{
	buf[0] = '\0';
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	unsigned char d[4096];
	size_t len = fread(d, 1, sizeof(d), f);
	fclose(f);
	size_t off = 0;
	while (off + 12 <= len) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, d + off, 4);
		memcpy(&descsz, d + off + 4, 4);
		memcpy(&type, d + off + 8, 4);
		size_t name_off = off + 12;
		size_t desc_off = name_off + ((namesz + 3) & ~3u);
		size_t next = desc_off + ((descsz + 3) & ~3u);
		if (next > len || next <= off)
			break;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(d + name_off, "GNU", 4) &&
		    descsz * 2 + 1 <= n && descsz <= 64) {
			tally_hex(d + desc_off, descsz, buf);
			return;
		}
		off = next;
	}
}
