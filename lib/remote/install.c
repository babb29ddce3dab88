/* The install of this tally on a host, with the libraries it runs on, and
 * the profilers sent along (docs/remote.md, "What goes on a host"). */
#define _GNU_SOURCE
#include "tally/remote.h"
#include "lib/remote/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

struct objs {
	char **v;
	size_t n, a;
};

static int add_obj(struct dl_phdr_info *info, size_t size, void *ctx)
{
	(void)size;
	struct objs *o = ctx;
	if (info->dlpi_name && info->dlpi_name[0] == '/') {
		GROW(o->v, o->a, o->n + 1);
		o->v[o->n++] = xstrdup(info->dlpi_name);
	}
	return 0;
}

/* The ELF interpreter of the running executable (its loader). */
static char *interp_of_self(void)
{
	char *found = NULL;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t nph = 0;
	if (e && elf_getphdrnum(e, &nph) == 0) {
		for (size_t k = 0; k < nph && !found; k++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)k, &ph) || ph.p_type != PT_INTERP ||
			    ph.p_filesz < 2 || ph.p_filesz >= PATH_MAX)
				continue;
			size_t n = 0;
			const char *raw = elf_rawfile(e, &n);
			if (raw && ph.p_offset <= n && ph.p_filesz <= n - ph.p_offset &&
			    raw[ph.p_offset] == '/')
				found = xstrndup(raw + ph.p_offset, ph.p_filesz);
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return found;
}

struct tarbuf {
	struct strbuf sb;
};

static la_ssize_t tar_write_cb(struct archive *a, void *ctx, const void *p, size_t n)
{
	(void)a;
	struct tarbuf *t = ctx;
	strbuf_add(&t->sb, p, n);
	return (la_ssize_t)n;
}

static int tar_add(struct archive *a, const char *name, const void *data, size_t n, unsigned mode)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)n);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, mode);
	int r = archive_write_header(a, e) == ARCHIVE_OK &&
				(!n || archive_write_data(a, data, n) == (la_ssize_t)n)
			? 0
			: -EIO;
	archive_entry_free(e);
	return r;
}

static int tar_add_file(struct archive *a, const char *name, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	int r = tally_read_regular(&sb, AT_FDCWD, path, TALLY_OPEN_FOLLOW, (uint64_t)1 << 30);
	if (!r && tar_add(a, name, sb.buf ? sb.buf : "", sb.len, 0700))
		r = tally_seterr(-EIO, "cannot pack '%s' for the hosts: %s", path,
				 archive_error_string(a));
	strbuf_release(&sb);
	return r;
}

/* The bundle: tally.bin, lib/ (every shared object the process loaded, the
 * loader among them) and the tally script that runs tally.bin with them. */
static int make_bundle(struct strbuf *out)
{
	struct objs o = { 0 };
	dl_iterate_phdr(add_obj, &o);
	char *interp = interp_of_self();
	int r = 0;
	struct tarbuf t = { STRBUF_INIT };
	struct archive *a = archive_write_new();
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_open(a, &t, NULL, tar_write_cb, NULL) != ARCHIVE_OK)
		r = tally_seterr(-EIO, "cannot pack tally for the hosts: %s",
				 archive_error_string(a));
	if (!r)
		r = tar_add_file(a, "tally.bin", "/proc/self/exe");
	bool have_interp = false;
	for (size_t i = 0; i < o.n && !r; i++) {
		const char *base = tally_basename(o.v[i]);
		bool dup = false;
		for (size_t k = 0; k < i && !dup; k++)
			dup = !strcmp(tally_basename(o.v[k]), base);
		if (dup)
			continue;
		struct strbuf name = STRBUF_INIT;
		strbuf_addf(&name, "lib/%s", base);
		r = tar_add_file(a, name.buf, o.v[i]);
		strbuf_release(&name);
		if (interp && !strcmp(base, tally_basename(interp)))
			have_interp = true;
	}
	if (!r && interp && !have_interp) {
		struct strbuf name = STRBUF_INIT;
		strbuf_addf(&name, "lib/%s", tally_basename(interp));
		r = tar_add_file(a, name.buf, interp);
		strbuf_release(&name);
	}
	if (!r && !interp)
		r = tally_seterr(
			-ENOEXEC,
			"cannot pack tally for the hosts: the running executable names no ELF interpreter");
	if (!r) {
		struct strbuf sh = STRBUF_INIT;
		/* the loader and libraries of this machine, whatever the host has */
		strbuf_addf(
			&sh,
			"#!/bin/sh\nd=$(dirname \"$0\")\nexec \"$d/lib/%s\" --library-path \"$d/lib\" \"$d/tally.bin\" \"$@\"\n",
			tally_basename(interp));
		if (tar_add(a, "tally", sh.buf, sh.len, 0700))
			r = tally_seterr(-EIO, "cannot pack tally for the hosts: %s",
					 archive_error_string(a));
		strbuf_release(&sh);
	}
	if (archive_write_close(a) != ARCHIVE_OK && !r)
		r = tally_seterr(-EIO, "cannot pack tally for the hosts: %s",
				 archive_error_string(a));
	archive_write_free(a);
	for (size_t i = 0; i < o.n; i++)
		free(o.v[i]);
	free(o.v);
	free(interp);
	if (!r)
		*out = t.sb;
	else
		strbuf_release(&t.sb);
	return r;
}

