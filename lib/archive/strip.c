/* --strip-debug-to-sampled (archive.h): a copy of a debug file (or vmlinux)
 * with only the DWARF the sampled addresses need. Offsets inside .debug_info
 * are referred to from everywhere (.debug_aranges, DW_FORM_ref_addr; it refers
 * to the line and string tables), so nothing moves: a unit not needed keeps
 * its place and length and becomes an empty compile unit (its header and one
 * DIE whose abbreviation is appended to .debug_abbrev, then zeros), and the
 * new .debug_info and .debug_abbrev are written zlib-compressed
 * (SHF_COMPRESSED), so the zeros take no room. Allocated sections and the program headers keep
 * their file offsets (the recorded offsets are file offsets); the other sections are copied as they
 * are (compressed or not) after them, the section headers last. Sections reports never read become
 * SHT_NOBITS. */
#define _GNU_SOURCE
#include "tally/archive.h"
#include "tally/util.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Sections no report reads: variable locations, macros, name indexes. */
static const char *const dropped[] = { ".debug_loc",          ".debug_loclists",
				       ".debug_macro",        ".debug_macinfo",
				       ".debug_pubnames",     ".debug_pubtypes",
				       ".debug_gnu_pubnames", ".debug_gnu_pubtypes",
				       ".debug_names",        ".gdb_index" };

/* The abbreviation table of an empty unit: code 1, DW_TAG_compile_unit, no
 * children, no attributes; then the table's end. */
static const unsigned char empty_abbrev[] = { 1, DW_TAG_compile_unit, DW_CHILDREN_no, 0, 0, 0 };

struct unit {
	uint64_t off, end;   /* [off, end) in .debug_info */
	uint64_t die;        /* the unit DIE's offset */
	unsigned version, offset_size, addr_size, type;
	bool keep;
};

static int cmp_unit_off(const void *k, const void *e)
{
	uint64_t o = *(const uint64_t *)k;
	const struct unit *u = e;
	return o < u->off ? -1 : o >= u->end ? 1 : 0;
}

/* Parses the unit headers of .debug_info. false when they do not add up. */
static bool parse_units(const unsigned char *d, uint64_t size, struct unit **out, size_t *n)
{
	size_t cap = 0;
	uint64_t off = 0;
	*out = NULL;
	*n = 0;
	while (off < size) {
		if (size - off < 11)
			return false;
		uint32_t l32;
		memcpy(&l32, d + off, 4);
		uint64_t len, start;
		unsigned osz;
		if (l32 == 0xffffffffu) {
			if (size - off < 23)
				return false;
			memcpy(&len, d + off + 4, 8);
			start = off + 12;
			osz = 8;
		} else if (l32 >= 0xfffffff0u) {
			return false;
		} else {
			len = l32;
			start = off + 4;
			osz = 4;
		}
		if (len > size - start || len < 8)
			return false;
		uint16_t ver;
		memcpy(&ver, d + start, 2);
		if (ver < 2 || ver > 5)
			return false;
		struct unit u = { off, start + len, 0, ver, osz, 0, DW_UT_compile, false };
		uint64_t hdr;
		if (ver >= 5) {
			u.type = d[start + 2];
			u.addr_size = d[start + 3];
			hdr = 4 + osz;
			if (u.type == DW_UT_skeleton || u.type == DW_UT_split_compile)
				hdr += 8;
			else if (u.type == DW_UT_type || u.type == DW_UT_split_type)
				hdr += 8 + osz;
		} else {
			u.addr_size = d[start + 2 + osz];
			hdr = 2 + osz + 1;
		}
		u.die = start + hdr;
		if (u.die >= u.end)
			return false;
		GROW(*out, cap, *n + 1);
		(*out)[(*n)++] = u;
		off = u.end;
	}
	return true;
}

/* ---- which units are needed ---- */

struct walk {
	struct unit *u;
	size_t n;
	size_t *queue, nq, aq;
};

