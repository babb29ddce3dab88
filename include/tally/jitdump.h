/* JIT code described by perf's jitdump files (jit-PID.dump, the format of
 * tools/perf/Documentation/jitdump-specification.txt in the Linux tree) and by
 * perf maps (/tmp/perf-PID.map): the recorder parses the runtime's files, and
 * the database keeps a plain-text copy of the jitdump's functions that had
 * samples (names, line tables, machine code; see docs/format.md), which the
 * report and annotate read back. Every parser here takes a buffer and its
 * length, holds no file open and trusts nothing in the bytes: the files are
 * written by the profiled user, and the recorder may run as root. */
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
	uint32_t seq;  /* the order the entries came in: of entries at one address, the last wins */
};

struct tally_jit_func {
	uint64_t addr, size;
	uint64_t index;  /* the runtime's code_index */
	uint64_t order;  /* load order: where code overlaps, the last loaded names it */
	char *name;      /* never empty */
	unsigned char *code; /* size bytes, or NULL when the dump had none */
	struct tally_jit_line *lines; /* sorted by addr, each inside [addr, addr + size) */
	size_t nlines;
	bool keep; /* the recorder's mark: samples fell in it */
};

struct tally_jitdump {
	uint32_t elf_mach; /* ELF e_machine of the code (62: x86-64) */
	uint32_t pid;
	struct tally_jit_func *funcs; /* after parsing: sorted by addr, non-overlapping */
	size_t nfuncs, afuncs;
	char **files;      /* never empty */
	size_t nfiles, afiles;
	struct tally_hidx file_idx;
	uint64_t next_order;
	/* what the functions and file names cost (their entries, names, code, line
	 * tables; not allocator slack), and the most they were allowed (0: no limit) */
	size_t bytes, budget;
	/* records dropped because they would have passed the budget */
	uint64_t dropped, dropped_moves;
	/* damage after a good header, or records dropped: what and where; what came
	 * before is kept (one line, for a warning) */
	char *warning;
};

/* What a jitdump of len bytes may cost once parsed: four times its size plus
 * 1 MiB (docs/symbols.md). A dump's records cost about what they take in the
 * file, except JIT_CODE_MOVE, which copies the function it moves: this bounds
 * a dump of many moves of one big function. */
size_t tally_jitdump_budget(size_t len);

/* Parses the bytes of a jitdump file into *jd (zeroed first), at most
 * tally_jitdump_budget(len) of functions. Returns -EINVAL with tally_seterr
 * when nothing in it can be used (bad magic, unknown version, bad header); a
 * damaged or truncated record later in the file ends the parse or is skipped,
 * with jd->warning set, keeping the functions before it; so are records past
 * the budget, counted in jd->dropped. A JIT_CODE_LOAD with an empty name is a
 * damaged record; line entries outside their function or with an empty file
 * name are not kept. Release with tally_jitdump_release in every case. */
int tally_jitdump_parse(struct tally_jitdump *jd, const void *buf, size_t len);
/* The same with another budget (bytes; 0 means none). */
int tally_jitdump_parse_budget(struct tally_jitdump *jd, const void *buf, size_t len,
			       size_t budget);
void tally_jitdump_release(struct tally_jitdump *jd);

/* ---- record time: a dump still being written, record by record ---- */

/* What the recorder's unwinder needs of a jitdump while the runtime writes
 * it: each JIT_CODE_LOAD's range and the JIT_CODE_UNWINDING_INFO before it
 * (an .eh_frame followed by its .eh_frame_hdr, laid out as if they followed
 * the code at addr + size rounded up to 8: the layout perf inject gives
 * them, and the one V8 and CPython encode their pointers for), and each
 * JIT_CODE_MOVE. */
struct tally_jit_code_event {
	bool move;             /* a JIT_CODE_MOVE of the code at old_addr */
	uint64_t addr, size;   /* the code (a move: where it is now) */
	uint64_t old_addr;
	uint64_t index;
	/* a load's unwinding data, or NULL: eh_frame then eh_frame_hdr */
	const unsigned char *unwind;
	size_t unwind_len, eh_frame_hdr_len; /* hdr_len < unwind_len */
};
typedef void (*tally_jit_code_fn)(void *ctx, const struct tally_jit_code_event *ev);

/* Where a reading of a growing dump is: zero it to start at the file's
 * beginning; tally_jitdump_cursor_release frees the pending unwinding data. */
