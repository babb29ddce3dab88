/* What a remote host answers to tally's probe (tally_remote_parse_probe:
 * docs/remote.md), as ssh hands it back. Oracles: an error is one line naming
 * the host; what is accepted has an architecture that is one word, a boot id
 * that is a UUID or '-', a finite clock offset, and a version line (if any)
 * with no control character. */
#include "fuzz.h"

#include <ctype.h>
#include <math.h>

#include "tally/remote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	struct tally_remote_facts f;
	int r = tally_remote_parse_probe(text, "fuzz-host", 1.7e9, 0.01, &f);
	if (r) {
		fuzz_check_errmsg();
		FUZZ_CHECK(r == -EPROTO, "error %d", r);
		FUZZ_CHECK(strstr(tally_errmsg(), "host 'fuzz-host'"),
			   "the error does not name the host: '%s'", tally_errmsg());
		FUZZ_CHECK(!f.arch && !f.boot_id && !f.tally, "facts left after an error");
	} else {
		FUZZ_CHECK(
			f.arch[0] &&
				strspn(f.arch,
				       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
					strlen(f.arch),
			"architecture '%s'", f.arch);
		FUZZ_CHECK(!strcmp(f.boot_id, "-") || strlen(f.boot_id) == 36, "boot id '%s'",
			   f.boot_id);
		FUZZ_CHECK(isfinite(f.clock_offset), "clock offset %g", f.clock_offset);
		for (const char *p = f.tally; p && *p; p++)
			FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f,
				   "a control character in the version line");
		tally_remote_facts_release(&f);
	}
	free(text);
	return 0;
}
