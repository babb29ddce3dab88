/* OTLP profiles (opentelemetry-proto v1.11.0, profiles v1development; the
 * messages restated in lib/push/otlp.proto) made from the pprof profile the
 * export's builder makes, so that symbols, inlines, mappings and labels are
 * made once, in one place. pprof numbers its mappings, locations and
 * functions from 1 in order, OTLP indexes its dictionary's tables from 1
 * with a zero value at 0: the numbers carry over as they are. What differs:
 * one value type per Profile (a Profile per pprof sample type, sharing the
 * dictionary), stacks in a table of their own, labels as attributes (the
 * semantic conventions' names where there is one), and build-ids as the
 * mappings' process.executable.build_id.gnu. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "otlp.pb-c.h"
#include "profile.pb-c.h"
#include "tally/push.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "unknown"
#endif

typedef Perftools__Profiles__Profile PProf;

/* The bytes of a gzip stream (at most 4 GiB: a pprof message is smaller). */
static int gunzip(const void *gz, size_t len, struct strbuf *out)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return tally_seterr(-ENOMEM, "cannot read the pprof profile: zlib cannot start");
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)len;
	int zr = Z_OK;
	while (zr == Z_OK) {
		if (strbuf_grow(out, len * 4 + 65536)) {
			zr = Z_MEM_ERROR;
			break;
		}
		size_t room = out->alloc - out->len - 1;
		uInt n = room > (1u << 30) ? (1u << 30) : (uInt)room;
		z.next_out = (Bytef *)out->buf + out->len;
		z.avail_out = n;
		zr = inflate(&z, Z_NO_FLUSH);
		out->len += n - z.avail_out;
		if (zr == Z_BUF_ERROR && z.avail_out)
			break;
		if (zr == Z_BUF_ERROR)
			zr = Z_OK;
	}
	inflateEnd(&z);
	if (out->buf)
		out->buf[out->len] = '\0';
	if (zr != Z_STREAM_END)
		return tally_seterr(-EIO, "cannot read the pprof profile: zlib error %d", zr);
	return 0;
}

/* ---- the dictionary's strings and attributes, each once ---- */

struct dict {
	char **str;
	size_t nstr, astr;
	struct tally_hidx str_idx;
	Tally__Otlp__KeyValueAndUnit **attr;
	size_t nattr, aattr;
	struct tally_hidx attr_idx;
	Tally__Otlp__Stack **stack;
	size_t nstack, astack;
	struct tally_hidx stack_idx;
};

static bool str_eq(const void *ctx, uint32_t i, const void *key)
{
	return !strcmp(((const struct dict *)ctx)->str[i], key);
}

static int32_t str_of(struct dict *d, const char *s)
{
	uint64_t h = tally_hash_bytes(s, strlen(s), 3);
	uint32_t i = tally_hidx_get(&d->str_idx, h, s, str_eq, d);
	if (i == TALLY_HIDX_NONE) {
		GROW(d->str, d->astr, d->nstr + 1);
		d->str[d->nstr] = (char *)s; /* the pprof's, or a constant: kept until the end */
		i = (uint32_t)d->nstr++;
		tally_hidx_put(&d->str_idx, h, i);
	}
	return (int32_t)i;
}

struct attr_key {
	int32_t key;
	bool num;
	int64_t v; /* a string index, or the number */
};

static bool attr_eq(const void *ctx, uint32_t i, const void *key)
{
	const Tally__Otlp__KeyValueAndUnit *a = ((const struct dict *)ctx)->attr[i];
	const struct attr_key *k = key;
	if (a->key_strindex != k->key)
		return false;
	if (k->num)
		return a->value->value_case == TALLY__OTLP__ANY_VALUE__VALUE_INT_VALUE &&
		       a->value->int_value == k->v;
	return a->value->value_case == TALLY__OTLP__ANY_VALUE__VALUE_STRING_VALUE &&
	       a->value->string_value == ((const struct dict *)ctx)->str[k->v];
}

