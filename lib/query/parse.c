/* parse.c - a row expression into a tree checked against the schema.
 *
 *   expr    := and ('or' and)*
 *   and     := not ('and' not)*
 *   not     := 'not' not | cmp
 *   cmp     := sum [CMPOP sum | ['not'] 'in' '(' lit {',' lit} ')'
 *                  | ['not'] 'like' STRING]
 *   sum     := prod {('+' | '-') prod}
 *   prod    := unary {('*' | '/' | '%') unary}
 *   unary   := '-' unary | primary
 *   primary := NUMBER | STRING | 'true' | 'false' | 'row' | NAME
 *            | FUNC '(' args ')' ['[' INTEGER ']'] | '(' expr ')'
 *
 * Every operand's type is known here (a number, a text tensor, a string,
 * a tensor of many values), so a wrong one is reported with its column
 * before any chunk is read. */
#include "query.h"
#include "util/grow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct parser {
    const q_token *t;
    size_t n, pos;
    const Dlk_manifest *m;
    q_expr *e;
    size_t *errcol;
    dlk_error *err;
} parser;

#define FAIL(col, ...) \
    (*p->errcol = (col), Dlk_fail(p->err, DLK_EINVAL, __VA_ARGS__))

static const q_token *peek(parser *p) { return &p->t[p->pos]; }

static bool is_kw(const q_token *t, const char *kw)
{
    return t->kind == TK_NAME && !t->quoted && strcasecmp(t->text, kw) == 0;
}

static bool is_op(const q_token *t, const char *op)
{
    return t->kind == TK_OP && strcmp(t->text, op) == 0;
}

static const char *describe(const q_token *t)
{
    switch (t->kind) {
    case TK_END: return "the end";
    case TK_LP: return "'('";
    case TK_RP: return "')'";
    case TK_LB: return "'['";
    case TK_RB: return "']'";
    case TK_COMMA: return "','";
    case TK_NUM: return "a number";
    case TK_STR: return "a string";
    default: return NULL;
    }
}

/* describe(t), or the operator or name quoted, in buf. */
static const char *token_text(const q_token *t, char buf[80])
{
    const char *d = describe(t);
    if (d)
        return d;
    snprintf(buf, 80, "'%.60s'", t->text);
    return buf;
}

static int new_node(parser *p, q_kind kind, size_t col, int *out)
{
    q_expr *e = p->e;
    if (e->n >= Q_NODES_MAX)
        return FAIL(col, "column %zu: the expression has over %d terms", col,
                    Q_NODES_MAX);
    if (!DLK_GROW(e->nodes, e->n, e->cap, 16))
        return Dlk_oom(p->err);
    q_node *x = &e->nodes[e->n];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->col = col;
    x->a = x->b = -1;
    x->tensor = x->slot = -1;
    *out = (int)e->n++;
    return DLK_OK;
}

#define NODE(i) (&p->e->nodes[i])

static dlk_status expect(parser *p, q_tok kind, const char *what)
{
    const q_token *t = peek(p);
    if (t->kind != kind)
        return FAIL(t->col, "column %zu: expected %s, found %s", t->col, what,
                    token_text(t, (char[80]){0}));
    p->pos++;
    return DLK_OK;
}

/* A number operand, or an error saying what it is instead. */
static dlk_status need_number(parser *p, int i)
{
    const q_node *x = NODE(i);
    const char *why = NULL;
    char buf[160];
    if (x->kind == N_STR)
        why = "a string is not a number here (compare it with a text or "
              "class-label tensor)";
    else if (x->kind == N_TEXTREF || x->kind == N_TENSORREF) {
        const Dlk_tensor *t = &p->m->tensors[x->tensor];
        snprintf(buf, sizeof buf, "tensor '%s' is %s; use it in %s",
                 t->spec.name, x->kind == N_TEXTREF ? "text" :
                 "not one value a row",
                 x->kind == N_TEXTREF ? "==, !=, in, like, contains() or "
                 "len()" : "shape(), len(), mean(), sum(), min() or max()");
        why = buf;
    }
    if (why)
        return FAIL(x->col, "column %zu: %s", x->col, why);
    return DLK_OK;
}

