/* report_html.h - a benchmark run drawn as one self-contained HTML page:
 * inline SVG and CSS, no script, nothing fetched, so it opens offline. */
#ifndef DLK_REPORT_HTML_H
#define DLK_REPORT_HTML_H

#include <jansson.h>
#include <stdio.h>

/* Write the page for the reports (bench-stream's JSON objects) of n
 * ranks, all on the same axes; 0 on success (a write error shows in
 * ferror(f)), -1 when a report lacks what the page needs. */
int report_html_write(FILE *f, json_t *const *ranks, size_t n);

#endif