/* The attribute (key, string s at index sidx of the strings) or (key, number). */
static int32_t attr_of(struct dict *d, const char *key, const char *s, int64_t num)
{
	struct attr_key k = { str_of(d, key), s == NULL, s ? str_of(d, s) : num };
	uint64_t h = tally_hash_u64((uint64_t)k.key << 33 ^ (uint64_t)k.v ^ (k.num ? 1 : 0));
	uint32_t i = tally_hidx_get(&d->attr_idx, h, &k, attr_eq, d);
	if (i != TALLY_HIDX_NONE)
		return (int32_t)i;
	Tally__Otlp__KeyValueAndUnit *a = xcalloc(1, sizeof(*a));
	tally__otlp__key_value_and_unit__init(a);
	a->key_strindex = k.key;
	a->value = xcalloc(1, sizeof(*a->value));
	tally__otlp__any_value__init(a->value);
	if (s) {
		a->value->value_case = TALLY__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
		a->value->string_value = d->str[k.v];
	} else {
		a->value->value_case = TALLY__OTLP__ANY_VALUE__VALUE_INT_VALUE;
		a->value->int_value = num;
	}
	GROW(d->attr, d->aattr, d->nattr + 1);
	d->attr[d->nattr] = a;
	i = (uint32_t)d->nattr++;
	tally_hidx_put(&d->attr_idx, h, i);
	return (int32_t)i;
}

static bool stack_eq(const void *ctx, uint32_t i, const void *key)
{
	const Tally__Otlp__Stack *a = ((const struct dict *)ctx)->stack[i];
	const Perftools__Profiles__Sample *s = key;
	if (a->n_location_indices != s->n_location_id)
		return false;
	for (size_t j = 0; j < s->n_location_id; j++)
		if ((uint64_t)a->location_indices[j] != s->location_id[j])
			return false;
	return true;
}

static int32_t stack_of(struct dict *d, const Perftools__Profiles__Sample *s)
{
	uint64_t h = tally_hash_bytes(s->location_id, s->n_location_id * sizeof(uint64_t), 5);
	uint32_t i = tally_hidx_get(&d->stack_idx, h, s, stack_eq, d);
	if (i != TALLY_HIDX_NONE)
		return (int32_t)i;
	Tally__Otlp__Stack *st = xcalloc(1, sizeof(*st));
	tally__otlp__stack__init(st);
	st->n_location_indices = s->n_location_id;
	st->location_indices = xcalloc(s->n_location_id + 1, sizeof(int32_t));
	for (size_t j = 0; j < s->n_location_id; j++)
		st->location_indices[j] = (int32_t)s->location_id[j];
	GROW(d->stack, d->astack, d->nstack + 1);
	d->stack[d->nstack] = st;
	i = (uint32_t)d->nstack++;
	tally_hidx_put(&d->stack_idx, h, i);
	return (int32_t)i;
}

/* tally's label keys as the semantic conventions name them */
static const char *attr_name(const char *key)
{
	if (!strcmp(key, "comm"))
		return "process.executable.name";
	if (!strcmp(key, "pid"))
		return "process.pid";
	if (!strcmp(key, "host"))
		return "host.name";
	return key;
}

static Tally__Otlp__KeyValue *keyvalue(const char *k, const char *v)
{
	Tally__Otlp__KeyValue *kv = xcalloc(1, sizeof(*kv));
	tally__otlp__key_value__init(kv);
	kv->key = (char *)k;
	kv->value = xcalloc(1, sizeof(*kv->value));
	tally__otlp__any_value__init(kv->value);
	kv->value->value_case = TALLY__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
	kv->value->string_value = (char *)v;
	return kv;
}

