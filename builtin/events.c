/* tally events: the event list and what this machine can sample (ophelp's role). */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>

#include "builtin/builtin.h"
#include "tally/collect.h"
#include "tally/util.h"

static const struct tally_option events_options[] = { TALLY_OPTION_END };
static const struct tally_optgroup events_group = { NULL, events_options, NULL };

const struct tally_cmdopts events_cmdopts = {
	.name = "events",
	.summary = "list the events this machine can sample (ophelp)",
	.usage = "",
	.footer =
		"Lists every event: name, type, whether this machine can sample it, and what it counts.\n",
	.groups = { &events_group },
};

int cmd_events(int argc, char **argv)
{
	int first, r = tally_cmd_options(&events_cmdopts, NULL, argc, argv, &first);
	if (r >= 0)
		return r;
	if (first < argc)
		return tally_usage_error("events", "unexpected argument '%s'", argv[first]);
	bool any_hw_missing = false;
	/* the name column as wide as the longest name with its alias, so that
	 * the columns line up whatever the table holds */
	int w = 0;
	for (size_t i = 0; i < tally_event_table_len; i++) {
		const struct tally_event_desc *e = &tally_event_table[i];
		int l = (int)(strlen(e->name) + (e->alias ? 1 + strlen(e->alias) : 0));
		w = l > w ? l : w;
	}
	for (size_t i = 0; i < tally_event_table_len; i++) {
		const struct tally_event_desc *e = &tally_event_table[i];
		bool ok = tally_event_probe(e) == 0;
		if (!ok && e->type == PERF_TYPE_HARDWARE)
			any_hw_missing = true;
		char name[64];
		snprintf(name, sizeof(name), "%s%s%s", e->name, e->alias ? "|" : "",
			 e->alias ? e->alias : "");
		printf("%-*s  %-10s %-12s %s\n", w, name,
		       e->type == PERF_TYPE_HARDWARE ? "hardware"
		       : e->offcpu                   ? "tracepoint"
						     : "software",
		       ok ? "available" : "unavailable", e->desc);
	}
	if (any_hw_missing)
		tally_say(
			"hardware events are unavailable: this machine exposes no hardware PMU (virtual machines often do not); use cpu-clock");
	return 0;
}
