/*
 * s3_internal.h - the pieces of the S3 store: its settings (s3_config.c),
 * the request engine on a libcurl multi handle (s3_http.c), XML parsing
 * (s3_xml.c) and the store operations (s3.c).
 */
#ifndef DLK_S3_INTERNAL_H
#define DLK_S3_INTERNAL_H

#include "util/buf.h"
#include "store/store.h"

#include <curl/curl.h>
#include <pthread.h>

/* ---- configuration (s3_config.c) ----------------------------------- */

typedef struct s3_config {
    char *endpoint;       /* "scheme://host[:port][/path]", no trailing '/';
                             NULL: AWS (https://s3.REGION.amazonaws.com) */
    char *region;         /* never NULL after s3_config_from */
    char *access_key;     /* NULL when anonymous */
    char *secret_key;     /* secret: never in a message */
    char *session_token;  /* secret: never in a message */
    char *ca_bundle;      /* a PEM file of CAs, or NULL */
    bool path_style;      /* bucket in the path, not in the host name */
    bool force_virtual;   /* virtual-hosted even for a bucket with a '.' */
    int max_inflight;     /* default 64 */
    bool max_inflight_set; /* ... given by the user: a cap, not a default */
    int max_attempts;     /* default 8 */
    int io_threads;       /* engines of bulk GETs; 0: by cores */
    uint64_t part_size;   /* default 16 MiB */
    uint64_t multipart_threshold; /* default 64 MiB */
    uint64_t read_part_size; /* a sized read's ranges, default 8 MiB */
    int read_threads;     /* engines of sized reads; 0: by cores */
    bool hedge_off;       /* no hedged GETs */
    int hedge_min_ms;     /* a GET is hedged after this at least */
    long recv_buffer;     /* bytes a receive asks for; 0: 64 KiB */
    long stall_rate;      /* bytes/s below which an attempt ... */
    long stall_seconds;   /* ... this long is stalled */
    long request_timeout; /* s an attempt may take, plus 1 per 256 KiB */
    uint64_t list_max_keys;  /* a listing's keys, at most */
    uint64_t list_max_pages; /* a listing's pages, at most */
    int (*cancel)(void *ud); /* the caller's; NULL: never asked */
    void *cancel_ud;
} s3_config;

#define S3_STALL_RATE_DEFAULT 4096
#define S3_STALL_SECONDS_DEFAULT 30
#define S3_REQUEST_TIMEOUT_DEFAULT 120
/* an attempt's deadline grows by a second for each this many bytes it
 * expects: a link of 2 Mbit/s still reads what it asked for in time */
#define S3_TIMEOUT_BYTES_PER_S (256u << 10)
#define S3_LIST_MAX_KEYS_DEFAULT 100000000ull
#define S3_LIST_MAX_PAGES_DEFAULT 1000000ull

#define S3_HEDGE_MIN_MS_DEFAULT 200

/* The settings of o (NULL: every default), checked and copied: an error
 * names the option at fault.  On error *c holds nothing that needs
 * freeing. */
dlk_status s3_config_from(s3_config *c, const dlk_store_options *o,
                          dlk_error *err);
/* Wipes the secrets and frees everything; accepts a zeroed config. */
void s3_config_free(s3_config *c);

/* ---- signing (s3_sign.c) ------------------------------------------- */

/* AWS Signature Version 4 for one engine's requests; the secret stays in
 * it (wiped when freed).  One thread signs at a time. */
typedef struct s3_signer s3_signer;
s3_signer *s3_signer_new(const char *access_key, const char *secret,
                         const char *region, const char *token);
void s3_signer_free(s3_signer *g);
/* Append the headers that sign a request for method and url (path and
 * query percent-encoded as sent; the payload UNSIGNED-PAYLOAD): Host,
 * x-amz-content-sha256, x-amz-date, x-amz-security-token (with
 * temporary credentials' session token), and Authorization.  0 on
 * success, -1 when out of memory or the request cannot be signed. */
int s3_sign(s3_signer *g, const char *method, const char *url,
            struct curl_slist **headers);

