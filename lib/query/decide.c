/* decide.c - whether an expression holds for every row, or for none,
 * by what the manifest says alone: each node's values bounded from the
 * schema (a dtype's range, a fixed shape's dimensions) and the rows
 * asked about, and a comparison decided where the bounds of its two
 * sides cannot meet (or cannot differ).  A decided filter reads no
 * chunk (man/dlk-query.1, "What is read").  Bounds are kept as doubles,
 * as evaluation computes (eval.c): an integer dtype's range, as doubles,
 * bounds the doubles its values become. */
#include "query.h"

#include <math.h>

/* Values a node can take: within [lo, hi], and NaN too when nan. */
typedef struct span {
    double lo, hi;
    bool nan;
} span;

static const span ANY = {-INFINITY, INFINITY, true};

static span point(double v)
{
    return isnan(v) ? ANY : (span){v, v, false};
}

/* A dtype's values as evaluation reads them (q_elem); floats any. */
static span dtype_span(dlk_dtype t)
{
    switch (t) {
    case DLK_U8: case DLK_BOOL: return (span){0, 255, false};
    case DLK_I8: return (span){-128, 127, false};
    case DLK_U16: return (span){0, 65535, false};
    case DLK_I16: return (span){-32768, 32767, false};
    case DLK_U32: return (span){0, 4294967295.0, false};
    case DLK_I32: return (span){-2147483648.0, 2147483647.0, false};
    case DLK_U64: return (span){0, 0x1p64, false};
    case DLK_I64: return (span){-0x1p63, 0x1p63, false};
    default: return ANY;
    }
}

/* A truth value: [0, 0] false, [1, 1] true, [0, 1] either. */
static span truth(bool can_false, bool can_true)
{
    return (span){can_false ? 0 : 1, can_true ? 1 : 0, false};
}

/* What q_truth gives for values in s: whether false, and true, can be. */
static void truths(span s, bool *can_false, bool *can_true)
{
    *can_false = s.nan || (s.lo <= 0 && s.hi >= 0);
    *can_true = s.lo != 0 || s.hi != 0;
}

static span cmp(char op, span a, span b)
{
    if (a.nan || b.nan)
        return truth(true, true);
    bool t, f; /* can be true, can be false */
    switch (op) {
    case '<': t = a.lo < b.hi; f = a.hi >= b.lo; break;
    case 'l': t = a.lo <= b.hi; f = a.hi > b.lo; break;
    case '>': t = a.hi > b.lo; f = a.lo <= b.hi; break;
    case 'g': t = a.hi >= b.lo; f = a.lo < b.hi; break;
    case '=': case '!': {
        bool meet = a.lo <= b.hi && b.lo <= a.hi;
        bool one = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
        t = op == '=' ? meet : !one;
        f = op == '=' ? !one : meet;
        break;
    }
    default: return truth(true, true);
    }
    return truth(f, t);
}

static span arith(char op, span a, span b)
{
    if (a.nan || b.nan || isinf(a.lo) || isinf(a.hi) || isinf(b.lo) ||
        isinf(b.hi))
        return ANY;
    switch (op) {
    case '+': return (span){a.lo + b.lo, a.hi + b.hi, false};
    case '-': return (span){a.lo - b.hi, a.hi - b.lo, false};
    case '*': {
        double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
        span s = {p[0], p[0], false};
        for (int i = 1; i < 4; i++) {
            s.lo = p[i] < s.lo ? p[i] : s.lo;
            s.hi = p[i] > s.hi ? p[i] : s.hi;
        }
        return s;
    }
    default: return ANY; /* / and %: a zero divisor gives inf or NaN */
    }
}