/* The install's script: $1 the root, $2 its directory for this version, $3
 * the version line it must print. The root is checked before and after it is
 * made (what is missing of it made 0700), then it is the user's own and
 * private; the copy lands whole or not at all: unpacked beside, then renamed
 * into place, an outdated one moved aside first; when another install (a
 * second name of the host, another job) put a working one there meanwhile,
 * that one stays. */
static const char install_sh[] = ROOT_CHECK_SH
	"umask 077; "
	"chk \"$1\" \"$2\"; "
	"[ -d \"$1\" ] || mkdir -p -m 700 -- \"$1\" || exit 3; "
	"chk \"$1\" \"$2\"; "
	"chmod 700 \"$1\" || exit 3; "
	"t=$(mktemp -d \"$1/.install.XXXXXX\") || exit 3; "
	"if ! tar -x -f - -C \"$t\"; then rm -rf \"$t\"; exit 4; fi; "
	"o=; "
	"if [ \"$(\"$2/tally\" --version 2>/dev/null)\" != \"$3\" ]; then "
	"if [ -e \"$2\" ]; then o=$(mktemp -d \"$1/.old.XXXXXX\") && mv -T \"$2\" \"$o/v\" || exit 4; fi; "
	"mv -T \"$t\" \"$2\" || [ \"$(\"$2/tally\" --version 2>/dev/null)\" = \"$3\" ] || { rm -rf \"$t\" ${o:+\"$o\"}; exit 4; }; "
	"fi; "
	"rm -rf \"$t\" ${o:+\"$o\"}; "
	"\"$2/tally\" --version";

int tally_remote_install(const struct tally_remote *r, bool *installed, size_t *bytes)
{
	*installed = false;
	if (bytes)
		*bytes = 0;
	struct tally_remote_facts f;
	int ret = tally_remote_probe(r, &f);
	if (ret)
		return ret;
	struct utsname u;
	uname(&u);
	char want[64];
	snprintf(want, sizeof(want), "tally %s", TALLY_VERSION);
	if (strcmp(f.arch, u.machine)) {
		char q[TALLY_EXCERPT_SIZE];
		ret = tally_seterr(
			-ENOEXEC,
			"host '%s' is %s, and this tally is built for %s (install a tally built for it)",
			r->host, tally_excerpt(q, f.arch), u.machine);
	} else if (f.tally && !strcmp(f.tally, want)) {
		ret = 0; /* a working one of this version: it answered */
	} else {
		struct strbuf bundle = STRBUF_INIT;
		ret = make_bundle(&bundle);
		if (!ret) {
			char *dir = tally_remote_dir(r);
			char *words[] = {
				"sh", "-c", (char *)install_sh, "sh", (char *)rmt_root_of(r), dir,
				want, NULL
			};
			struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;
			int status;
			ret = tally_remote_run(r, words, bundle.buf, bundle.len, &out, 4096, &err,
					       &status);
			if (!ret && status == 3) {
				ret = rmt_root_refused(r, &err);
			} else if (!ret && status) {
				ret = rmt_run_failed(r, "installing tally", status, &err);
			} else if (!ret) {
				while (out.len && out.buf[out.len - 1] == '\n')
					out.buf[--out.len] = '\0';
				if (!out.buf || strcmp(out.buf, want)) {
					char q[LAST_LINE_SIZE];
					rmt_last_line(&err, q);
					ret = tally_seterr(
						-ENOEXEC,
						"host '%s': the tally installed in '%s' does not run (%s)",
						r->host, dir, q[0] ? q : "no version printed");
				} else {
					*installed = true;
					if (bytes)
						*bytes = bundle.len;
				}
			}
			strbuf_release(&out);
			strbuf_release(&err);
			free(dir);
		}
		strbuf_release(&bundle);
	}
	tally_remote_facts_release(&f);
	return ret;
}

