/* query.h - the row expression language (man/dlk-query.1): tokens, the
 * checked tree, its evaluation over chunks, and vector search. */
#ifndef DLK_QUERY_H
#define DLK_QUERY_H

#include "dataset/dataset.h"

/* ---- tokens (lex.c) ------------------------------------------------ */

typedef enum q_tok {
    TK_END, TK_NUM, TK_STR, TK_NAME, TK_OP, TK_LP, TK_RP, TK_LB, TK_RB,
    TK_COMMA
} q_tok;

typedef struct q_token {
    q_tok kind;
    size_t col;        /* 1-based byte column */
    double num;        /* TK_NUM */
    bool integer;      /* TK_NUM written without '.' or exponent */
    char *text;        /* TK_STR (unescaped), TK_NAME, TK_OP */
    size_t len;        /* bytes of text */
    bool quoted;       /* TK_NAME written `so` (never a keyword) */
} q_token;

#define Q_EXPR_MAX 65536   /* bytes of an expression */
#define Q_NODES_MAX 4096

dlk_status q_lex(const char *src, q_token **toks, size_t *n, size_t *errcol,
                 dlk_error *err);
void q_tokens_free(q_token *t, size_t n);

/* ---- the checked tree (parse.c) ------------------------------------ */

typedef enum q_kind {
    N_NUM, N_ROW, N_SCALAR, N_SHAPE, N_LEN, N_MEAN, N_SUM, N_MIN, N_MAX,
    N_RANDOM, N_ABS, N_NEG, N_NOT, N_ARITH, N_CMP, N_AND, N_OR, N_IN,
    N_TEXT_EQ, N_TEXT_IN, N_CONTAINS, N_LIKE,
    /* only while parsing: operands that are not numbers */
    N_STR, N_TEXTREF, N_TENSORREF
} q_kind;

typedef struct q_node {
    q_kind kind;
    char op;           /* N_ARITH: + - * / %; N_CMP: = ! < l > g */
    bool negate;       /* N_IN, N_TEXT_*, N_LIKE: not in / != / not like */
    size_t col;
    int a, b;          /* operand nodes, -1 none */
    int tensor;        /* dataset tensor index */
    int slot;          /* its place among the referenced tensors */
    int dim;           /* N_SHAPE */
    double num;        /* N_NUM; N_RANDOM: the seed */
    uint64_t seed;
    double *list;      /* N_IN */
    char **strs;       /* N_TEXT_IN; strs[0]: N_TEXT_EQ, N_CONTAINS, N_LIKE */
    size_t *lens;
    size_t nlist;
} q_node;

typedef struct q_expr {
    q_node *nodes;
    size_t n, cap;
    int root;
    int tensors[64];   /* referenced tensors, by slot */
    int ntensors;
} q_expr;

/* Parse and check `src` against the tensors of m.  On an error *errcol
 * is the 1-based column it points at. */
dlk_status q_parse(const char *src, const Dlk_manifest *m, q_expr *out,
                   size_t *errcol, dlk_error *err);
void q_expr_free(q_expr *e);

/* ---- chunks, shared by evaluation and vector search ---------------- */

typedef struct q_chunk {
    dlk_chunk *c;
    const void *map;   /* the mapped object, when the store maps */
    size_t maplen;
    ssize_t index;     /* -1: none */
    uint64_t first, end;
} q_chunk;

/* Make qc hold chunk ci of tensor ti (kept when it already does).  mode:
 * Dlk_chunk_open's, plus Q_WHOLE when all of it will be read (a mapped
 * chunk's pages are then mapped in one call, not a fault each; also with
 * DLK_DECODE_VERIFY). */
#define Q_WHOLE 0x100u
dlk_status q_chunk_get(dlk_dataset *ds, size_t ti, size_t ci, unsigned mode,
                       q_chunk *qc, uint64_t *bytes, dlk_error *err);
void q_chunk_drop(dlk_dataset *ds, q_chunk *qc);

/* Row i of a candidate set: a list, or every row of a range. */
typedef struct q_cands {
    const uint64_t *rows;  /* NULL: rows base..base+n-1 */
    uint64_t n;
    uint64_t base;
} q_cands;
/* The first position in [lo, hi) whose candidate row is >= row (hi when
 * none): a binary search of the rows, or row's position clamped when
 * the candidates are a range. */