static span bound(const q_expr *e, int ni, const Dlk_manifest *m,
                  uint64_t row_lo, uint64_t row_hi)
{
    const q_node *x = &e->nodes[ni];
    const dlk_tensor_spec *s = x->tensor >= 0 ? &m->tensors[x->tensor].spec
                                              : NULL;
    switch (x->kind) {
    case N_NUM:
        return point(x->num);
    case N_ROW:
        return (span){(double)row_lo, (double)row_hi, false};
    case N_RANDOM:
        return (span){0, 1, false};
    case N_SCALAR:
        return dtype_span(s->dtype);
    case N_SHAPE:
        return s->shape[x->dim] >= 0 ? point((double)s->shape[x->dim])
                                     : (span){0, 4294967295.0, false};
    case N_LEN: {
        double n = 1;
        for (int d = 0; d < s->ndim; d++) {
            if (s->shape[d] < 0)
                return (span){0, INFINITY, false};
            n *= (double)s->shape[d];
        }
        return point(n);
    }
    case N_ABS: {
        span a = bound(e, x->a, m, row_lo, row_hi);
        if (a.lo >= 0)
            return a;
        if (a.hi <= 0)
            return (span){-a.hi, -a.lo, a.nan};
        return (span){0, fmax(-a.lo, a.hi), a.nan};
    }
    case N_NEG: {
        span a = bound(e, x->a, m, row_lo, row_hi);
        return (span){-a.hi, -a.lo, a.nan};
    }
    case N_NOT: {
        bool f, t;
        truths(bound(e, x->a, m, row_lo, row_hi), &f, &t);
        return truth(t, f);
    }
    case N_AND: case N_OR: {
        bool af, at, bf, bt;
        truths(bound(e, x->a, m, row_lo, row_hi), &af, &at);
        truths(bound(e, x->b, m, row_lo, row_hi), &bf, &bt);
        return x->kind == N_AND ? truth(af || bf, at && bt)
                                : truth(af && bf, at || bt);
    }
    case N_ARITH: case N_CMP: {
        span a = bound(e, x->a, m, row_lo, row_hi);
        span b = bound(e, x->b, m, row_lo, row_hi);
        return x->kind == N_CMP ? cmp(x->op, a, b) : arith(x->op, a, b);
    }
    case N_IN: {
        /* in the list: some entry within the bounds; out of it: the
         * bounds are more than one entry (or NaN, in no list) */
        span a = bound(e, x->a, m, row_lo, row_hi);
        bool hit = false, miss = true;
        for (size_t k = 0; k < x->nlist; k++) {
            hit |= x->list[k] >= a.lo && x->list[k] <= a.hi;
            if (!a.nan && a.lo == a.hi && x->list[k] == a.lo)
                miss = false;
        }
        return x->negate ? truth(hit, miss) : truth(miss, hit);
    }
    default: /* sums, means, extremes, text: read */
        return ANY;
    }
}

bool q_decided(const q_expr *e, const Dlk_manifest *m, uint64_t row_lo,
               uint64_t row_hi, bool *holds)
{
    bool f, t;
    truths(bound(e, e->root, m, row_lo, row_hi), &f, &t);
    *holds = t;
    return f != t;
}

/* Node ni and those below it, each whose value is one number for every
 * row replaced by that number (its operands no longer read). */
static void fold_node(q_expr *e, int ni, const Dlk_manifest *m,
                      uint64_t row_lo, uint64_t row_hi)
{
    q_node *x = &e->nodes[ni];
    if (x->kind == N_NUM)
        return;
    if (x->a >= 0)
        fold_node(e, x->a, m, row_lo, row_hi);
    if (x->b >= 0)
        fold_node(e, x->b, m, row_lo, row_hi);
    span s = bound(e, ni, m, row_lo, row_hi);
    if (s.nan || s.lo != s.hi)
        return;
    x->kind = N_NUM;
    x->num = s.lo;
    x->a = x->b = -1;
    x->tensor = x->slot = -1;
}