/* ---- the request engine (s3_http.c) -------------------------------- */

typedef struct s3_engine s3_engine;

#define S3_ERRBODY_MAX (64u << 10)
#define S3_REQID_MAX 128
#define S3_CODE_MAX 64

typedef struct s3_req {
    /* set by the caller */
    const char *method;          /* GET HEAD PUT POST DELETE */
    const char *url;
    struct curl_slist *headers;  /* extra headers (caller owns) */
    const uint8_t *body;         /* PUT/POST payload */
    size_t body_len;
    Dlk_buf *out;                /* 2xx body sink (GET, list, POST) */
    uint64_t max;                /* DLK_ELIMIT past this many body bytes */
    /* NULL: the caller waits (s3_wait).  Else called on the engine's
     * thread, with no lock held, once r has finished for good; r may be
     * freed there (s3_wait must not be used on it). */
    void (*on_finish)(struct s3_req *r);
    /* One more response header to keep (case-insensitive name, NULL:
     * none), into want_value: GCS's x-goog-generation, a resumable
     * upload's Location or Range. */
    const char *want_header;
    /* At most this many attempts (0: the engine's max_attempts): 1 where
     * a resend is not idempotent (a piece of a GCS resumable upload). */
    int attempts_max;

    /* results, valid after s3_perform returns */
    long status;                 /* HTTP status, 0 if none */
    int curl_code;               /* CURLcode of the last attempt */
    char curl_msg[256];
    int attempts;
    bool over_limit;             /* body larger than max */
    bool short_body;             /* fewer bytes than Content-Length */
    uint64_t content_length;     /* UINT64_MAX when absent */
    uint64_t total_size;         /* from Content-Range, else UINT64_MAX */
    char etag[DLK_ETAG_MAX];
    char lastmod[40];            /* Last-Modified as sent ("": none), read
                                  * by s3_req_mtime only where asked for: a
                                  * date parsed for every GET was ~1% of
                                  * the I/O thread */
    char request_id[S3_REQID_MAX];
    char want_value[1024];       /* want_header's value ("": absent) */
    Dlk_buf errbody;             /* non-2xx body, bounded; caller frees */

    bool oom;                    /* no memory for the body or request */
    bool canceled;               /* ended by the store's cancel callback */

    /* engine state */
    uint64_t size_hint;          /* expected body bytes (hedge class) */
    int64_t started_ms;          /* when the current transfer started */
    CURL *easy;                  /* its handle while in flight */
    struct s3_req *hedge;        /* a primary's hedge in flight */
    struct s3_req *hedge_of;     /* a hedge's primary (NULL: primary) */
    bool hedged;                 /* this attempt was hedged already */
    struct s3_req *act_prev, *act_next;  /* unhedged GET/HEAD in flight */
    struct s3_req *fly_prev, *fly_next;  /* every transfer in flight */
    Dlk_buf hbody;               /* a hedge's own body */
    size_t out_start;
    size_t body_off;
    uint64_t received;
    bool in_status_ok;
    bool cond_ready;
    struct curl_slist *all_headers;
    int64_t not_before_ms;
    bool done;
    pthread_cond_t cond;
    struct s3_req *next;
} s3_req;

dlk_status s3_engine_new(const s3_config *cfg, s3_engine **out,
                         dlk_error *err);
void s3_engine_free(s3_engine *e);
/* Run r to completion (retrying what may be retried) from any thread;
 * blocks the caller only.  Afterwards status is the HTTP status of the
 * last attempt (0 when none came: curl_code and curl_msg say why). */
void s3_perform(s3_engine *e, s3_req *r);
/* Submit without waiting; s3_wait waits for one submitted request.
 * Several requests may be in flight from one thread. */