int tally_push_otlp_from_pprof(const void *gz, size_t len, const char *app,
			       const struct tally_labelset *resource, struct strbuf *out)
{
	struct strbuf raw = STRBUF_INIT;
	int r = gunzip(gz, len, &raw);
	if (r) {
		strbuf_release(&raw);
		return r;
	}
	PProf *p = perftools__profiles__profile__unpack(NULL, raw.len, (const uint8_t *)raw.buf);
	strbuf_release(&raw);
	if (!p)
		return tally_seterr(-EIO,
				    "cannot read the pprof profile back (protobuf-c refused it)");
	for (size_t i = 0; i < p->n_mapping; i++)
		if (p->mapping[i]->id != i + 1)
			r = -EINVAL;
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id != i + 1)
			r = -EINVAL;
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id != i + 1)
			r = -EINVAL;
	if (r) {
		perftools__profiles__profile__free_unpacked(p, NULL);
		return tally_seterr(
			r, "the pprof profile's ids are not 1, 2, 3... (not one tally made)");
	}
	struct dict d = { 0 };
	for (size_t i = 0; i < p->n_string_table; i++) {
		GROW(d.str, d.astr, d.nstr + 1);
		d.str[d.nstr] = p->string_table[i];
		/* pprof's strings are each once: the index is theirs */
		tally_hidx_put(&d.str_idx,
			       tally_hash_bytes(p->string_table[i], strlen(p->string_table[i]), 3),
			       (uint32_t)d.nstr);
		d.nstr++;
	}
	if (!d.nstr)
		str_of(&d, "");
	/* every table starts with its zero value */
	Tally__Otlp__KeyValueAndUnit attr0 = TALLY__OTLP__KEY_VALUE_AND_UNIT__INIT;
	GROW(d.attr, d.aattr, 1);
	d.attr[d.nattr++] = &attr0;
	Tally__Otlp__Stack stack0 = TALLY__OTLP__STACK__INIT;
	GROW(d.stack, d.astack, 1);
	d.stack[d.nstack++] = &stack0;

	/* mappings, with their build-ids */
	size_t nm = p->n_mapping + 1;
	Tally__Otlp__Mapping *mp = xcalloc(nm, sizeof(*mp));
	Tally__Otlp__Mapping **mpp = xcalloc(nm, sizeof(*mpp));
	int32_t *mattr = xcalloc(nm, sizeof(int32_t));
	for (size_t i = 0; i < nm; i++) {
		tally__otlp__mapping__init(&mp[i]);
		mpp[i] = &mp[i];
		if (!i)
			continue;
		const Perftools__Profiles__Mapping *m = p->mapping[i - 1];
		mp[i].memory_start = m->memory_start;
		mp[i].memory_limit = m->memory_limit;
		mp[i].file_offset = m->file_offset;
		mp[i].filename_strindex = (int32_t)m->filename;
		if (m->build_id > 0 && (size_t)m->build_id < p->n_string_table) {
			mattr[i] = attr_of(&d, "process.executable.build_id.gnu",
					   p->string_table[m->build_id], 0);
			mp[i].n_attribute_indices = 1;
			mp[i].attribute_indices = &mattr[i];
		}
	}
	/* functions */
	size_t nf = p->n_function + 1;
	Tally__Otlp__Function *fn = xcalloc(nf, sizeof(*fn));
	Tally__Otlp__Function **fnp = xcalloc(nf, sizeof(*fnp));
	for (size_t i = 0; i < nf; i++) {
		tally__otlp__function__init(&fn[i]);
		fnp[i] = &fn[i];
		if (!i)
			continue;
		const Perftools__Profiles__Function *f = p->function[i - 1];
		fn[i].name_strindex = (int32_t)f->name;
		fn[i].system_name_strindex = (int32_t)f->system_name;
		fn[i].filename_strindex = (int32_t)f->filename;
		fn[i].start_line = f->start_line;
	}
	/* locations and their lines */
	size_t nl = p->n_location + 1, nlines = 0;
	for (size_t i = 0; i < p->n_location; i++)
		nlines += p->location[i]->n_line;
	Tally__Otlp__Location *loc = xcalloc(nl, sizeof(*loc));
	Tally__Otlp__Location **locp = xcalloc(nl, sizeof(*locp));
	Tally__Otlp__Line *lines = xcalloc(nlines + 1, sizeof(*lines));
	Tally__Otlp__Line **linep = xcalloc(nlines + 1, sizeof(*linep));
	size_t li = 0;
	for (size_t i = 0; i < nl; i++) {
		tally__otlp__location__init(&loc[i]);
		locp[i] = &loc[i];
		if (!i)
			continue;
		const Perftools__Profiles__Location *l = p->location[i - 1];
		loc[i].mapping_index = (int32_t)l->mapping_id;
		loc[i].address = l->address;
		loc[i].n_lines = l->n_line;
		loc[i].lines = &linep[li];
		for (size_t j = 0; j < l->n_line; j++, li++) {
			tally__otlp__line__init(&lines[li]);
			lines[li].function_index = (int32_t)l->line[j]->function_id;
			lines[li].line = l->line[j]->line;
			linep[li] = &lines[li];
		}
	}
	/* samples: their stacks and attributes (the same for every Profile) */
	size_t ns = p->n_sample;
	int32_t *sstack = xcalloc(ns + 1, sizeof(int32_t));
	int32_t **sattr = xcalloc(ns + 1, sizeof(int32_t *));
	size_t *nsattr = xcalloc(ns + 1, sizeof(size_t));
	for (size_t k = 0; k < ns; k++) {
		const Perftools__Profiles__Sample *s = p->sample[k];
		sstack[k] = stack_of(&d, s);
		sattr[k] = xcalloc(s->n_label + 1, sizeof(int32_t));
		for (size_t j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *lb = s->label[j];
			if (lb->key <= 0 || (size_t)lb->key >= p->n_string_table ||
			    (size_t)lb->str >= p->n_string_table)
				continue;
			const char *key = attr_name(p->string_table[lb->key]);
			if (lb->str)
				sattr[k][nsattr[k]++] =
					attr_of(&d, key, p->string_table[lb->str], 0);
			else
				sattr[k][nsattr[k]++] = attr_of(&d, key, NULL, lb->num);
		}
	}
	/* one Profile per value type */
	size_t nt = p->n_sample_type;
	Tally__Otlp__Profile *prof = xcalloc(nt + 1, sizeof(*prof));
	Tally__Otlp__Profile **profp = xcalloc(nt + 1, sizeof(*profp));
	Tally__Otlp__ValueType *vt = xcalloc(nt + 1, sizeof(*vt)),
			       period_type = TALLY__OTLP__VALUE_TYPE__INIT;
	Tally__Otlp__Sample *smp = xcalloc(ns * nt + 1, sizeof(*smp));
	Tally__Otlp__Sample **smpp = xcalloc(ns * nt + 1, sizeof(*smpp));
	int64_t *vals = xcalloc(ns * nt + 1, sizeof(int64_t));
	if (p->period_type) {
		period_type.type_strindex = (int32_t)p->period_type->type;
		period_type.unit_strindex = (int32_t)p->period_type->unit;
	}
	size_t at = 0;
	for (size_t t = 0; t < nt; t++) {
		tally__otlp__profile__init(&prof[t]);
		profp[t] = &prof[t];
		tally__otlp__value_type__init(&vt[t]);
		vt[t].type_strindex = (int32_t)p->sample_type[t]->type;
		vt[t].unit_strindex = (int32_t)p->sample_type[t]->unit;
		prof[t].sample_type = &vt[t];
		prof[t].time_unix_nano = (uint64_t)p->time_nanos;
		prof[t].duration_nano = (uint64_t)p->duration_nanos;
		prof[t].period_type = p->period_type ? &period_type : NULL;
		prof[t].period = p->period;
		prof[t].samples = &smpp[at];
		for (size_t k = 0; k < ns; k++) {
			const Perftools__Profiles__Sample *s = p->sample[k];
			if (t >= s->n_value || !s->value[t])
				continue;
			tally__otlp__sample__init(&smp[at]);
			smp[at].stack_index = sstack[k];
			smp[at].n_attribute_indices = nsattr[k];
			smp[at].attribute_indices = sattr[k];
			vals[at] = s->value[t];
			smp[at].n_values = 1;
			smp[at].values = &vals[at];
			smpp[at] = &smp[at];
			prof[t].n_samples++;
			at++;
		}
	}
	/* the resource: the service and the host, the user's labels */
	size_t nres = (resource ? resource->n : 0) + 1;
	Tally__Otlp__KeyValue **res_attrs = xcalloc(nres + 1, sizeof(*res_attrs));
	size_t nra = 0;
	res_attrs[nra++] = keyvalue("service.name", app);
	for (size_t i = 0; resource && i < resource->n; i++)
		res_attrs[nra++] = keyvalue(attr_name(resource->v[i].key), resource->v[i].value);
	Tally__Otlp__Resource res = TALLY__OTLP__RESOURCE__INIT;
	res.n_attributes = nra;
	res.attributes = res_attrs;
	Tally__Otlp__InstrumentationScope scope = TALLY__OTLP__INSTRUMENTATION_SCOPE__INIT;
	scope.name = "tally";
	scope.version = TALLY_VERSION;
	Tally__Otlp__ScopeProfiles sp = TALLY__OTLP__SCOPE_PROFILES__INIT;
	sp.scope = &scope;
	sp.n_profiles = nt;
	sp.profiles = profp;
	Tally__Otlp__ScopeProfiles *spp = &sp;
	Tally__Otlp__ResourceProfiles rp = TALLY__OTLP__RESOURCE_PROFILES__INIT;
	rp.resource = &res;
	rp.n_scope_profiles = 1;
	rp.scope_profiles = &spp;
	Tally__Otlp__ResourceProfiles *rpp = &rp;
	/* the link table's zero: a trace id and a span id of zeros, at their lengths */
	static uint8_t zeros[16];
	Tally__Otlp__Link link0 = TALLY__OTLP__LINK__INIT;
	link0.trace_id = (ProtobufCBinaryData){ 16, zeros };
	link0.span_id = (ProtobufCBinaryData){ 8, zeros };
	Tally__Otlp__Link *linkp = &link0;
	Tally__Otlp__ProfilesDictionary dict = TALLY__OTLP__PROFILES_DICTIONARY__INIT;
	dict.n_mapping_table = nm;
	dict.mapping_table = mpp;
	dict.n_location_table = nl;
	dict.location_table = locp;
	dict.n_function_table = nf;
	dict.function_table = fnp;
	dict.n_link_table = 1;
	dict.link_table = &linkp;
	dict.n_string_table = d.nstr;
	dict.string_table = d.str;
	dict.n_attribute_table = d.nattr;
	dict.attribute_table = d.attr;
	dict.n_stack_table = d.nstack;
	dict.stack_table = d.stack;
	Tally__Otlp__ExportProfilesServiceRequest req =
		TALLY__OTLP__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	req.n_resource_profiles = 1;
	req.resource_profiles = &rpp;
	req.dictionary = &dict;
	size_t n = tally__otlp__export_profiles_service_request__get_packed_size(&req);
	if (strbuf_grow(out, n)) {
		r = tally_seterr(-ENOMEM, "no memory for the OTLP request (%zu bytes)", n);
	} else {
		out->len += tally__otlp__export_profiles_service_request__pack(
			&req, (uint8_t *)out->buf + out->len);
		out->buf[out->len] = '\0';
	}

	for (size_t i = 0; i < nra; i++) {
		free(res_attrs[i]->value);
		free(res_attrs[i]);
	}
	free(res_attrs);
	free(prof);
	free(profp);
	free(vt);
	free(smp);
	free(smpp);
	free(vals);
	for (size_t k = 0; k < ns; k++)
		free(sattr[k]);
	free(sattr);
	free(nsattr);
	free(sstack);
	free(loc);
	free(locp);
	free(lines);
	free(linep);
	free(fn);
	free(fnp);
	free(mp);
	free(mpp);
	free(mattr);
	for (size_t i = 1; i < d.nattr; i++) {
		free(d.attr[i]->value);
		free(d.attr[i]);
	}
	free(d.attr);
	for (size_t i = 1; i < d.nstack; i++) {
		free(d.stack[i]->location_indices);
		free(d.stack[i]);
	}
	free(d.stack);
	tally_hidx_release(&d.str_idx);
	tally_hidx_release(&d.attr_idx);
	tally_hidx_release(&d.stack_idx);
	free(d.str);
	perftools__profiles__profile__free_unpacked(p, NULL);
	return r;
}
