/* libcurl, loaded with dlopen when the first push is sent (lib/push/curl.c):
 * linked, it and what it pulls in (Kerberos, LDAP, SSH, TLS, IDN: 30 more
 * libraries) cost every tally command about 6 ms of the dynamic linker's
 * time at start-up, push or not. Include this instead of <curl/curl.h>: the
 * functions http.c calls are then those of the library loaded. */
#ifndef TALLY_PUSH_CURL_H
#define TALLY_PUSH_CURL_H

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

struct tally_curl {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	curl_mime *(*mime_init)(CURL *);
	curl_mimepart *(*mime_addpart)(curl_mime *);
	CURLcode (*mime_name)(curl_mimepart *, const char *);
	CURLcode (*mime_filename)(curl_mimepart *, const char *);
	CURLcode (*mime_type)(curl_mimepart *, const char *);
	CURLcode (*mime_data)(curl_mimepart *, const char *, size_t);
	void (*mime_free)(curl_mime *);
};

/* The library, loaded once (thread-safe) and curl_global_init'ed: NULL with
 * tally_seterr naming the library and the package to install. */
const struct tally_curl *tally_curl(void);

#endif
