/* The ELF work of the build-id cache: finding an image's separate debug file
 * on this machine as a report finds it, and writing a debug file with its
 * compressed DWARF decompressed, so that a report reads from the cache only
 * the parts of the DWARF it needs (inflating all of a debug file's .debug_info
 * was most of what naming a libc with Debian's libc6-dbg cost). */
#define _GNU_SOURCE
#include <elf.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tally/cache.h"
#include "tally/elfinfo.h"
#include "tally/util.h"

#include "lib/cache/internal.h"

struct sec {
	size_t idx;
	GElf_Shdr sh;       /* as written */
	uint64_t old_off;   /* where its bytes are in the source */
	bool moved;
};

static int cmp_off(const void *a, const void *b)
{
	const struct sec *x = a, *y = b;
	if (x->old_off != y->old_off)
		return x->old_off < y->old_off ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int wr(int out, const void *p, size_t n)
{
	int r = tally_write_all(out, p, n);
	return r ? tally_seterr(r, "cannot write into the build-id cache: %s", strerror(-r)) : 0;
}

static int pad_to(int out, uint64_t *pos, uint64_t align)
{
	static const char zeros[64];
	if (align < 2)
		return 0;
	while (*pos % align) {
		size_t n = (size_t)(align - *pos % align);
		if (n > sizeof(zeros))
			n = sizeof(zeros);
		int r = wr(out, zeros, n);
		if (r)
			return r;
		*pos += n;
	}
	return 0;
}

/* The bytes [off, off + n) of src into out, by offset: the descriptor's own
 * position is never used (a copy handed to another process shares it). */
int tally_cache_copy_range(int src, int out, uint64_t off, uint64_t n, const char *what)
{
	static __thread char buf[1 << 16];
	while (n) {
		int s = tally_cache_copy_stopped(what);
		if (s)
			return s;
		size_t want = n < sizeof(buf) ? (size_t)n : sizeof(buf);
		ssize_t k = pread(src, buf, want, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return tally_seterr(k < 0 ? -errno : -EIO, "cannot read '%s': %s", what,
					    k < 0 ? strerror(errno) : "cut short");
		int r = wr(out, buf, (size_t)k);
		if (r)
			return r;
		off += (uint64_t)k;
		n -= (uint64_t)k;
	}
	return 0;
}

int tally_cache_decompress_elf(int src, int out, const char *what)
{
	elf_version(EV_CURRENT);
	struct stat st;
	if (fstat(src, &st) < 0)
		return tally_seterr(-errno, "cannot read '%s': %s", what, strerror(errno));
	Elf *e = elf_begin(src, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t shnum = 0, phnum = 0;
	struct sec *v = NULL;
	int r = 1;
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != (BYTE_ORDER == LITTLE_ENDIAN ? ELFDATA2LSB : ELFDATA2MSB) ||
	    !eh.e_shnum || eh.e_shstrndx == SHN_XINDEX || elf_getshdrnum(e, &shnum) ||
	    shnum != eh.e_shnum || elf_getphdrnum(e, &phnum) ||
	    eh.e_shentsize != sizeof(Elf64_Shdr))
		goto out;
	v = xcalloc(shnum, sizeof(*v));
	uint64_t cut = UINT64_MAX;
	for (size_t i = 0; i < shnum; i++) {
		Elf_Scn *scn = elf_getscn(e, i);
		if (!scn || !gelf_getshdr(scn, &v[i].sh))
			goto out;
		v[i].idx = i;
		v[i].old_off = v[i].sh.sh_offset;
		if ((v[i].sh.sh_flags & SHF_COMPRESSED) && v[i].sh.sh_type != SHT_NOBITS &&
		    v[i].sh.sh_offset < cut)
			cut = v[i].sh.sh_offset;
	}
	if (cut == UINT64_MAX || cut > (uint64_t)st.st_size)
		goto out; /* nothing compressed */
	/* everything before the cut stays where it is: the segments, and the
	 * sections (a debug file's allocated ones) before the first compressed */
	if (eh.e_phoff && eh.e_phoff + (uint64_t)phnum * eh.e_phentsize > cut)
		goto out;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) ||
		    (ph.p_filesz && ph.p_offset + ph.p_filesz > cut))
			goto out;
	}
	for (size_t i = 1; i < shnum; i++)
		if (v[i].sh.sh_type != SHT_NOBITS && v[i].old_off < cut &&
		    v[i].old_off + v[i].sh.sh_size > cut)
			goto out;
	/* what the sections claim they hold decompressed, bounded before libelf
	 * allocates it: a debug file found beside a program is its author's, and
	 * DWARF deflates by 3 to 6 times, not 1000 */
	uint64_t claimed = 0;
	for (size_t i = 1; i < shnum; i++) {
		GElf_Chdr ch;
		Elf_Scn *scn = elf_getscn(e, i);
		if (!(v[i].sh.sh_flags & SHF_COMPRESSED) || v[i].sh.sh_type == SHT_NOBITS)
			continue;
		if (!scn || !gelf_getchdr(scn, &ch)) {
			r = tally_seterr(-EINVAL,
					 "'%s': section %zu has no compression header: not cached",
					 what, i);
			goto out;
		}
		claimed += ch.ch_size;
		if (claimed > (uint64_t)st.st_size * TALLY_CACHE_INFLATE_MAX ||
		    claimed > TALLY_CACHE_DEFAULT_MAX) {
			r = tally_seterr(-EFBIG,
					 "'%s': its compressed sections claim %" PRIu64
					 " bytes, over %d times the file's %" PRIu64 ": not cached",
					 what, claimed, TALLY_CACHE_INFLATE_MAX,
					 (uint64_t)st.st_size);
			goto out;
		}
	}
	r = tally_cache_copy_range(src, out, 0, cut, what);
	uint64_t pos = cut;
	struct sec *order = xcalloc(shnum, sizeof(*order));
	memcpy(order, v, shnum * sizeof(*v));
	tally_qsort(order + 1, shnum - 1, sizeof(*order), cmp_off);
	for (size_t k = 1; !r && k < shnum; k++) {
		if ((r = tally_cache_copy_stopped(what)))
			break;
		struct sec *s = &v[order[k].idx];
		if (s->old_off < cut)
			continue;
		s->moved = true;
		if (s->sh.sh_type == SHT_NOBITS) {
			s->sh.sh_offset = pos;
			continue;
		}
		Elf_Scn *scn = elf_getscn(e, s->idx);
		if (s->sh.sh_flags & SHF_COMPRESSED) {
			Elf_Data *d;
			if (elf_compress(scn, 0, 0) < 0 || !gelf_getshdr(scn, &s->sh) ||
			    !(d = elf_getdata(scn, NULL)) || (d->d_size && !d->d_buf)) {
				r = tally_seterr(-EINVAL, "'%s': cannot decompress section %zu: %s",
						 what, s->idx, elf_errmsg(-1));
				break;
			}
			if (!(r = pad_to(out, &pos, s->sh.sh_addralign))) {
				s->sh.sh_offset = pos;
				s->sh.sh_size = d->d_size;
				s->sh.sh_flags &= ~(GElf_Xword)SHF_COMPRESSED;
				r = wr(out, d->d_buf, d->d_size);
				pos += d->d_size;
			}
			continue;
		}
		if (s->old_off + s->sh.sh_size > (uint64_t)st.st_size) {
			r = tally_seterr(-EINVAL, "'%s': section %zu ends past the file's end",
					 what, s->idx);
			break;
		}
		if (!(r = pad_to(out, &pos, s->sh.sh_addralign))) {
			s->sh.sh_offset = pos;
			r = tally_cache_copy_range(src, out, s->old_off, s->sh.sh_size, what);
			pos += s->sh.sh_size;
		}
	}
	free(order);
	if (!r)
		r = pad_to(out, &pos, 8);
	uint64_t shoff = pos;
	for (size_t i = 0; !r && i < shnum; i++) {
		Elf64_Shdr sh = { (Elf64_Word)v[i].sh.sh_name,
				  (Elf64_Word)v[i].sh.sh_type,
				  v[i].sh.sh_flags,
				  v[i].sh.sh_addr,
				  v[i].sh.sh_offset,
				  v[i].sh.sh_size,
				  (Elf64_Word)v[i].sh.sh_link,
				  (Elf64_Word)v[i].sh.sh_info,
				  v[i].sh.sh_addralign,
				  v[i].sh.sh_entsize };
		r = wr(out, &sh, sizeof(sh));
	}
	if (!r) {
		/* the ELF header, with the section headers where they now are */
		Elf64_Ehdr h;
		if (pread(src, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
			r = tally_seterr(-EIO, "cannot read '%s': cut short", what);
		h.e_shoff = shoff;
		if (!r && pwrite(out, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
			r = tally_seterr(-errno, "cannot write into the build-id cache: %s",
					 strerror(errno));
	}
out:
	free(v);
	if (e)
		elf_end(e);
	return r;
}

/* ---- an image's separate debug file ---- */

static bool has_section(Elf *e, const char *name, Elf_Data **data)
{
	size_t shstrndx;
	if (!e || elf_getshdrstrndx(e, &shstrndx) != 0)
		return false;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
		    (nm = elf_strptr(e, shstrndx, sh.sh_name)) && !strcmp(nm, name)) {
			if (data)
				*data = elf_getdata(scn, NULL);
			return true;
		}
	}
	return false;
}

/* Whether path is a file with build-id id. */
static bool has_id(const char *path, const char *id)
{
	struct tally_elf_info info;
	char hex[160];
	if (tally_elf_info(path, 0, &info) || !info.build_id_len || info.build_id_len >= 64)
		return false;
	tally_hex(info.build_id, info.build_id_len, hex);
	return !strcmp(hex, id);
}

char *tally_cache_debug_file(int fd, const char *src, const char *id)
{
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Data *dl = NULL;
	char *found = NULL, *link = NULL;
	if (!e || has_section(e, ".debug_info", NULL) || strlen(id) < 3)
		goto out; /* its DWARF is its own */
	if (has_section(e, ".gnu_debuglink", &dl) && dl && dl->d_buf && dl->d_size > 1) {
		size_t n = strnlen(dl->d_buf, dl->d_size);
		if (n && n < dl->d_size && !memchr(dl->d_buf, '/', n))
			link = xstrndup(dl->d_buf, n);
	}
	struct strbuf c = STRBUF_INIT;
	strbuf_addf(&c, "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	if (has_id(c.buf, id))
		found = strbuf_detach(&c);
	if (!found && link) {
		char *dir = tally_dirname(src);
		const char *d = strcmp(dir, "/") ? dir : "";
		const char *fmt[] = { "%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s" };
		for (size_t i = 0; i < ARRAY_SIZE(fmt) && !found; i++) {
			strbuf_reset(&c);
			strbuf_addf(&c, fmt[i], d, link);
			if (strcmp(c.buf, src) && has_id(c.buf, id))
				found = strbuf_detach(&c);
		}
		free(dir);
	}
	strbuf_release(&c);
out:
	free(link);
	if (e)
		elf_end(e);
	return found;
}
