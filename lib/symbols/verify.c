/* File verification: whether a file is the one recorded for an image (build-id,
 * size and time, CRC) and whether its ELF is damaged; the sections it has. */
#define _GNU_SOURCE
#include "internal.h"

/* ---- identity checks ---- */

/* Whether the file's headers promise more than it holds (truncated, or a
 * damaged header): such a file is never used, libdwfl would read past it. */
bool sym_elf_damaged(const char *path, struct strbuf *why)
{
	struct stat st;
	int fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, &st);
	if (fd < 0) {
		strbuf_addf(why, ", but cannot be read: %s", tally_errmsg());
		return true;
	}
	uint64_t size = (uint64_t)st.st_size;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	bool bad = false;
	if (!e || !gelf_getehdr(e, &eh)) {
		strbuf_addf(why, ", but damaged ELF header (%s)", elf_errmsg(-1));
		bad = true;
		goto out;
	}
	if (eh.e_shoff &&
	    (eh.e_shoff > size || (uint64_t)eh.e_shnum * eh.e_shentsize > size - eh.e_shoff)) {
		strbuf_addf(why,
			    ", but truncated: its section headers end past its %" PRIu64 " bytes",
			    size);
		bad = true;
		goto out;
	}
	size_t nph = 0;
	if (elf_getphdrnum(e, &nph) == 0)
		for (size_t i = 0; i < nph && !bad; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)) {
				strbuf_addf(why,
					    ", but truncated: segment %zu ends past its %" PRIu64
					    " bytes",
					    i, size);
				bad = true;
			}
		}
	Elf_Scn *scn = NULL;
	while (!bad && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh)) {
			strbuf_addf(why, ", but damaged section header (%s)", elf_errmsg(-1));
			bad = true;
		} else if (sh.sh_type != SHT_NOBITS &&
			   (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)) {
			strbuf_addf(why,
				    ", but truncated: section %zu ends past its %" PRIu64 " bytes",
				    elf_ndxscn(scn), size);
			bad = true;
		}
	}
out:
	if (e)
		elf_end(e);
	close(fd);
	return bad;
}

/* Returns 1 when path is the recorded file, 0 when it is another file, -1 when
 * it cannot be read as ELF, -2 when it is the recorded file but truncated or
 * damaged; *why says which (for the log). */
int sym_check_file(const struct tally_db_image *di, const char *path, struct strbuf *why)
{
	struct tally_elf_info info;
	bool hash = !strcmp(di->id_kind, "xxh64");
	strbuf_reset(why);
	if (tally_elf_info(path, hash ? 2 : 0, &info)) {
		strbuf_addf(why, "%s", tally_errmsg());
		return -1;
	}
	if (!info.is_elf) {
		strbuf_addstr(why, "not an ELF file (or a damaged one)");
		return -1;
	}
	char hex[160];
	if (!strcmp(di->id_kind, "build-id")) {
		if (!info.build_id_len) {
			strbuf_addf(why, "has no build-id, the profile recorded %s: not used",
				    di->id);
			return 0;
		}
		tally_hex(info.build_id, info.build_id_len, hex);
		if (strcmp(hex, di->id)) {
			strbuf_addf(
				why,
				"has build-id %s, the profile recorded %s: another file, not used",
				hex, di->id);
			return 0;
		}
		strbuf_addf(why, "build-id %s matches", hex);
		if (sym_elf_damaged(path, why)) {
			strbuf_addstr(why, ": skipped");
			return -2;
		}
		return 1;
	}
	if (hash) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash);
		if (!info.have_hash || strcmp(hex, di->id)) {
			strbuf_addf(
				why,
				"content hash %s, the profile recorded %s: another file, not used",
				hex, di->id);
			return 0;
		}
		strbuf_addf(why, "content hash %s matches", hex);
		if (sym_elf_damaged(path, why)) {
			strbuf_addstr(why, ": skipped");
			return -2;
		}
		return 1;
	}
	strbuf_addstr(why, "no id was recorded, so it cannot be verified");
	if (sym_elf_damaged(path, why)) {
		strbuf_addstr(why, ": skipped");
		return -2;
	}
	strbuf_addstr(why, ": used as it is");
	return 1;
}

uint32_t sym_crc32_file(int fd, bool *ok)
{
	static uint32_t table[256];
	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	uint32_t crc = 0xffffffffu;
	unsigned char buf[65536];
	ssize_t n;
	*ok = true;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
	if (n < 0)
		*ok = false;
	lseek(fd, 0, SEEK_SET);
	return crc ^ 0xffffffffu;
}

/* Which of the sections that matter an ELF file has, as text. */
void sym_describe_sections(Elf *elf, struct strbuf *out)
{
	static const char *const want[] = { ".symtab",        ".dynsym",       ".debug_info",
					    ".debug_line",    ".eh_frame",     ".debug_frame",
					    ".gnu_debuglink", ".gnu_debugdata" };
	bool have[ARRAY_SIZE(want)] = { false };
	bool nobits_text = false;
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) {
		strbuf_addstr(out, "no section headers");
		return;
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!nm)
			continue;
		if (!strcmp(nm, ".text") && sh.sh_type == SHT_NOBITS)
			nobits_text = true;
		for (size_t i = 0; i < ARRAY_SIZE(want); i++)
			if (!strcmp(nm, want[i]) ||
			    (!strncmp(want[i], ".debug_", 7) && !strncmp(nm, ".zdebug_", 8) &&
			     !strcmp(nm + 8, want[i] + 7)))
				have[i] = have[i] || sh.sh_type != SHT_NOBITS;
	}
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		strbuf_addf(out, "%s%s %s", i ? ", " : "", want[i], have[i] ? "yes" : "no");
	strbuf_addf(out, "; CFI %s",
		    have[4] && have[5] ? ".eh_frame and .debug_frame"
		    : have[4]          ? ".eh_frame"
		    : have[5]          ? ".debug_frame"
				       : "none");
	if (nobits_text)
		strbuf_addstr(out, "; code sections are empty (a separate debug file)");
}

bool sym_elf_has_section(Elf *elf, const char *name)
{
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
		    (nm = elf_strptr(elf, shstrndx, sh.sh_name)) && !strcmp(nm, name))
			return true;
	}
	return false;
}