static int slot_of(parser *p, int tensor, size_t col)
{
    q_expr *e = p->e;
    for (int i = 0; i < e->ntensors; i++)
        if (e->tensors[i] == tensor)
            return i;
    if (e->ntensors == (int)(sizeof e->tensors / sizeof *e->tensors)) {
        FAIL(col, "column %zu: more than 64 tensors in one expression", col);
        return -1;
    }
    e->tensors[e->ntensors] = tensor;
    return e->ntensors++;
}

/* NAME as a tensor: its index, or an error listing the tensors. */
static dlk_status tensor_named(parser *p, const q_token *t, int *out)
{
    for (size_t i = 0; i < p->m->ntensors; i++)
        if (strcmp(p->m->tensors[i].spec.name, t->text) == 0) {
            *out = (int)i;
            return DLK_OK;
        }
    char names[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < p->m->ntensors && len + 1 < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                                i ? ", " : "", p->m->tensors[i].spec.name);
    return FAIL(t->col, "column %zu: no tensor '%s' (tensors: %s)", t->col,
                t->text, p->m->ntensors ? names : "none");
}

static bool is_text(const Dlk_tensor *t)
{
    return t->spec.kind == DLK_KIND_TEXT && t->spec.dtype == DLK_U8;
}

static bool is_scalar(const Dlk_tensor *t)
{
    for (int d = 0; d < t->spec.ndim; d++)
        if (t->spec.shape[d] != 1)
            return false;
    return true;
}

/* A tensor operand: a number (one value a row), text, or many values. */
static dlk_status tensor_ref(parser *p, const q_token *t, int *out)
{
    int ti;
    dlk_status rc = tensor_named(p, t, &ti);
    if (rc)
        return rc;
    const Dlk_tensor *x = &p->m->tensors[ti];
    q_kind k = is_text(x) ? N_TEXTREF : is_scalar(x) ? N_SCALAR : N_TENSORREF;
    if ((rc = new_node(p, k, t->col, out)))
        return rc;
    NODE(*out)->tensor = ti;
    if (k != N_TENSORREF && (NODE(*out)->slot = slot_of(p, ti, t->col)) < 0)
        return DLK_EINVAL;
    return DLK_OK;
}

static dlk_status parse_or(parser *p, int *out);

/* FUNC(TENSOR ...): the tensor argument. */
static dlk_status tensor_arg(parser *p, const char *fn, int *ti)
{
    const q_token *t = peek(p);
    if (t->kind != TK_NAME)
        return FAIL(t->col, "column %zu: %s() takes a tensor name, found %s",
                    t->col, fn, token_text(t, (char[80]){0}));
    dlk_status rc = tensor_named(p, t, ti);
    if (!rc)
        p->pos++;
    return rc;
}

static const char *const functions =
    "shape, len, mean, sum, min, max, abs, contains, random";

/* contains()'s second argument, after the text tensor t (at acol): a
 * string, into x. */
static dlk_status contains_arg(parser *p, q_node *x, const Dlk_tensor *t,
                               size_t acol)
{
    dlk_status rc;
    if (!is_text(t))
        return FAIL(acol, "column %zu: contains() takes a text tensor; "
                    "'%s' is not text", acol, t->spec.name);
    if ((rc = expect(p, TK_COMMA, "','")))
        return rc;
    const q_token *s = peek(p);
    if (s->kind != TK_STR)
        return FAIL(s->col, "column %zu: contains() takes a string "
                    "second, found %s", s->col, token_text(s, (char[80]){0}));
    x->strs = calloc(1, sizeof *x->strs);
    x->lens = calloc(1, sizeof *x->lens);
    if (!x->strs || !x->lens || !(x->strs[0] = strdup(s->text)))
        return Dlk_oom(p->err);
    x->lens[0] = s->len;
    x->nlist = 1;
    p->pos++;
    return DLK_OK;
}