static inline uint64_t q_cands_lower(const q_cands *c, uint64_t lo,
                                     uint64_t hi, uint64_t row)
{
    if (!c->rows) {
        uint64_t at = row < c->base ? 0 : row - c->base;
        return at < lo ? lo : at > hi ? hi : at;
    }
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (c->rows[mid] < row)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
static inline uint64_t q_cand(const q_cands *c, uint64_t i)
{
    return c->rows ? c->rows[i] : c->base + i;
}

/* ---- loops over values (kernels.c) -------------------------------- */

/* Element i of little-endian data of dtype t, as a double. */
double q_elem(dlk_dtype t, const uint8_t *p, size_t i);
/* The scalar (one element a sample) of each of rows[0..n) of a chunk
 * whose first row is `first`; contig: rows[i] == rows[0] + i. */
void q_load_scalar(dlk_dtype t, const uint8_t *base, uint64_t first,
                   const uint64_t *rows, size_t n, bool contig, double *out);
/* SQL LIKE of s[0..n) against pat[0..m): '%' any run, '_' one byte. */
bool q_like(const uint8_t *s, size_t n, const char *pat, size_t m);
/* `value op c` for n consecutive scalars of dtype t from element `off`
 * of base, rows r0...: the rows kept are written from out[m] on (out
 * NULL: counted); returns m plus their number.  op as in q_node. */
uint64_t q_cmp_const(dlk_dtype t, char op, const void *base, size_t off,
                     double c, uint64_t r0, size_t n, uint64_t *out,
                     uint64_t m);
/* A value taken as true: not zero, not NaN. */
static inline bool q_truth(double v) { return v != 0 && v == v; }

/* ---- evaluation (eval.c) ------------------------------------------- */

/* The candidates for which e holds, ascending, into *rows (malloc'd);
 * with rows NULL, only their number. */
dlk_status q_filter(dlk_dataset *ds, const q_expr *e, const q_cands *cands,
                    uint32_t threads, bool verify, uint64_t **rows,
                    uint64_t *n, uint64_t *bytes, dlk_error *err);

/* The rows of view `view` (NULL: all rows) for which e holds (NULL:
 * all of them), ascending, into *rows (malloc'd; rows NULL: only their
 * number).  What the manifest decides is not read (q_decided, q_fold:
 * e is folded in place); a count of a view with no filter or a decided
 * one is its entry's `rows` (the view object not read) where the view
 * was saved in a state of at most this one's rows. */
dlk_status q_candidates(dlk_dataset *ds, q_expr *e, const char *view,
                        uint32_t threads, bool verify, uint64_t **rows,
                        uint64_t *n, uint64_t *bytes, dlk_error *err);

/* Whether e has one truth for every row in [row_lo, row_hi] by the
 * manifest's schemas alone (decide.c): then *holds is it. */
bool q_decided(const q_expr *e, const Dlk_manifest *m, uint64_t row_lo,
               uint64_t row_hi, bool *holds);
/* e with each part of one value for every row in [row_lo, row_hi] (by
 * the schemas, as q_decided) made that number, and its tensors only
 * those still read: `shape(images)[0] == 224 and labels == 3` of fixed
 * 224-row images reads labels alone. */
void q_fold(q_expr *e, const Dlk_manifest *m, uint64_t row_lo,
            uint64_t row_hi);
/* The rows [*lo, *hi) outside which e cannot hold, from comparisons of
 * `row` with a number that its root requires (`row >= 1000 and ...`);
 * *lo, *hi come in as the candidates' bounds and only narrow. */
void q_row_range(const q_expr *e, uint64_t *lo, uint64_t *hi);

/* random(seed) of a row: in [0, 1) (man/dlk-query.1 gives the formula). */
static inline double q_random(uint64_t seed, uint64_t row)
{
    return (double)(Dlk_mix64(Dlk_mix64(seed) ^ row) >> 11) * 0x1p-53;
}

/* ---- vector search (topk.c) ---------------------------------------- */

/* The k candidates nearest to q (dim values) in tensor ti, best first,
 * scored on `device` (*used: where it ran). */
dlk_status q_topk(dlk_dataset *ds, size_t ti, const float *q, uint32_t dim,
                  dlk_metric metric, uint32_t k, const q_cands *cands,
                  uint32_t threads, bool verify, dlk_query_device device,
                  dlk_query_device *used, uint64_t **rows, double **scores,
                  uint64_t *n, uint64_t *bytes, dlk_error *err);

#endif
