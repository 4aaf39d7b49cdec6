/* ingest_opts.h - the options `dlk ingest` and `dlk create ... from-s3`
 * share: parsing them into dlk_ingest_opts, the progress line, and the
 * report (text or --json). */
#ifndef DLK_CMD_INGEST_OPTS_H
#define DLK_CMD_INGEST_OPTS_H

#include "cmd.h"
#include "options.h"

#include <jansson.h>

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
    json_t *classes;     /* [{tensor, name, id}]: class names appended */
    double last_draw;
    bool drawn;          /* a progress line is on the terminal */
    bool finished;       /* the last progress line was drawn */
    const char *url;     /* the dataset (create: told apart from objects
                            that are no dataset when it exists) */
} ingest_cli;

void ingest_cli_init(ingest_cli *c);
void ingest_cli_free(ingest_cli *c);
/* The options ingest and create share, as rows of a command's table
 * (options.h): INGEST_NOPTIONS rows written to out, storing into c. */
#define INGEST_NOPTIONS 28
size_t ingest_cli_options(ingest_cli *c, cmd_opt *out);
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

#endif