/* shape(T)'s dimension, "[D]" after it, into x: one of t's. */
static dlk_status shape_dim(parser *p, q_node *x, const Dlk_tensor *t)
{
    const q_token *lb = peek(p);
    if (lb->kind != TK_LB)
        return FAIL(lb->col, "column %zu: shape(%s) needs a "
                    "dimension: shape(%s)[0]", lb->col, t->spec.name,
                    t->spec.name);
    p->pos++;
    const q_token *d = peek(p);
    if (d->kind != TK_NUM || !d->integer || d->num < 0 ||
        d->num >= t->spec.ndim)
        return FAIL(d->col, "column %zu: '%s' has %d dimensions; "
                    "the index must be 0 to %d", d->col, t->spec.name,
                    t->spec.ndim, t->spec.ndim - 1);
    x->dim = (int)d->num;
    p->pos++;
    return expect(p, TK_RB, "']'");
}

/* A function of a tensor (fn, a node of kind), its '(' read: the
 * tensor, contains()'s string, the ')' and shape()'s dimension. */
static dlk_status tensor_call(parser *p, const char *fn, q_kind kind,
                              size_t col, int *out)
{
    dlk_status rc;
    int ti;
    size_t acol = peek(p)->col;
    if ((rc = tensor_arg(p, fn, &ti)) ||
        (rc = new_node(p, kind, col, out)))
        return rc;
    q_node *x = NODE(*out);
    x->tensor = ti;
    if ((x->slot = slot_of(p, ti, acol)) < 0)
        return DLK_EINVAL;
    const Dlk_tensor *t = &p->m->tensors[ti];
    if (x->kind == N_CONTAINS && (rc = contains_arg(p, x, t, acol)))
        return rc;
    if ((rc = expect(p, TK_RP, "')'")))
        return rc;
    if (x->kind == N_SHAPE)
        return shape_dim(p, x, t);
    return DLK_OK;
}

/* random(SEED), its '(' read. */
static dlk_status random_call(parser *p, size_t col, int *out)
{
    dlk_status rc;
    const q_token *s = peek(p);
    if (s->kind != TK_NUM || !s->integer || s->num < 0 ||
        s->num > 9007199254740992.0)
        return FAIL(s->col, "column %zu: random() takes a seed, an "
                    "integer from 0", s->col);
    p->pos++;
    if ((rc = new_node(p, N_RANDOM, col, out)))
        return rc;
    NODE(*out)->seed = (uint64_t)s->num;
    return expect(p, TK_RP, "')'");
}

static dlk_status parse_call(parser *p, const q_token *name, int *out)
{
    const char *fn = name->text;
    size_t col = name->col;
    dlk_status rc = expect(p, TK_LP, "'('");
    if (rc)
        return rc;
    static const struct { const char *name; q_kind kind; } tensor_fns[] = {
        {"shape", N_SHAPE}, {"len", N_LEN}, {"mean", N_MEAN},
        {"sum", N_SUM}, {"min", N_MIN}, {"max", N_MAX}, {"contains", N_CONTAINS},
    };
    for (size_t i = 0; i < sizeof tensor_fns / sizeof *tensor_fns; i++)
        if (strcasecmp(fn, tensor_fns[i].name) == 0)
            return tensor_call(p, tensor_fns[i].name, tensor_fns[i].kind, col,
                               out);
    if (strcasecmp(fn, "random") == 0)
        return random_call(p, col, out);
    if (strcasecmp(fn, "abs") == 0) {
        int a;
        if ((rc = parse_or(p, &a)) || (rc = need_number(p, a)) ||
            (rc = new_node(p, N_ABS, col, out)))
            return rc;
        NODE(*out)->a = a;
        return expect(p, TK_RP, "')'");
    }
    return FAIL(col, "column %zu: unknown function '%s' (functions: %s)", col,
                fn, functions);
}

