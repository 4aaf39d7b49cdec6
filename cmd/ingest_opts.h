/* ingest_opts.h - the options `dlk ingest` and `dlk create ... from-s3`
 * share: parsing them into dlk_ingest_opts, the progress line, and the
 * report (text or --json). */
#ifndef DLK_CMD_INGEST_OPTS_H
#define DLK_CMD_INGEST_OPTS_H

#include "cmd.h"

#include <jansson.h>

/* getopt_long codes of the shared options (above the ASCII range). */
enum {
    IO_RESIZE = 1000, IO_FIT, IO_LAYOUT, IO_CHANNELS, IO_MAX_PIXELS,
    IO_FRAMES, IO_FPS, IO_CLIP, IO_LABELS, IO_ON_ERROR, IO_UNORDERED,
    IO_JOBS, IO_FETCH, IO_SHARD, IO_CHECKPOINT, IO_NO_RESUME, IO_JSON,
    IO_QUIET, IO_ORDER, IO_ORDER_SEED, IO_DRY_RUN, IO_MAX_SKIP, IO_NO_KEY,
    IO_ON_CHANGED
};

/* The usage lines of the shared options. */
extern const char ingest_opts_usage[];

typedef struct ingest_cli {
    dlk_ingest_opts o;
    bool json, quiet, tty;
    json_t *errors;      /* [{key, reason}] for --json */
    json_t *schema;      /* [{name, dtype, shape, kind, codec, classes}] */
    json_t *unused;      /* [{key, reason}]: the first UNUSED_LISTED */
    json_t *unused_why;  /* {reason: count} */
    json_t *changed;     /* [key] for --json */
    double last_draw;
    bool drawn;          /* a progress line is on the terminal */
    bool finished;       /* the last progress line was drawn */
    const char *url;     /* the dataset (create: told apart from objects
                            that are no dataset when it exists) */
} ingest_cli;

void ingest_cli_init(ingest_cli *c);
void ingest_cli_free(ingest_cli *c);
/* Handle option `code`; returns 0, or EXIT_USAGE after printing why. */
int ingest_cli_opt(ingest_cli *c, const char *cmd, int code,
                   const char *arg);
/* "from-s3 URL" / "from-dir DIR": sets o.source; EXIT_USAGE if bad. */
int ingest_cli_source(ingest_cli *c, const char *cmd, const char *kind,
                      const char *where);
/* o.store: the store options for the dataset at url, the source and the
 * labels (cmd_store). */
dlk_status ingest_cli_store(ingest_cli *c, const char *url, dlk_error *err);
/* SIGINT and SIGTERM stop the run at a checkpoint (o.stop) from now on. */
void ingest_cli_signals(ingest_cli *c);
/* Print the outcome (stdout) and return the exit code. */
int ingest_cli_report(ingest_cli *c, const char *cmd, dlk_status rc,
                      const dlk_ingest_result *r, const dlk_error *err);

/* The long options ingest and create share (one table row each; their
 * codes are handled by ingest_cli_option). */
#define INGEST_LONG_OPTIONS \
    {"resize", required_argument, 0, IO_RESIZE}, \
    {"fit", required_argument, 0, IO_FIT}, \
    {"layout", required_argument, 0, IO_LAYOUT}, \
    {"channels", required_argument, 0, IO_CHANNELS}, \
    {"max-pixels", required_argument, 0, IO_MAX_PIXELS}, \
    {"frames", required_argument, 0, IO_FRAMES}, \
    {"fps", required_argument, 0, IO_FPS}, \
    {"clip-seconds", required_argument, 0, IO_CLIP}, \
    {"labels", required_argument, 0, IO_LABELS}, \
    {"on-error", required_argument, 0, IO_ON_ERROR}, \
    {"unordered", no_argument, 0, IO_UNORDERED}, \
    {"order", required_argument, 0, IO_ORDER}, \
    {"order-seed", required_argument, 0, IO_ORDER_SEED}, \
    {"jobs", required_argument, 0, IO_JOBS}, \
    {"fetch", required_argument, 0, IO_FETCH}, \
    {"shard", required_argument, 0, IO_SHARD}, \
    {"checkpoint", required_argument, 0, IO_CHECKPOINT}, \
    {"no-resume", no_argument, 0, IO_NO_RESUME}, \
    {"dry-run", no_argument, 0, IO_DRY_RUN}, \
    {"max-skip", required_argument, 0, IO_MAX_SKIP}, \
    {"no-key", no_argument, 0, IO_NO_KEY}, \
    {"on-changed", required_argument, 0, IO_ON_CHANGED},

#endif