struct tally_jitdump_cursor {
	uint64_t off;       /* the file offset of the next record (0: the header) */
	/* done: a bad header, a damaged record or JIT_CODE_CLOSE: nothing more is read */
	bool swap, done;
	uint32_t elf_mach;
	unsigned char *unwind; /* the last JIT_CODE_UNWINDING_INFO's data, for the next load */
	size_t unwind_len, unwind_hdr_len;
};

/* The most of a JIT_CODE_UNWINDING_INFO record that is kept (larger ones
 * are skipped: no JIT function has such unwinding tables). */
#define TALLY_JIT_UNWIND_MAX (64u << 10)

/* Reads the records in buf, the file's bytes from cur->off on (len of them;
 * the file has file_len bytes now), calling fn for each load and move. A
 * record's fixed part must be in buf, and the record whole in the file (a
 * runtime may be writing it: it is read next time); the code bytes of a load
 * need not be in buf. Returns how many bytes buf should have held to go on
 * (0 when cur->done, or when the file has no more whole records): read
 * again from cur->off with at least that many. */
size_t tally_jitdump_scan(struct tally_jitdump_cursor *cur, const void *buf, size_t len,
			  uint64_t file_len, tally_jit_code_fn fn, void *ctx);
void tally_jitdump_cursor_release(struct tally_jitdump_cursor *cur);

/* The function containing addr, or NULL. */
struct tally_jit_func *tally_jitdump_find(const struct tally_jitdump *jd, uint64_t addr);
/* The line entry for addr inside f, or NULL when the dump gave none. */
const struct tally_jit_line *tally_jitdump_line(const struct tally_jit_func *f, uint64_t addr);

/* The database's text copy (docs/format.md): the functions with keep set (all
 * when all is true), each with its lines and code. source names the dump file.
 * Names and file names are escaped (tally_jit_escape), so whatever a parsed
 * dump holds reads back the same through tally_jitdump_read_buf. */
void tally_jitdump_format(const struct tally_jitdump *jd, bool all, const char *source,
			  struct strbuf *out);
/* Reads a text copy of len bytes (NUL bytes allowed: a line holding one is
 * damaged) into *jd (zeroed first). A damaged line costs what depends on it
 * only: a bad 'func' line its function, a bad 'line' line its function's line
 * table, a bad 'code' line its code, any other bad line itself; jd->warning
 * then says where the first was and what was wrong with it, naming the copy by
 * what. Returns 0 (release jd in any case). */
int tally_jitdump_read_buf(struct tally_jitdump *jd, const char *text, size_t len,
			   const char *what);
/* tally_jitdump_read_buf over a NUL-terminated text. */
int tally_jitdump_read_copy(struct tally_jitdump *jd, const char *text, const char *what);

/* Names and file names in the copy: a backslash, newline, tab and CR become
 * \\ \n \t \r, and any other control byte, and every byte that is not part of
 * valid UTF-8 (or that encodes a C1 control), becomes \xHH; the rest, spaces
 * included, is kept. tally_unescape_bytes (tally/util.h) undoes it in place
 * and also reads what older versions wrote (which escaped only the first
 * four); an unknown escape is kept as it is, and \x00 too (a C string cannot
 * hold it). */
void tally_jit_escape(struct strbuf *sb, const char *s);

/* ---- perf maps: "START SIZE NAME" lines, START and SIZE hex ---- */

struct tally_perfmap_sym {
	uint64_t start, size;
	size_t name, name_len; /* the name: offset and length in the buffer */
};

/* Parses a perf map of len bytes. *syms gets the entries in file order
 * (caller frees; NULL when none), *nsyms their number, *bad the number of
 * malformed lines (not 'START SIZE NAME': hex numbers of at most 16 digits,
 * an optional 0x, separated by spaces or tabs, a name that is not empty, a
 * range that does not wrap, no NUL byte). Empty lines are ignored. Returns 0. */
int tally_perfmap_parse(const char *buf, size_t len, struct tally_perfmap_sym **syms, size_t *nsyms,
			size_t *bad);
/* The same, and when there are malformed lines, what was wrong with the first
 * appended to why (may be NULL): "line N: WHAT, in 'EXCERPT' (expected ...)",
 * the excerpt escaped (strbuf_add_excerpt). */
int tally_perfmap_parse_why(const char *buf, size_t len, struct tally_perfmap_sym **syms,
			    size_t *nsyms, size_t *bad, struct strbuf *why);

/* A JIT name (perf map, jitdump) fit to print: NULL when s has no control
 * byte and is valid UTF-8 (print it as it is), else s escaped as
 * tally_jit_escape does (caller frees). Names reach terminals, SVG and HTML. */
char *tally_jit_display_name(const char *s);

#endif