static dlk_status parse_primary(parser *p, int *out)
{
    const q_token *t = peek(p);
    dlk_status rc;
    switch (t->kind) {
    case TK_NUM:
        p->pos++;
        if ((rc = new_node(p, N_NUM, t->col, out)))
            return rc;
        NODE(*out)->num = t->num;
        return DLK_OK;
    case TK_STR:
        p->pos++;
        if ((rc = new_node(p, N_STR, t->col, out)))
            return rc;
        NODE(*out)->nlist = 0;
        NODE(*out)->num = (double)(p->pos - 1); /* its token */
        return DLK_OK;
    case TK_LP:
        p->pos++;
        if ((rc = parse_or(p, out)))
            return rc;
        return expect(p, TK_RP, "')'");
    case TK_NAME:
        if (!t->quoted) {
            if (is_kw(t, "true") || is_kw(t, "false")) {
                p->pos++;
                if ((rc = new_node(p, N_NUM, t->col, out)))
                    return rc;
                NODE(*out)->num = is_kw(t, "true");
                return DLK_OK;
            }
            if (is_kw(t, "row")) {
                p->pos++;
                return new_node(p, N_ROW, t->col, out);
            }
            if (is_kw(t, "and") || is_kw(t, "or") || is_kw(t, "in") ||
                is_kw(t, "like") || is_kw(t, "not"))
                return FAIL(t->col, "column %zu: expected a value, found "
                            "'%s'", t->col, t->text);
            if (p->t[p->pos + 1].kind == TK_LP) {
                p->pos++;
                return parse_call(p, t, out);
            }
        }
        p->pos++;
        return tensor_ref(p, t, out);
    case TK_END:
        return FAIL(t->col, "column %zu: the expression ends where a value "
                    "should follow", t->col);
    default:
        return FAIL(t->col, "column %zu: expected a value, found %s", t->col,
                    token_text(t, (char[80]){0}));
    }
}

static dlk_status parse_unary(parser *p, int *out)
{
    const q_token *t = peek(p);
    if (is_op(t, "-")) {
        p->pos++;
        int a;
        dlk_status rc = parse_unary(p, &a);
        if (rc || (rc = need_number(p, a)) ||
            (rc = new_node(p, N_NEG, t->col, out)))
            return rc;
        NODE(*out)->a = a;
        return DLK_OK;
    }
    return parse_primary(p, out);
}

static dlk_status binary(parser *p, q_kind kind, char op, size_t col, int a,
                         int b, int *out)
{
    dlk_status rc;
    if ((rc = need_number(p, a)) || (rc = need_number(p, b)) ||
        (rc = new_node(p, kind, col, out)))
        return rc;
    NODE(*out)->op = op;
    NODE(*out)->a = a;
    NODE(*out)->b = b;
    return DLK_OK;
}

static dlk_status parse_prod(parser *p, int *out)
{
    dlk_status rc = parse_unary(p, out);
    while (!rc && (is_op(peek(p), "*") || is_op(peek(p), "/") ||
                   is_op(peek(p), "%"))) {
        const q_token *t = &p->t[p->pos++];
        int b;
        if (!(rc = parse_unary(p, &b)))
            rc = binary(p, N_ARITH, t->text[0], t->col, *out, b, out);
    }
    return rc;
}

static dlk_status parse_sum(parser *p, int *out)
{
    dlk_status rc = parse_prod(p, out);
    while (!rc && (is_op(peek(p), "+") || is_op(peek(p), "-"))) {
        const q_token *t = &p->t[p->pos++];
        int b;
        if (!(rc = parse_prod(p, &b)))
            rc = binary(p, N_ARITH, t->text[0], t->col, *out, b, out);
    }
    return rc;
}

/* A string compared with a class-label tensor: the class's id. */
static dlk_status class_id(parser *p, int tensor_node, const q_token *s,
                           double *id)
{
    const q_node *x = NODE(tensor_node);
    const Dlk_tensor *t = x->kind == N_SCALAR ? &p->m->tensors[x->tensor]
                                              : NULL;
    if (!t || t->spec.kind != DLK_KIND_CLASS_LABEL || !t->n_class_names)
        return FAIL(s->col, "column %zu: '%s' is a string; only a text or "
                    "class-label tensor (with class names) compares with "
                    "one", s->col, s->text);
    for (size_t i = 0; i < t->n_class_names; i++)
        if (strcmp(t->class_names[i], s->text) == 0) {
            *id = (double)i;
            return DLK_OK;
        }
    char names[200] = "";
    size_t len = 0;
    for (size_t i = 0; i < t->n_class_names && len + 1 < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                                i ? ", " : "", t->class_names[i]);
    return FAIL(s->col, "column %zu: '%s' is not a class of '%s' (classes: "
                "%s%s)", s->col, s->text, t->spec.name, names,
                len + 1 >= sizeof names ? "..." : "");
}

