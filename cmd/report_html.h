/* report_html.h - a benchmark run drawn as one self-contained HTML page:
 * inline SVG and CSS, no script, nothing fetched, so it opens offline. */
#ifndef DLK_REPORT_HTML_H
#define DLK_REPORT_HTML_H

#include <jansson.h>
#include <stdio.h>

/* The ranks of a run together: their rates summed (each rank's over its
 * own run, and its fastest epoch after the first: steady, 0 where no
 * report has one), the least busy rank and the longest run. */
struct report_totals {
    double samples_per_s, bytes_per_s, steady_bytes_per_s;
    double least_busy_pct, longest_s;
    long least_busy_rank;
};
void report_totals(json_t *const *ranks, size_t n, struct report_totals *t);

/* Write the page for the reports (bench-stream's JSON objects) of n
 * ranks, all on the same axes; 0 on success (a write error shows in
 * ferror(f)), -1 when a report lacks what the page needs. */
int report_html_write(FILE *f, json_t *const *ranks, size_t n);

#endif