void q_fold(q_expr *e, const Dlk_manifest *m, uint64_t row_lo,
            uint64_t row_hi)
{
    fold_node(e, e->root, m, row_lo, row_hi);
    /* at the root only a value's truth counts: `1 and X` is X, `0 or X`
     * too (so a lone comparison left keeps its typed loop, eval.c) */
    for (;;) {
        const q_node *x = &e->nodes[e->root];
        if (x->kind != N_AND && x->kind != N_OR)
            break;
        const q_node *a = &e->nodes[x->a], *b = &e->nodes[x->b];
        bool keep = x->kind == N_AND; /* the constant that leaves the other */
        if (a->kind == N_NUM && q_truth(a->num) == keep)
            e->root = x->b;
        else if (b->kind == N_NUM && q_truth(b->num) == keep)
            e->root = x->a;
        else
            break;
    }
    /* the tensors still read, their slots renumbered */
    int map[64], used[64] = {0}, n = 0;
    int stack[Q_NODES_MAX], top = 0;
    stack[top++] = e->root;
    while (top) {
        const q_node *x = &e->nodes[stack[--top]];
        if (x->slot >= 0)
            used[x->slot] = 1;
        if (x->a >= 0 && top < Q_NODES_MAX)
            stack[top++] = x->a;
        if (x->b >= 0 && top < Q_NODES_MAX)
            stack[top++] = x->b;
    }
    for (int s = 0; s < e->ntensors; s++) {
        map[s] = used[s] ? n : -1;
        if (used[s])
            e->tensors[n++] = e->tensors[s];
    }
    for (size_t i = 0; i < e->n; i++)
        if (e->nodes[i].slot >= 0)
            e->nodes[i].slot = map[e->nodes[i].slot];
    e->ntensors = n;
}

/* Narrow [*lo, *hi) by `row op c` (or `c op row`: mirrored). */
static void row_cmp(char op, bool row_left, double c, uint64_t *lo,
                    uint64_t *hi)
{
    if (!row_left) /* c < row is row > c, ... */
        op = op == '<' ? '>' : op == '>' ? '<' : op == 'l' ? 'g'
           : op == 'g' ? 'l' : op;
    if (isnan(c)) {     /* compares false with every row */
        if (op != '!')
            *hi = *lo;
        return;
    }
    /* rows are whole numbers below 2^64: bounds as whole numbers, clamped */
    double a = 0, b = 0x1p64; /* row in [a, b) */
    switch (op) {
    case '<': b = ceil(c); break;
    case 'l': b = floor(c) + 1; break;
    case '>': a = floor(c) + 1; break;
    case 'g': a = ceil(c); break;
    case '=':
        if (c != floor(c)) {
            *hi = *lo;
            return;
        }
        a = c;
        b = c + 1;
        break;
    default: return; /* != cuts out one row at most */
    }
    uint64_t ua = a <= 0 ? 0 : a >= 0x1p64 ? UINT64_MAX : (uint64_t)a;
    uint64_t ub = b <= 0 ? 0 : b >= 0x1p64 ? UINT64_MAX : (uint64_t)b;
    if (ua > *lo)
        *lo = ua;
    if (ub < *hi)
        *hi = ub;
    if (*hi < *lo)
        *hi = *lo;
}

static void range_of(const q_expr *e, int ni, uint64_t *lo, uint64_t *hi)
{
    const q_node *x = &e->nodes[ni];
    if (x->kind == N_AND) {
        range_of(e, x->a, lo, hi);
        range_of(e, x->b, lo, hi);
        return;
    }
    if (x->kind != N_CMP)
        return;
    const q_node *a = &e->nodes[x->a], *b = &e->nodes[x->b];
    if (a->kind == N_ROW && b->kind == N_NUM)
        row_cmp(x->op, true, b->num, lo, hi);
    else if (a->kind == N_NUM && b->kind == N_ROW)
        row_cmp(x->op, false, a->num, lo, hi);
}

void q_row_range(const q_expr *e, uint64_t *lo, uint64_t *hi)
{
    range_of(e, e->root, lo, hi);
}
