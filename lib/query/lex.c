/* lex.c - the tokens of a row expression. */
#include "query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9') || c == '.';
}

void q_tokens_free(q_token *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        free(t[i].text);
    free(t);
}

static dlk_status push(q_token **v, size_t *n, size_t *cap, q_token t,
                       dlk_error *err)
{
    if (!DLK_GROW(*v, *n, *cap, 32)) {
        free(t.text);
        return Dlk_oom(err);
    }
    (*v)[(*n)++] = t;
    return DLK_OK;
}

static char *dup_n(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

/* The lexer's place in the expression, and where its errors go. */
typedef struct lexer {
    const char *src;
    size_t len; /* strlen(src) */
    size_t i;   /* the next byte to read */
    size_t *errcol;
    dlk_error *err;
} lexer;

#define FAIL(lx, col, ...)                                                     \
    (*(lx)->errcol = (col), Dlk_fail((lx)->err, DLK_EINVAL, __VA_ARGS__))

static bool starts_number(const char *p)
{
    return (p[0] >= '0' && p[0] <= '9') ||
           (p[0] == '.' && p[1] >= '0' && p[1] <= '9');
}

static dlk_status lex_number(lexer *lx, q_token *t)
{
    const char *p = lx->src + lx->i;
    char *end;
    dlk_status rc = DLK_OK;
    t->kind = TK_NUM;
    t->num = strtod(p, &end);
    size_t used = (size_t)(end - p);
    t->integer = strcspn(p, ".eExX") >= used;
    if (name_char(*end))
        rc = FAIL(lx, t->col, "column %zu: malformed number '%.*s'", t->col,
                  (int)(used + 1), p);
    else if (!isfinite(t->num))
        rc = FAIL(lx, t->col, "column %zu: number out of range", t->col);
    lx->i += used;
    return rc;
}

/* A string in ' or "; quotes doubled or backslashed stand for
 * themselves. */
static dlk_status lex_string(lexer *lx, q_token *t)
{
    const char *src = lx->src;
    char c = src[lx->i];
    char *s = malloc(lx->len - lx->i + 1);
    size_t k = 0, j = lx->i + 1;
    if (!s)
        return Dlk_oom(lx->err);
    for (;;) {
        if (!src[j]) {
            free(s);
            return FAIL(lx, t->col, "column %zu: the string is not closed",
                        t->col);
        }
        if (src[j] == '\\' && src[j + 1]) {
            s[k++] = src[j + 1];
            j += 2;
        } else if (src[j] == c && src[j + 1] == c) {
            s[k++] = c;
            j += 2;
        } else if (src[j] == c) {
            j++;
            break;
        } else {
            s[k++] = src[j++];
        }
    }
    s[k] = 0;
    t->kind = TK_STR;
    t->text = s;
    t->len = k;
    lx->i = j;
    return DLK_OK;
}

/* A name in backquotes, which may hold any byte but '`'. */
static dlk_status lex_quoted_name(lexer *lx, q_token *t)
{
    const char *src = lx->src;
    size_t i = lx->i, j = i + 1;
    while (src[j] && src[j] != '`')
        j++;
    if (!src[j])
        return FAIL(lx, t->col, "column %zu: the name is not closed with '`'",
                    t->col);
    t->kind = TK_NAME;
    t->quoted = true;
    t->len = j - i - 1;
    if (!(t->text = dup_n(src + i + 1, t->len)))
        return Dlk_oom(lx->err);
    lx->i = j + 1;
    return DLK_OK;
}

static dlk_status lex_name(lexer *lx, q_token *t)
{
    const char *src = lx->src;
    size_t i = lx->i, j = i;
    while (name_char(src[j]))
        j++;
    t->kind = TK_NAME;
    t->len = j - i;
    if (!(t->text = dup_n(src + i, t->len)))
        return Dlk_oom(lx->err);
    lx->i = j;
    return DLK_OK;
}

/* An operator, a bracket or a comma; any other byte is an error. */
static dlk_status lex_symbol(lexer *lx, q_token *t)
{
    static const char *const ops[] = {
        "==", "!=", "<>", "<=", ">=", "=", "<", ">", "+", "-", "*",
        "/", "%"};
    const char *p = lx->src + lx->i;
    char c = *p;
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (strncmp(p, ops[k], strlen(ops[k])) == 0) {
            t->kind = TK_OP;
            t->len = strlen(ops[k]);
            if (!(t->text = dup_n(ops[k], t->len)))
                return Dlk_oom(lx->err);
            lx->i += t->len;
            return DLK_OK;
        }
    if (c == '(' || c == ')' || c == '[' || c == ']' || c == ',') {
        t->kind = c == '(' ? TK_LP : c == ')' ? TK_RP
                : c == '[' ? TK_LB : c == ']' ? TK_RB : TK_COMMA;
        lx->i++;
        return DLK_OK;
    }
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        return FAIL(lx, t->col, "column %zu: unexpected byte 0x%02x", t->col,
                    (unsigned char)c);
    return FAIL(lx, t->col, "column %zu: unexpected '%c'", t->col, c);
}

/* The token at lx->i, by its first byte. */
static dlk_status lex_token(lexer *lx, q_token *t)
{
    const char *p = lx->src + lx->i;
    if (starts_number(p))
        return lex_number(lx, t);
    if (*p == '\'' || *p == '"')
        return lex_string(lx, t);
    if (*p == '`')
        return lex_quoted_name(lx, t);
    if (name_start(*p))
        return lex_name(lx, t);
    return lex_symbol(lx, t);
}

dlk_status q_lex(const char *src, q_token **toks, size_t *n, size_t *errcol,
                 dlk_error *err)
{
    *toks = NULL;
    *n = 0;
    size_t cap = 0;
    lexer lx = {src, strlen(src), 0, errcol, err};
    if (lx.len > Q_EXPR_MAX)
        return FAIL(&lx, 1, "the expression has %zu bytes, at most %d",
                    lx.len, Q_EXPR_MAX);
    dlk_status rc;
    for (;;) {
        while (src[lx.i] == ' ' || src[lx.i] == '\t' || src[lx.i] == '\n' ||
               src[lx.i] == '\r')
            lx.i++;
        q_token t = {0};
        t.col = lx.i + 1;
        if (!src[lx.i]) {
            t.kind = TK_END;
            rc = push(toks, n, &cap, t, err);
            break;
        }
        if ((rc = lex_token(&lx, &t))) {
            free(t.text);
            break;
        }
        if ((rc = push(toks, n, &cap, t, err)))
            break;
    }
    if (rc) {
        q_tokens_free(*toks, *n);
        *toks = NULL;
        *n = 0;
    }
    return rc;
}
