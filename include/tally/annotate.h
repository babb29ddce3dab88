/* Annotation (opannotate): one function's samples per source line and per
 * instruction. Lines come from DWARF through the resolver's libdwfl module (so
 * from separate debug files as the report finds them) or from a jitdump's line
 * records; instructions from capstone over the image's code bytes (or the
 * jitdump's copy of them). Only what one function needs is read. */
#ifndef TALLY_ANNOTATE_H
#define TALLY_ANNOTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/db.h"
#include "tally/symbols.h"

#define TALLY_ANNOT_NONE UINT32_MAX

/* A source line: file index into tally_annot_func.files, line number. */
/* samples: the values (period weights once the database is weighed); raw:
 * the number of samples (the same when it is not) */
struct tally_annot_line {
	uint32_t file, line;
	uint64_t samples, raw;
};

struct tally_annot_insn {
	uint64_t addr; /* link-time address (objdump's), or the JIT address */
	uint32_t size;
	uint64_t samples, raw;
	char *text;    /* "mnemonic operands", or "(bad)" */
	uint32_t src;  /* index into lines, or TALLY_ANNOT_NONE */
};

struct tally_annot_func {
	uint32_t image;
	char *name;
	uint64_t addr, size;   /* link-time address and size of the function */
	uint64_t samples, raw; /* of the event, in the function */
	uint64_t image_samples;
	char **files;
	size_t nfiles;
	uint32_t main_file;    /* where the function is written, or TALLY_ANNOT_NONE */
	uint32_t first_line, last_line; /* its extent in main_file (0 when unknown) */
	struct tally_annot_line *lines; /* lines with samples and lines of its code, sorted */
	size_t nlines;
	uint64_t no_line, no_line_raw; /* samples at addresses without line information */
	/* the sampled addresses, sorted, and their samples */
	uint64_t *pt_addr, *pt_samples, *pt_raw;
	size_t npts;
	struct tally_annot_insn *insns; /* every instruction, sorted (none without code) */
	size_t ninsns;
	char *line_note;       /* why there are no lines, or NULL */
	char *code_note;       /* why there are no instructions, or NULL */
	/* an inlined function (addr and size 0): its lines from every place it was
	 * inlined, and the functions it was inlined into, by samples */
	bool inlined;
	char **inlined_into;
	size_t ninlined_into;
};

struct tally_annotate_opts {
	const char *symbol;
	const char *image; /* only this image (name, path or file name), or NULL */
	int event;
};

/* Finds every function called o->symbol with samples of o->event and annotates
 * it; *out (caller frees with tally_annotate_free) is sorted by samples. When
 * no function of the symbol table has that name, an inlined function (from
 * DWARF, as report --symbols shows it) of that name is annotated: its samples
 * per source line summed over every place it was inlined. Fails
 * with tally_seterr: -ENOENT when no function has that name and samples, or no
 * image matches o->image; -EINVAL when the name is in several images and
 * o->image does not choose one (the message lists them). */
int tally_annotate(const struct tally_db *db, struct tally_resolver *res,
		   const struct tally_annotate_opts *o, struct tally_annot_func **out, size_t *n);
void tally_annotate_free(struct tally_annot_func *f, size_t n);

/* Index of the line entry for (file, line) in f->lines, or TALLY_ANNOT_NONE. */
uint32_t tally_annot_line_find(const struct tally_annot_func *f, uint32_t file, uint32_t line);

/* Reads a source file as a line table compiled it, looking in the place it
 * names, then under each of dirs: "DIR" is searched for the path and for each
 * of its tails (a/b/c.c as DIR/a/b/c.c, DIR/b/c.c, DIR/c.c); "OLD=NEW" replaces
 * a leading OLD with NEW. 0 with *text (NUL-separated lines, caller frees),
 * *lines (pointers into text, caller frees), *nlines and *found (caller frees);
 * -ENOENT when no candidate exists. */
int tally_annot_source(const char *file, const char **dirs, char **text, char ***lines,
		       size_t *nlines, char **found);

/* How tally_annotate_render shows the functions: */
struct tally_annotate_render_opts {
	/* where to look for sources first (NULL-terminated; may be NULL) */
	const char **source_dirs;
	bool want_asm;            /* the instructions too, under their source lines */
	bool json;                /* JSON (docs/report-json.md) instead of text */
	const char *input;        /* the database's name, for the JSON */
};
struct strbuf;
/* The annotation of the n functions of funcs (tally_annotate's) in event ev,
 * appended to out: text as 'tally annotate' prints it, or one JSON document. */
void tally_annotate_render(const struct tally_db *db, int ev, const struct tally_annot_func *funcs,
			   size_t n, const struct tally_annotate_render_opts *o,
			   struct strbuf *out);

#endif
