/* Facts about an ELF file and the running kernel, read with elfutils: build-id
 * and content hash; kernel symbols and modules. (Whether an image is a program's
 * executable comes from the task list, not the file: libc.so.6 is runnable too.) */
#ifndef TALLY_ELFINFO_H
#define TALLY_ELFINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tally_elf_info {
	uint8_t build_id[64];
	size_t build_id_len;
	uint64_t hash;      /* XXH64 of the whole file */
	bool have_hash;
	bool is_elf;
};

/* Reads path (a regular file, through links: tally_open_regular; a FIFO or a
 * device is refused, never opened or waited on). want_hash: hash the file when
 * it has no build-id (or always when 2). 0 or -errno with tally_seterr. */
int tally_elf_info(const char *path, int want_hash, struct tally_elf_info *out);
/* The same for an open regular file; path names it in errors. */
int tally_elf_info_fd(int fd, const char *path, int want_hash, struct tally_elf_info *out);
/* Hex of a build-id into buf (2*len+1 bytes). */
void tally_hex(const uint8_t *p, size_t len, char *buf);

struct tally_ksym {
	uint64_t addr, size;
	char type;
	char *name;
	char *module; /* NULL for the core kernel */
};

/* Loads from a kallsyms-format file (path NULL: /proc/kallsyms) the symbols
 * containing the given addresses (sorted or not). *out is sorted by address and
 * owned by the caller (tally_ksyms_free). 0 or -errno. */
int tally_kallsyms_needed(const char *path, const uint64_t *addrs, size_t naddrs,
			  struct tally_ksym **out, size_t *n);
void tally_ksyms_free(struct tally_ksym *s, size_t n);

/* All the kernel's text symbols from a kallsyms-format file (NULL: /proc/kallsyms),
 * kept compactly for a long-running writer that looks them up again and again.
 * *out is the caller's (tally_kallsyms_free). 0 or -errno with tally_seterr. */
struct tally_kallsyms;
int tally_kallsyms_open(const char *path, struct tally_kallsyms **out);
void tally_kallsyms_free(struct tally_kallsyms *t);
/* The symbol containing addr into *out (name and module allocated: free them), or false. */
bool tally_kallsyms_lookup(const struct tally_kallsyms *t, uint64_t addr, struct tally_ksym *out);
/* Bytes the table holds. */
size_t tally_kallsyms_bytes(const struct tally_kallsyms *t);
struct strbuf;
/* The table as bytes appended to out, tagged (what it was read under: the boot
 * and the modules; in this machine's byte order), and read back: -EINVAL
 * unless the bytes are such a table, whole, with this tag. */
void tally_kallsyms_save(const struct tally_kallsyms *t, const char *tag, struct strbuf *out);
int tally_kallsyms_load(const void *buf, size_t len, const char *tag, struct tally_kallsyms **out);
/* The same from a file of such bytes, read once into memory where the
 * arrays are used as they lie (nothing parsed or copied entry by entry). */
int tally_kallsyms_load_fd(int fd, const char *tag, struct tally_kallsyms **out);
/* The lowest and highest addresses of the core kernel's symbols (no module's):
 * false when there are none. */
bool tally_kallsyms_core_range(const struct tally_kallsyms *t, uint64_t *lo, uint64_t *hi);
/* The symbol containing addr in a sorted table, or NULL. */
const struct tally_ksym *tally_ksym_find(const struct tally_ksym *s, size_t n, uint64_t addr);
/* The running kernel's build-id from /sys/kernel/notes (hex), or "" when unknown. */
void tally_kernel_build_id(char *buf, size_t n);
/* The GNU build-id (hex) in a file of raw ELF notes, as the kernel gives them in
 * /sys/kernel/notes and /sys/module/NAME/notes/.note.gnu.build-id; "" when the
 * file is missing, damaged or has none (or buf, n bytes, is too small). */
void tally_notes_build_id(const char *path, char *buf, size_t n);

#endif
