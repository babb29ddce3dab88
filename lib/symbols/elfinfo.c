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
};

void tally_kallsyms_free(struct tally_kallsyms *t)
{
	if (!t)
		return;
	free(t->addr);
	free(t->name);
	free(t->type);
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
		return tally_seterr(-EPERM, "kernel symbol addresses in '%s' are hidden (kernel.kptr_restrict; record as root)", path);
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
	*out = t;
	return 0;
}

size_t tally_kallsyms_bytes(const struct tally_kallsyms *t)
{
	return t ? t->n * (sizeof(uint64_t) + sizeof(uint32_t) + 1) + t->names.alloc : 0;
}

/* ---- the table as bytes (the kernel-symbols cache, lib/record/kcache.c) ----
 * "tally-ksyms 1\n" and two NULs, then as little-endian u64 the tag's length,
 * n and the names' length; the tag; n addresses (u64), n name offsets (u32),
 * n types; the names, NUL-terminated. */
static const char ksyms_magic[16] = "tally-ksyms 1\n\0";

static void put_u64le(struct strbuf *sb, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	strbuf_add(sb, b, 8);
}

static uint64_t get_u64le(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void tally_kallsyms_save(const struct tally_kallsyms *t, const char *tag, struct strbuf *out)
{
	size_t tl = strlen(tag);
	strbuf_add(out, ksyms_magic, sizeof(ksyms_magic));
	put_u64le(out, tl);
	put_u64le(out, t->n);
	put_u64le(out, t->names.len);
	strbuf_add(out, tag, tl);
	for (size_t i = 0; i < t->n; i++)
		put_u64le(out, t->addr[i]);
	for (size_t i = 0; i < t->n; i++) {
		unsigned char b[4] = { (unsigned char)t->name[i], (unsigned char)(t->name[i] >> 8),
				       (unsigned char)(t->name[i] >> 16), (unsigned char)(t->name[i] >> 24) };
		strbuf_add(out, b, 4);
	}
	strbuf_add(out, t->type, t->n);
	strbuf_add(out, t->names.buf ? t->names.buf : "", t->names.len);
}

int tally_kallsyms_load(const void *buf, size_t len, const char *tag, struct tally_kallsyms **out)
{
	const unsigned char *p = buf;
	*out = NULL;
	size_t head = sizeof(ksyms_magic) + 24, tl = strlen(tag);
	if (len < head || memcmp(p, ksyms_magic, sizeof(ksyms_magic)))
		return -EINVAL;
	uint64_t ftl = get_u64le(p + 16), n = get_u64le(p + 24), nl = get_u64le(p + 32);
	/* every size within the bytes there are, before any is multiplied */
	if (ftl != tl || n > len / 13 || nl > len || nl > UINT32_MAX || head + tl + n * 13 + nl != len ||
	    memcmp(p + head, tag, tl) || (nl && p[len - 1]) || (n && !nl))
		return -EINVAL;
	const unsigned char *a = p + head + tl, *o = a + 8 * n, *ty = o + 4 * n, *names = ty + n;
	struct tally_kallsyms *t = xcalloc(1, sizeof(*t));
	t->addr = xmalloc((n + 1) * sizeof(uint64_t));
	t->name = xmalloc((n + 1) * sizeof(uint32_t));
	t->type = xmalloc(n + 1);
	for (size_t i = 0; i < n; i++) {
		t->addr[i] = get_u64le(a + 8 * i);
		t->name[i] = (uint32_t)o[4 * i] | (uint32_t)o[4 * i + 1] << 8 | (uint32_t)o[4 * i + 2] << 16 |
			     (uint32_t)o[4 * i + 3] << 24;
		t->type[i] = (char)ty[i];
		if (t->name[i] >= nl || (i && t->addr[i] <= t->addr[i - 1])) {
			tally_kallsyms_free(t);
			return -EINVAL;
		}
	}
	t->n = n;
	strbuf_add(&t->names, names, nl);
	*out = t;
	return 0;
}

bool tally_kallsyms_core_range(const struct tally_kallsyms *t, uint64_t *lo, uint64_t *hi)
{
	bool any = false;
	for (size_t i = 0; t && i < t->n; i++) {
		if (strchr(t->names.buf + t->name[i], '\t'))
			continue;
		if (!any)
			*lo = t->addr[i];
		*hi = t->addr[i];
		any = true;
	}
	return any;
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
	const char *nm = t->names.buf + t->name[i];
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

int tally_kallsyms_needed(const char *path, const uint64_t *addrs, size_t naddrs, struct tally_ksym **out, size_t *n)
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
		if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(d + name_off, "GNU", 4) && descsz * 2 + 1 <= n &&
		    descsz <= 64) {
			tally_hex(d + desc_off, descsz, buf);
			return;
		}
		off = next;
	}
}