static dlk_status set_strings(parser *p, q_node *x, const q_token *const *s,
                              size_t n)
{
    x->strs = calloc(n ? n : 1, sizeof *x->strs);
    x->lens = calloc(n ? n : 1, sizeof *x->lens);
    if (!x->strs || !x->lens)
        return Dlk_oom(p->err);
    x->nlist = n;
    for (size_t i = 0; i < n; i++) {
        if (!(x->strs[i] = malloc(s[i]->len + 1)))
            return Dlk_oom(p->err);
        memcpy(x->strs[i], s[i]->text, s[i]->len + 1);
        x->lens[i] = s[i]->len;
    }
    return DLK_OK;
}

/* The literals of 'in (...)', after 'in': *lits (the caller's to free)
 * of *n tokens, a negative number's by its '-'. */
static dlk_status in_list(parser *p, const q_token ***lits, size_t *n)
{
    dlk_status rc = expect(p, TK_LP, "'(' after 'in'");
    if (rc)
        return rc;
    size_t cap = 0;
    for (;;) {
        const q_token *t = peek(p);
        bool neg = is_op(t, "-");
        if (neg)
            t = &p->t[p->pos + 1];
        if (t->kind != TK_NUM && (neg || t->kind != TK_STR))
            return FAIL(t->col, "column %zu: 'in' takes a list of numbers or "
                        "strings, found %s", t->col, token_text(t, (char[80]){0}));
        if (!DLK_GROW(*lits, *n, cap, 8))
            return Dlk_oom(p->err);
        (*lits)[(*n)++] = neg ? &p->t[p->pos] : t; /* '-' marks a negative */
        p->pos += neg ? 2 : 1;
        if (peek(p)->kind == TK_COMMA) {
            p->pos++;
            continue;
        }
        break;
    }
    return expect(p, TK_RP, "')' or ','");
}

/* 'in' of a number tensor a: the list's numbers, a string naming a
 * class. */
static dlk_status in_numbers(parser *p, int a, const q_token **lits,
                             size_t n, size_t col, int *out)
{
    dlk_status rc;
    if ((rc = need_number(p, a)) || (rc = new_node(p, N_IN, col, out)))
        return rc;
    q_node *x = NODE(*out);
    x->list = calloc(n, sizeof *x->list);
    if (!x->list)
        return Dlk_oom(p->err);
    x->nlist = n;
    for (size_t i = 0; i < n; i++) {
        const q_token *t = lits[i];
        if (t->kind == TK_OP) /* a negative number */
            x->list[i] = -(t + 1)->num;
        else if (t->kind == TK_NUM)
            x->list[i] = t->num;
        else if ((rc = class_id(p, a, t, &NODE(*out)->list[i])))
            return rc;
        x = NODE(*out);
    }
    return DLK_OK;
}

/* 'in' of a text tensor a: the list's strings. */
static dlk_status in_strings(parser *p, int a, const q_token **lits,
                             size_t n, size_t col, int *out)
{
    for (size_t i = 0; i < n; i++)
        if (lits[i]->kind != TK_STR) {
            size_t c = lits[i]->col;
            return FAIL(c, "column %zu: '%s' is text; compare it with "
                        "strings", c,
                        p->m->tensors[NODE(a)->tensor].spec.name);
        }
    dlk_status rc = new_node(p, N_TEXT_IN, col, out);
    if (!rc)
        rc = set_strings(p, NODE(*out), lits, n);
    return rc;
}