/* ---- profilers sent along ---- */

/* dir (a plugin's directory) into the tar as NAME/...: regular files (links
 * to them followed) and directories, at most 16 deep and max bytes in all. */
static int tar_add_tree(struct archive *a, const char *name, const char *dir, int depth,
			size_t *left)
{
	if (depth > 16)
		return tally_seterr(-ELOOP, "'%s' is more than 16 directories deep", dir);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, 0700);
	int r = archive_write_header(a, e) == ARCHIVE_OK
			? 0
			: tally_seterr(-EIO, "cannot pack '%s': %s", dir, archive_error_string(a));
	archive_entry_free(e);
	DIR *d = r ? NULL : opendir(dir);
	if (!r && !d)
		r = tally_seterr(-errno, "cannot read '%s': %s", dir, strerror(errno));
	for (struct dirent *de; !r && d && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct strbuf path = STRBUF_INIT, sub = STRBUF_INIT;
		strbuf_addf(&path, "%s/%s", dir, de->d_name);
		strbuf_addf(&sub, "%s/%s", name, de->d_name);
		struct stat st;
		if (stat(path.buf, &st) == 0 && S_ISDIR(st.st_mode)) {
			r = tar_add_tree(a, sub.buf, path.buf, depth + 1, left);
		} else if (stat(path.buf, &st) == 0 && S_ISREG(st.st_mode)) {
			struct strbuf data = STRBUF_INIT;
			r = tally_read_regular(&data, AT_FDCWD, path.buf, TALLY_OPEN_FOLLOW, *left);
			if (!r) {
				*left -= data.len;
				if (tar_add(a, sub.buf, data.buf ? data.buf : "", data.len,
					    st.st_mode & 0100 ? 0700 : 0600))
					r = tally_seterr(-EIO, "cannot pack '%s': %s", path.buf,
							 archive_error_string(a));
			}
			strbuf_release(&data);
		}
		strbuf_release(&path);
		strbuf_release(&sub);
	}
	if (d)
		closedir(d);
	return r;
}

static const char unpack_sh[] =
	"umask 077; mkdir -p -m 700 -- \"$1\" && exec tar -x -f - -C \"$1\"";

int tally_remote_send_dirs(const struct tally_remote *r, char *const *dirs, char *const *names,
			   size_t n, const char *rdir)
{
	struct tarbuf t = { STRBUF_INIT };
	struct archive *a = archive_write_new();
	int ret = 0;
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_open(a, &t, NULL, tar_write_cb, NULL) != ARCHIVE_OK)
		ret = tally_seterr(-EIO, "cannot pack the profilers: %s", archive_error_string(a));
	size_t left = (size_t)64 << 20;
	for (size_t i = 0; i < n && !ret; i++)
		ret = tar_add_tree(a, names[i], dirs[i], 0, &left);
	if (archive_write_close(a) != ARCHIVE_OK && !ret)
		ret = tally_seterr(-EIO, "cannot pack the profilers: %s", archive_error_string(a));
	archive_write_free(a);
	if (!ret) {
		char *words[] = { "sh", "-c", (char *)unpack_sh, "sh", (char *)rdir, NULL };
		struct strbuf err = STRBUF_INIT;
		int status;
		ret = tally_remote_run(r, words, t.sb.buf, t.sb.len, NULL, 0, &err, &status);
		if (!ret && status)
			ret = rmt_run_failed(r, "sending the profilers", status, &err);
		strbuf_release(&err);
	}
	strbuf_release(&t.sb);
	return ret;
}
