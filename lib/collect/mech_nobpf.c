/* The BPF mechanisms of a build without libbpf (meson option bpf, or
 * libbpf-dev, bpftool or clang missing): compiled instead of
 * mech_counted.c and mech_offcpu_bpf.c, they say why there are none, so
 * that the collector's logic has no #ifdef. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>

int mech_counted_open(struct tally_collector *c, bool asked, struct mech **out)
{
	*out = NULL;
	if (asked)
		return tally_seterr(
			-ENOTSUP,
			"this tally was built without BPF (libbpf-dev, bpftool and clang; use --sample-mechanism ring)");
	snprintf(c->sample_why, sizeof(c->sample_why), "built without BPF");
	return 0;
}

int mech_offcpu_bpf_open(struct tally_collector *c, bool asked, struct mech **out)
{
	*out = NULL;
	if (asked)
		return tally_seterr(
			-ENOTSUP,
			"this tally was built without BPF (libbpf-dev, bpftool and clang; use --off-cpu-mechanism tracepoint)");
	c->off_why = "built without BPF";
	return 0;
}