static dlk_status parse_in(parser *p, int a, bool negate, size_t col,
                           int *out)
{
    const q_token **lits = NULL;
    size_t n = 0;
    dlk_status rc = in_list(p, &lits, &n);
    if (!rc)
        rc = NODE(a)->kind == N_TEXTREF
                 ? in_strings(p, a, lits, n, col, out)
                 : in_numbers(p, a, lits, n, col, out);
    free(lits);
    if (rc)
        return rc;
    NODE(*out)->a = a;
    NODE(*out)->negate = negate;
    NODE(*out)->tensor = NODE(a)->tensor;
    NODE(*out)->slot = NODE(a)->slot;
    return DLK_OK;
}

static char cmp_code(const q_token *t)
{
    if (t->kind != TK_OP)
        return 0;
    if (!strcmp(t->text, "==") || !strcmp(t->text, "=")) return '=';
    if (!strcmp(t->text, "!=") || !strcmp(t->text, "<>")) return '!';
    if (!strcmp(t->text, "<")) return '<';
    if (!strcmp(t->text, "<=")) return 'l';
    if (!strcmp(t->text, ">")) return '>';
    if (!strcmp(t->text, ">=")) return 'g';
    return 0;
}

/* a like 'pattern', after 'like' (at t). */
static dlk_status parse_like(parser *p, int a, bool negate,
                             const q_token *t, int *out)
{
    if (NODE(a)->kind != N_TEXTREF)
        return FAIL(NODE(a)->col, "column %zu: 'like' takes a text tensor "
                    "on its left", NODE(a)->col);
    const q_token *s = peek(p);
    if (s->kind != TK_STR)
        return FAIL(s->col, "column %zu: 'like' takes a string pattern, "
                    "found %s", s->col, token_text(s, (char[80]){0}));
    p->pos++;
    dlk_status rc;
    if ((rc = new_node(p, N_LIKE, t->col, out)) ||
        (rc = set_strings(p, NODE(*out), &s, 1)))
        return rc;
    NODE(*out)->negate = negate;
    NODE(*out)->tensor = NODE(a)->tensor;
    NODE(*out)->slot = NODE(a)->slot;
    NODE(*out)->a = a;
    return DLK_OK;
}

/* a op b where a or b is a text tensor: == or != of a string. */
static dlk_status text_compare(parser *p, int a, int b, char op,
                               const q_token *t, int *out)
{
    q_kind ka = NODE(a)->kind;
    int ref = ka == N_TEXTREF ? a : b, lit = ka == N_TEXTREF ? b : a;
    if (NODE(lit)->kind != N_STR)
        return FAIL(NODE(lit)->col, "column %zu: '%s' is text; "
                    "compare it with a string", NODE(lit)->col,
                    p->m->tensors[NODE(ref)->tensor].spec.name);
    if (op != '=' && op != '!')
        return FAIL(t->col, "column %zu: text compares with == or "
                    "!= (or like, contains())", t->col);
    const q_token *s = &p->t[(size_t)NODE(lit)->num];
    dlk_status rc;
    if ((rc = new_node(p, N_TEXT_EQ, t->col, out)) ||
        (rc = set_strings(p, NODE(*out), &s, 1)))
        return rc;
    NODE(*out)->negate = op == '!';
    NODE(*out)->tensor = NODE(ref)->tensor;
    NODE(*out)->slot = NODE(ref)->slot;
    return DLK_OK;
}

/* a op b, after the operator (at t). */
static dlk_status parse_compare(parser *p, int a, char op, const q_token *t,
                                int *out)
{
    int b;
    dlk_status rc;
    if ((rc = parse_sum(p, &b)))
        return rc;
    if (NODE(a)->kind == N_TEXTREF || NODE(b)->kind == N_TEXTREF)
        return text_compare(p, a, b, op, t, out);
    /* a string on either side names a class of the other */
    for (int side = 0; side < 2; side++) {
        int lit = side ? b : a, other = side ? a : b;
        if (NODE(lit)->kind == N_STR) {
            const q_token *s = &p->t[(size_t)NODE(lit)->num];
            double id;
            if ((rc = class_id(p, other, s, &id)))
                return rc;
            NODE(lit)->kind = N_NUM;
            NODE(lit)->num = id;
        }
    }
    return binary(p, N_CMP, op, t->col, a, b, out);
}

