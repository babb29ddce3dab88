/* --explain: where the report looked for an image and its debug info and why its
 * functions and lines are or are not named. */
#define _GNU_SOURCE
#include "internal.h"

void tally_resolver_explain(struct tally_resolver *r, uint32_t image, struct strbuf *out)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s)
		return;
	const struct tally_db_image *di = &r->db->images[image];
	if (s->mod && !s->mismatch)
		sym_get_dwarf(s);
	strbuf_addf(out, "  recorded: %s '%s', %s %s\n", di->kind, di->path, di->id_kind, di->id);
	if (di->foreign_ns)
		strbuf_addstr(
			out,
			"  mapped inside another mount namespace (a container): the path is the container's; give --image-path with the container's root directory, --mapfile or --debug-dir to find the file\n");
	strbuf_add(out, s->log.buf ? s->log.buf : "", s->log.len);
	if (s->mod && !s->mismatch) {
		GElf_Addr b;
		Elf *elf = dwfl_module_getelf(s->mod, &b);
		strbuf_addf(out, "  sections of '%s': ", s->file);
		sym_describe_sections(elf, out);
		strbuf_addch(out, '\n');
		Dwarf_Addr db;
		Dwarf *dw = s->dw ? s->dw : NULL;
		Elf *delf = dw ? dwarf_getelf(dw) : NULL;
		(void)db;
		if (delf && delf != elf) {
			strbuf_addf(out, "  sections of the debug file '%s': ",
				    s->debug_file ? s->debug_file : "?");
			sym_describe_sections(delf, out);
			strbuf_addch(out, '\n');
		}
	}
	/* the verdict */
	if (!strcmp(di->kind, "kernel")) {
		strbuf_addf(out, "  functions: %s\n",
			    s->nsyms ? "named from kernel.syms"
				     : "not named: the database has no kernel symbols");
		strbuf_addf(out, "  lines: %s%s%s\n", s->dw && !r->o.vmlinux ? "from '" : "",
			    s->dw && !r->o.vmlinux ? s->file : "",
			    s->dw && !r->o.vmlinux ? "' (found by its build-id)"
			    : s->dw                ? "from --vmlinux"
			    : r->o.vmlinux
				    ? "none (the --vmlinux given was not used, see above)"
				    : "none (give --vmlinux with the running kernel's image)");
		/* modules: named by kernel.syms with the module in brackets; lines from their .ko
		 */
		for (size_t k = 0; k < s->nkmods; k++) {
			struct kmod *km = &s->kmods[k];
			if (!km->state)
				sym_kmod_load(r, s, (uint32_t)k);
			struct imgsyms *m = &km->sub;
			if (m->mod)
				sym_get_dwarf(m);
			bool bid = !strcmp(km->img.id_kind, "build-id");
			strbuf_addf(out, "  module %s: recorded %s%s\n", km->name,
				    bid ? "build-id " : "",
				    bid ? km->img.id : "without a build-id");
			/* the module's own log, indented under it */
			for (const char *p = m->log.buf ? m->log.buf : ""; *p;) {
				size_t l = strcspn(p, "\n");
				strbuf_addf(out, "  %.*s\n", (int)l, p);
				p += l + (p[l] == '\n');
			}
			strbuf_addf(
				out, "    %s: functions from kernel.syms; lines: %s\n", km->name,
				km->state == 1 && m->dw ? "from its .ko's DWARF"
				: km->state == 1
					? "none (its .ko has no DWARF: install the kernel's debug package or give --debug-dir)"
					: "none (no .ko of this build: give --image-path DIR with the module files)");
		}
		return;
	}
	if (s->mismatch) {
		strbuf_addstr(
			out,
			"  functions: not named: no file with the recorded id was found, and a file with another id is never used (raw offsets are shown)\n");
		return;
	}
	if (!s->nsyms) {
		strbuf_addf(out, "  functions: not named: %s\n", s->note ? s->note : "no symbols");
	} else if (s->nsyms == s->nfde) {
		strbuf_addf(
			out,
			"  functions: no symbols; %zu functions found by their .eh_frame entries, named IMAGE+0xADDRESS (install its debug package, or give --debug-dir or --mapfile, for names)\n",
			s->nfde);
	} else if (!strcmp(di->kind, "jit")) {
		strbuf_addf(out, "  functions: named from the JIT map (%zu entries)\n", s->nsyms);
	} else if (s->have_symtab) {
		strbuf_addf(out, "  functions: named from .symtab (%zu functions)\n",
			    s->nsyms - s->nfde);
		if (s->nfde)
			strbuf_addf(
				out,
				"  functions: %zu more without a symbol, found by their .eh_frame entries, named IMAGE+0xADDRESS\n",
				s->nfde);
	} else {
		strbuf_addf(
			out,
			"  functions: only the exported ones are named, from .dynsym (%zu functions); %zu local functions are named IMAGE+0xADDRESS from their .eh_frame entries (install its debug package, or give --debug-dir or --mapfile, for names)\n",
			s->nsyms - s->nfde, s->nfde);
	}
	if (s->mod)
		strbuf_addf(
			out, "  lines and inlines: %s\n",
			s->dw ? "from DWARF"
			      : "none: no .debug_info in the image or any debug file found above");
	if (s->dwarf_missing)
		strbuf_addf(
			out,
			"  lines and inlines: %zu sampled address%s in named functions had no DWARF (%s): built without -g, or damaged debug info\n",
			s->dwarf_missing, s->dwarf_missing == 1 ? "" : "es", s->dwarf_err);
}