static void mark(struct walk *w, uint64_t dieoff)
{
	struct unit *u = bsearch(&dieoff, w->u, w->n, sizeof(*w->u), cmp_unit_off);
	if (!u || u->keep)
		return;
	u->keep = true;
	GROW(w->queue, w->aq, w->nq + 1);
	w->queue[w->nq++] = (size_t)(u - w->u);
}

static int attr_cb(Dwarf_Attribute *a, void *arg)
{
	struct walk *w = arg;
	if (dwarf_whatform(a) == DW_FORM_ref_addr) {
		Dwarf_Die t;
		if (dwarf_formref_die(a, &t))
			mark(w, dwarf_dieoffset(&t));
	}
	return DWARF_CB_OK;
}

/* Every DIE under die (iteratively: units can be deep). */
static void walk_dies(struct walk *w, Dwarf_Die *top)
{
	Dwarf_Die *stack = NULL;
	size_t n = 0, cap = 0;
	GROW(stack, cap, 1);
	stack[n++] = *top;
	while (n) {
		Dwarf_Die d = stack[--n];
		dwarf_getattrs(&d, attr_cb, w, 0);
		Dwarf_Die c;
		if (dwarf_child(&d, &c) == 0) {
			do {
				GROW(stack, cap, n + 1);
				stack[n++] = c;
			} while (dwarf_siblingof(&c, &c) == 0);
		}
	}
	free(stack);
}

static bool is_dropped(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(dropped); i++)
		if (!strcmp(name, dropped[i]))
			return true;
	return false;
}

/* ---- writing ---- */

static int pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const char *c = p;
	while (n) {
		ssize_t k = pwrite(fd, c, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		c += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

struct outsec {
	Elf64_Shdr sh;
	uint64_t from; /* where its bytes are in the source file */
	int special;   /* 1 .debug_info (compressed anew), 2 .debug_abbrev (one table appended) */
};

/* The empty unit's header and DIE that replace unit u (h: at least 32 bytes). */
static size_t empty_unit(const struct unit *u, const unsigned char *d, uint64_t abbrev_off,
			 unsigned char *h)
{
	size_t hl = u->offset_size == 8 ? 12 : 4;
	memcpy(h, d + u->off, hl); /* the same unit_length */
	uint16_t ver = (uint16_t)u->version;
	memcpy(h + hl, &ver, 2);
	hl += 2;
	if (u->version >= 5) {
		h[hl++] = DW_UT_compile;
		h[hl++] = (unsigned char)u->addr_size;
	}
	if (u->offset_size == 8) {
		memcpy(h + hl, &abbrev_off, 8);
		hl += 8;
	} else {
		uint32_t a32 = (uint32_t)abbrev_off;
		memcpy(h + hl, &a32, 4);
		hl += 4;
	}
	if (u->version < 5)
		h[hl++] = (unsigned char)u->addr_size;
	h[hl++] = 1; /* the DIE: abbreviation 1 */
	return hl;
}

static const unsigned char zeros[65536];

static bool deflate_some(z_stream *z, const void *p, size_t n, struct strbuf *out, int flush)
{
	z->next_in = (Bytef *)(uintptr_t)p;
	z->avail_in = (uInt)n;
	do {
		if (strbuf_grow(out, 65536))
			return false;
		z->next_out = (Bytef *)out->buf + out->len;
		z->avail_out = 65536;
		int k = deflate(z, flush);
		if (k == Z_STREAM_ERROR)
			return false;
		out->len += 65536 - z->avail_out;
	} while (z->avail_out == 0 || (flush == Z_FINISH && z->avail_in));
	return true;
}

/* The new .debug_info: kept units as they are, the others emptied; an
 * Elf64_Chdr and the zlib stream into out. */
static bool build_info(const unsigned char *d, uint64_t size, const struct unit *u, size_t n,
		       uint64_t abbrev_off, uint64_t align, struct strbuf *out)
{
	Elf64_Chdr ch = { ELFCOMPRESS_ZLIB, 0, size, align ? align : 1 };
	strbuf_add(out, &ch, sizeof(ch));
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit(&z, Z_DEFAULT_COMPRESSION) != Z_OK)
		return false;
	bool ok = true;
	for (size_t k = 0; k < n && ok; k++) {
		if (u[k].keep) {
			/* in pieces: avail_in is 32 bits */
			for (uint64_t o = u[k].off; o < u[k].end && ok; o += 1u << 30)
				ok = deflate_some(&z, d + o,
						  (size_t)(u[k].end - o < (1u << 30) ? u[k].end - o
										     : (1u << 30)),
						  out, Z_NO_FLUSH);
			continue;
		}
		unsigned char h[32];
		size_t hl = empty_unit(&u[k], d, abbrev_off, h);
		ok = hl <= u[k].end - u[k].off && deflate_some(&z, h, hl, out, Z_NO_FLUSH);
		for (uint64_t left = u[k].end - u[k].off - hl; ok && left;) {
			size_t c = left < sizeof(zeros) ? (size_t)left : sizeof(zeros);
			ok = deflate_some(&z, zeros, c, out, Z_NO_FLUSH);
			left -= c;
		}
	}
	ok = ok && deflate_some(&z, NULL, 0, out, Z_FINISH);
	deflateEnd(&z);
	return ok;
}

/* The new .debug_abbrev: the old one and the empty unit's table, compressed. */
static bool build_abbrev(const void *d, size_t size, uint64_t align, struct strbuf *out)
{
	Elf64_Chdr ch = { ELFCOMPRESS_ZLIB, 0, size + sizeof(empty_abbrev), align ? align : 1 };
	strbuf_add(out, &ch, sizeof(ch));
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit(&z, Z_DEFAULT_COMPRESSION) != Z_OK)
		return false;
	bool ok = true;
	for (size_t o = 0; o < size && ok; o += 1u << 30)
		ok = deflate_some(&z, (const char *)d + o,
				  size - o < (1u << 30) ? size - o : (1u << 30), out, Z_NO_FLUSH);
	ok = ok && deflate_some(&z, empty_abbrev, sizeof(empty_abbrev), out, Z_FINISH);
	deflateEnd(&z);
	return ok;
}

