/* JIT code described by perf's jitdump files (jit-PID.dump, the format of
 * tools/perf/Documentation/jitdump-specification.txt in the Linux tree): the
 * recorder parses the runtime's file, and the database keeps a plain-text copy
 * of the functions that had samples (names, line tables, machine code; see
 * docs/format.md), which the report and annotate read back. */
#ifndef TALLY_JITDUMP_H
#define TALLY_JITDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/util.h"

/* From addr on (up to the next entry) the code comes from file:line. */
struct tally_jit_line {
	uint64_t addr;
	uint32_t line, discrim;
	uint32_t file; /* index into tally_jitdump.files */
};

struct tally_jit_func {
	uint64_t addr, size;
	uint64_t index;  /* the runtime's code_index */
	uint64_t order;  /* load order: where code overlaps, the last loaded names it */
	char *name;
	unsigned char *code; /* size bytes, or NULL when the dump had none */
	struct tally_jit_line *lines; /* sorted by addr */
	size_t nlines;
	bool keep; /* the recorder's mark: samples fell in it */
};

struct tally_jitdump {
	uint32_t elf_mach; /* ELF e_machine of the code (62: x86-64) */
	uint32_t pid;
	struct tally_jit_func *funcs; /* after tally_jitdump_parse: sorted by addr, non-overlapping */
	size_t nfuncs, afuncs;
	char **files;
	size_t nfiles, afiles;
	struct tally_hidx file_idx;
	uint64_t next_order;
	/* damage after a good header: what was wrong and where; what came before is kept */
	char *warning;
};

/* Parses the bytes of a jitdump file into *jd (zeroed first). Returns -EINVAL
 * with tally_seterr when nothing in it can be used (bad magic, unknown version,
 * bad header); a damaged or truncated record later in the file ends the parse
 * with jd->warning set, keeping the functions before it. Release with
 * tally_jitdump_release in both cases. */
int tally_jitdump_parse(struct tally_jitdump *jd, const void *buf, size_t len);
void tally_jitdump_release(struct tally_jitdump *jd);

/* The function containing addr, or NULL. */
struct tally_jit_func *tally_jitdump_find(const struct tally_jitdump *jd, uint64_t addr);
/* The line entry for addr inside f, or NULL when the dump gave none. */
const struct tally_jit_line *tally_jitdump_line(const struct tally_jit_func *f, uint64_t addr);

/* The database's text copy (docs/format.md): the functions with keep set (all
 * when all is true), each with its lines and code. source names the dump file. */
void tally_jitdump_format(const struct tally_jitdump *jd, bool all, const char *source, struct strbuf *out);
/* Reads a text copy (text is modified). -EINVAL with tally_seterr naming what
 * and the line when it is damaged. */
int tally_jitdump_read_copy(struct tally_jitdump *jd, char *text, const char *what);

#endif