static dlk_status parse_cmp(parser *p, int *out)
{
    int a;
    dlk_status rc = parse_sum(p, &a);
    if (rc)
        return rc;
    const q_token *t = peek(p);
    bool negate = false;
    if (is_kw(t, "not") && (is_kw(&p->t[p->pos + 1], "in") ||
                            is_kw(&p->t[p->pos + 1], "like"))) {
        negate = true;
        p->pos++;
        t = peek(p);
    }
    if (is_kw(t, "in")) {
        p->pos++;
        rc = parse_in(p, a, negate, t->col, out);
    } else if (is_kw(t, "like")) {
        p->pos++;
        if ((rc = parse_like(p, a, negate, t, out)))
            return rc;
    } else if (cmp_code(t)) {
        char op = cmp_code(t);
        p->pos++;
        if ((rc = parse_compare(p, a, op, t, out)))
            return rc;
    } else {
        *out = a;
        return DLK_OK;
    }
    if (!rc && (cmp_code(peek(p)) || is_kw(peek(p), "in") ||
                is_kw(peek(p), "like")))
        return FAIL(peek(p)->col, "column %zu: comparisons do not chain; "
                    "join them with 'and'", peek(p)->col);
    return rc;
}

static dlk_status parse_not(parser *p, int *out)
{
    const q_token *t = peek(p);
    if (is_kw(t, "not")) {
        p->pos++;
        int a;
        dlk_status rc = parse_not(p, &a);
        if (rc || (rc = need_number(p, a)) ||
            (rc = new_node(p, N_NOT, t->col, out)))
            return rc;
        NODE(*out)->a = a;
        return DLK_OK;
    }
    return parse_cmp(p, out);
}

static dlk_status parse_and(parser *p, int *out)
{
    dlk_status rc = parse_not(p, out);
    while (!rc && is_kw(peek(p), "and")) {
        const q_token *t = &p->t[p->pos++];
        int b;
        if (!(rc = parse_not(p, &b)))
            rc = binary(p, N_AND, 0, t->col, *out, b, out);
    }
    return rc;
}

static dlk_status parse_or(parser *p, int *out)
{
    dlk_status rc = parse_and(p, out);
    while (!rc && is_kw(peek(p), "or")) {
        const q_token *t = &p->t[p->pos++];
        int b;
        if (!(rc = parse_and(p, &b)))
            rc = binary(p, N_OR, 0, t->col, *out, b, out);
    }
    return rc;
}

dlk_status q_parse(const char *src, const Dlk_manifest *m, q_expr *out,
                   size_t *errcol, dlk_error *err)
{
    memset(out, 0, sizeof *out);
    *errcol = 0;
    q_token *toks;
    size_t n;
    dlk_status rc = q_lex(src, &toks, &n, errcol, err);
    if (rc)
        return rc;
    parser p = {toks, n, 0, m, out, errcol, err};
    int root;
    rc = parse_or(&p, &root);
    if (!rc && peek(&p)->kind != TK_END) {
        const q_token *t = peek(&p);
        *errcol = t->col;
        rc = Dlk_fail(err, DLK_EINVAL, "column %zu: unexpected %s after a "
                      "complete expression", t->col, token_text(t, (char[80]){0}));
    }
    if (!rc)
        rc = need_number(&p, root);
    q_tokens_free(toks, n);
    if (rc) {
        q_expr_free(out);
        return rc;
    }
    out->root = root;
    return DLK_OK;
}

void q_expr_free(q_expr *e)
{
    for (size_t i = 0; i < e->n; i++) {
        q_node *x = &e->nodes[i];
        free(x->list);
        for (size_t k = 0; x->strs && k < x->nlist; k++)
            free(x->strs[k]);
        free(x->strs);
        free(x->lens);
    }
    free(e->nodes);
    memset(e, 0, sizeof *e);
}
