/* An archive's image and debug files kept in the build-id cache (archive.h):
 * a database merged from an archive names its images by id and path, and
 * its reports find the files there once the archive is gone. */
#define _GNU_SOURCE
#include "tally/archive.h"
#include "tally/cache.h"
#include "tally/util.h"

#include <string.h>
#include <unistd.h>

size_t tally_archive_keep(struct tally_cache *c, const struct tally_db *db, size_t *failed_out)
{
	struct strbuf p = STRBUF_INIT, m = STRBUF_INIT;
	size_t kept = 0, failed = 0;
	for (size_t i = 0; i < db->nimages; i++) {
		const struct tally_db_image *di = &db->images[i];
		char key[TALLY_CACHE_KEY_MAX];
		if ((strcmp(di->kind, "exec") && strcmp(di->kind, "lib")) ||
		    !tally_cache_key(di->id_kind, di->id, key))
			continue;
		strbuf_reset(&m);
		tally_db_image_member(di, &m);
		strbuf_reset(&p);
		strbuf_addf(&p, "%s/%s", db->archive, m.buf);
		/* what the archive does not hold (--exclude-dependent) is left alone */
		if (access(p.buf, F_OK) == 0) {
			int r = tally_cache_add(c, di->id_kind, di->id, p.buf, TALLY_CACHE_IMAGE,
						di->path);
			kept += r >= 0;
			failed += r < 0;
		}
		if (strcmp(di->id_kind, "build-id") || strlen(di->id) < 3)
			continue;
		strbuf_reset(&p);
		strbuf_addf(&p, "%s/debug/.build-id/%.2s/%s.debug", db->archive, di->id,
			    di->id + 2);
		if (access(p.buf, F_OK) == 0)
			failed += tally_cache_add(c, di->id_kind, di->id, p.buf, TALLY_CACHE_DEBUG,
						  NULL) < 0;
	}
	strbuf_release(&p);
	strbuf_release(&m);
	*failed_out = failed;
	return kept;
}