static int copy_range(int in, int fd, uint64_t from, uint64_t n, uint64_t to, const char *src,
		      bool *named)
{
	char *buf = xmalloc(1 << 20);
	int ret = 0;
	for (uint64_t o = 0; o < n && !ret;) {
		size_t k = n - o < (1 << 20) ? (size_t)(n - o) : (1 << 20);
		ssize_t got = pread(in, buf, k, (off_t)(from + o));
		if (got <= 0) {
			ret = tally_seterr(got < 0 ? -errno : -EIO, "cannot read '%s': %s", src,
					   got < 0 ? strerror(errno) : "cut short");
			*named = true;
			break;
		}
		ret = pwrite_all(fd, buf, (size_t)got, to + o);
		o += (uint64_t)got;
	}
	free(buf);
	return ret;
}

int tally_strip_debug(int in, const char *src, const uint64_t *addrs, size_t naddrs, int fd,
		      struct tally_strip_stats *st)
{
	memset(st, 0, sizeof(*st));
	elf_version(EV_CURRENT);
	/* the descriptor the plan verified, never src opened again */
	Elf *elf = elf_begin(in, ELF_C_READ_MMAP_PRIVATE, NULL);
	Dwarf *dw = NULL;
	struct unit *units = NULL;
	size_t nunits = 0;
	struct outsec *os = NULL;
	struct walk w = { 0 };
	struct strbuf zinfo = STRBUF_INIT, zabbrev = STRBUF_INIT;
	size_t iabbrev = 0;
	int ret = -ENOTSUP;
	bool named = false; /* the error is set already */
	Elf64_Ehdr *eh = elf ? elf64_getehdr(elf) : NULL;
	size_t shnum, shstrndx;
	static const uint16_t one = 1;
	bool le = *(const uint8_t *)&one == 1;
	if (!eh || eh->e_ident[EI_DATA] != (le ? ELFDATA2LSB : ELFDATA2MSB) ||
	    eh->e_type == ET_REL || elf_getshdrnum(elf, &shnum) ||
	    elf_getshdrstrndx(elf, &shstrndx) || !shnum || eh->e_shentsize != sizeof(Elf64_Shdr))
		goto out;
	Elf64_Ehdr ehdr = *eh;
	/* the section headers as in the file, before libdw decompresses (in this private copy) */
	os = xcalloc(shnum, sizeof(*os));
	for (size_t i = 0; i < shnum; i++) {
		Elf_Scn *scn = elf_getscn(elf, i);
		Elf64_Shdr *sh = scn ? elf64_getshdr(scn) : NULL;
		if (!sh)
			goto out;
		os[i].sh = *sh;
		os[i].from = sh->sh_offset;
	}
	dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!dw)
		goto out;
	Elf_Data *info = NULL, *abbrev = NULL;
	size_t iinfo = 0;
	uint64_t prefix = ehdr.e_ehsize;
	if (ehdr.e_phoff + (uint64_t)ehdr.e_phnum * ehdr.e_phentsize > prefix)
		prefix = ehdr.e_phoff + (uint64_t)ehdr.e_phnum * ehdr.e_phentsize;
	size_t nph = 0;
	if (elf_getphdrnum(elf, &nph) == 0)
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_offset + ph.p_filesz > prefix)
				prefix = ph.p_offset + ph.p_filesz;
		}
	for (size_t i = 0; i < shnum; i++) {
		Elf64_Shdr *sh = &os[i].sh;
		const char *name = elf_strptr(elf, shstrndx, sh->sh_name);
		if (name && !strncmp(name, ".zdebug", 7))
			goto out; /* the old GNU compression: copied whole */
		if (sh->sh_type == SHT_NOBITS || sh->sh_type == SHT_NULL)
			continue;
		if (sh->sh_flags & SHF_ALLOC) {
			if (sh->sh_offset + sh->sh_size > prefix)
				prefix = sh->sh_offset + sh->sh_size;
			continue;
		}
		if (name && is_dropped(name)) {
			sh->sh_type = SHT_NOBITS;
			continue;
		}
		if (name && (!strcmp(name, ".debug_info") || !strcmp(name, ".debug_abbrev"))) {
			Elf_Data *d = elf_getdata(elf_getscn(elf, i), NULL);
			if (!d || !d->d_buf ||
			    (elf64_getshdr(elf_getscn(elf, i))->sh_flags & SHF_COMPRESSED))
				goto out;
			if (name[7] == 'i') {
				info = d;
				iinfo = i;
				os[i].special = 1;
			} else {
				abbrev = d;
				iabbrev = i;
				os[i].special = 2;
			}
		}
	}
	if (!info || !abbrev || !parse_units(info->d_buf, info->d_size, &units, &nunits) || !nunits)
		goto out;
	if (units[0].offset_size == 4 && abbrev->d_size + sizeof(empty_abbrev) > UINT32_MAX)
		goto out;
	/* the units the addresses are in, the type units, and what they refer to */
	w.u = units;
	w.n = nunits;
	for (size_t i = 0; i < nunits; i++)
		if (units[i].type == DW_UT_type || units[i].type == DW_UT_split_type)
			mark(&w, units[i].die);
	for (size_t i = 0; i < naddrs; i++) {
		Dwarf_Die cu;
		if (dwarf_addrdie(dw, addrs[i], &cu))
			mark(&w, dwarf_dieoffset(&cu));
	}
	for (size_t q = 0; q < w.nq; q++) {
		Dwarf_Die d;
		if (dwarf_offdie(dw, units[w.queue[q]].die, &d))
			walk_dies(&w, &d);
	}
	st->units = nunits;
	for (size_t i = 0; i < nunits; i++)
		st->kept += units[i].keep;
	GElf_Shdr ish;
	uint64_t ialign = gelf_getshdr(elf_getscn(elf, iinfo), &ish) ? ish.sh_addralign : 1;
	if (!build_info(info->d_buf, info->d_size, units, nunits, abbrev->d_size, ialign, &zinfo)) {
		ret = tally_seterr(-ENOMEM, "cannot compress the stripped .debug_info of '%s'",
				   src);
		goto out;
	}
	uint64_t aalign = gelf_getshdr(elf_getscn(elf, iabbrev), &ish) ? ish.sh_addralign : 1;
	if (!build_abbrev(abbrev->d_buf, abbrev->d_size, aalign, &zabbrev)) {
		ret = tally_seterr(-ENOMEM, "cannot compress the stripped .debug_abbrev of '%s'",
				   src);
		goto out;
	}
	os[iinfo].sh.sh_flags |= SHF_COMPRESSED;
	os[iinfo].sh.sh_size = zinfo.len;
	os[iinfo].sh.sh_addralign = 8;
	os[iabbrev].sh.sh_flags |= SHF_COMPRESSED;
	os[iabbrev].sh.sh_size = zabbrev.len;
	os[iabbrev].sh.sh_addralign = 8;

	/* the layout: the allocated part as it is, then the other sections, then the headers */
	uint64_t pos = prefix;
	for (size_t i = 1; i < shnum; i++) {
		Elf64_Shdr *sh = &os[i].sh;
		if ((sh->sh_flags & SHF_ALLOC) || sh->sh_type == SHT_NULL)
			continue;
		uint64_t al = sh->sh_addralign > 1 ? sh->sh_addralign : 1;
		pos = (pos + al - 1) / al * al;
		sh->sh_offset = pos;
		if (sh->sh_type != SHT_NOBITS)
			pos += sh->sh_size;
	}
	pos = (pos + 7) / 8 * 8;
	uint64_t shoff = pos;
	st->size = st->data = shoff + shnum * sizeof(Elf64_Shdr);
	ret = 0;
	if (fd < 0)
		goto out;

	/* the allocated part byte for byte, the ELF header's e_shoff patched */
	ret = copy_range(in, fd, 0, prefix, 0, src, &named);
	ehdr.e_shoff = shoff;
	if (!ret)
		ret = pwrite_all(fd, &ehdr, sizeof(ehdr), 0);
	for (size_t i = 1; i < shnum && !ret; i++) {
		const struct outsec *s = &os[i];
		if ((s->sh.sh_flags & SHF_ALLOC) || s->sh.sh_type == SHT_NOBITS ||
		    s->sh.sh_type == SHT_NULL)
			continue;
		if (s->special == 2) {
			ret = pwrite_all(fd, zabbrev.buf, zabbrev.len, s->sh.sh_offset);
		} else if (s->special == 1) {
			ret = pwrite_all(fd, zinfo.buf, zinfo.len, s->sh.sh_offset);
		} else {
			ret = copy_range(in, fd, s->from, s->sh.sh_size, s->sh.sh_offset, src,
					 &named);
		}
	}
	for (size_t i = 0; i < shnum && !ret; i++)
		ret = pwrite_all(fd, &os[i].sh, sizeof(Elf64_Shdr), shoff + i * sizeof(Elf64_Shdr));
	if (!ret && ftruncate(fd, (off_t)st->size) < 0)
		ret = -errno;
	if (ret && ret != -ENOTSUP && !named)
		ret = tally_seterr(ret, "cannot write the stripped copy of '%s': %s", src,
				   strerror(-ret));
out:
	strbuf_release(&zinfo);
	strbuf_release(&zabbrev);
	free(w.queue);
	free(units);
	free(os);
	if (dw)
		dwarf_end(dw);
	if (elf)
		elf_end(elf);
	return ret;
}