void s3_submit(s3_engine *e, s3_req *r);
/* Queue n requests at once (one wake-up of the engine's thread). */
void s3_submit_all(s3_engine *e, s3_req **rs, size_t n);
void s3_wait(s3_engine *e, s3_req *r);
/* The answer's Last-Modified in Unix seconds; 0 when none or unreadable. */
int64_t s3_req_mtime(const s3_req *r);
/* Release what a finished request holds (errbody, condition variable). */
void s3_req_fini(s3_req *r);
/* The answer is a success (2xx), for S3 and GCS alike. */
static inline bool s3_ok2xx(const s3_req *r)
{
    return r->status >= 200 && r->status < 300;
}
/* Let the in-flight maximum grow up to n where the store's latency, not
 * its speed, bounds the rate (see grow() in s3_http.c). */
void s3_engine_raise_max(s3_engine *e, int n);
/* The in-flight maximum now (it grows, see s3_engine_raise_max). */
int s3_engine_max(s3_engine *e);
/* The current in-flight limit (AIMD), for tests and statistics. */
int s3_engine_limit(s3_engine *e);

/* Hedged GETs (and HEADs).  A GET or HEAD still running after
 * max(the hedge_min_ms option, default 200, 4x the median duration of recent
 * successful transfers of its size class) gets a second, identical
 * request; the first to finish for good wins, the other is cancelled.
 * A hedge takes an in-flight slot like any request; past a small burst,
 * at most one hedge per ten finished transfers is started, and at most
 * four run at once (each buffers its own copy of the body).
 * The s3_no_hedge option turns hedging off.  Size classes need a few samples
 * before they hedge at all: a lone request is never duplicated. */
typedef struct s3_hedge_stats {
    uint64_t started;     /* hedges sent */
    uint64_t won;         /* hedges that answered first */
} s3_hedge_stats;
void s3_engine_hedges(s3_engine *e, s3_hedge_stats *out);
/* Hedges started by every S3 store of this process (dlk_io_counters). */
uint64_t s3_hedges_total(void);

/* ---- XML (s3_xml.c) ------------------------------------------------- */

/* The fields of an S3 <Error> body ("" when absent). */
typedef struct s3_error_info {
    char code[S3_CODE_MAX];
    char request_id[S3_REQID_MAX];
} s3_error_info;

/* Parse an error body; false if it is not one. */
bool s3_xml_error(const void *body, size_t len, s3_error_info *out);

/* One page of ListObjectsV2.  Keys are decoded (encoding-type=url). */
typedef int (*s3_list_item_fn)(void *ud, const char *key, uint64_t size);
/* The same with the object's ETag as listed, quotes removed ("" when the
 * listing gives none). */
typedef int (*s3_list_etag_fn)(void *ud, const char *key, uint64_t size,
                               const char *etag);
typedef struct s3_list_page {
    bool truncated;
    char *next_token;     /* malloc'd, NULL when none */
    int stopped;          /* non-zero when the callback stopped */
    char **prefixes;      /* CommonPrefixes, decoded (with a delimiter) */
    size_t nprefixes;
} s3_list_page;
/* Free what a page holds (its token and prefixes). */
void s3_list_page_fini(s3_list_page *page);
dlk_status s3_xml_list(const void *body, size_t len, s3_list_item_fn fn,
                       void *ud, s3_list_page *page, const char *what,
                       dlk_error *err);
/* s3_xml_list with each entry's ETag. */
dlk_status s3_xml_list_etags(const void *body, size_t len, s3_list_etag_fn fn,
                             void *ud, s3_list_page *page, const char *what,
                             dlk_error *err);

/* A ListObjectsV2 page's NextContinuationToken when it comes before the
 * page's first entry (AWS sends it near the top), read without parsing
 * the entries, so that the next page can be asked for before this one is
 * parsed.  false when there is none, it comes after an entry (moto), it
 * does not fit in cap or the start is malformed: then the full parse's
 * token (s3_xml_list) is the one to use. */
bool s3_xml_list_token(const void *body, size_t len, char *out, size_t cap);

/* Text of the first element named `name` anywhere in the document, into
 * out (bounded).  false if absent or malformed. */
bool s3_xml_find(const void *body, size_t len, const char *name, char *out,
                 size_t cap);

#endif /* DLK_S3_INTERNAL_H */
