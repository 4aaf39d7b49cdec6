/* lex.c - the tokens of a row expression. */
#include "query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(col, ...) (*errcol = (col), dlk_fail(err, DLK_EINVAL, __VA_ARGS__))

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
        return dlk_oom(err);
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

dlk_status q_lex(const char *src, q_token **toks, size_t *n, size_t *errcol,
                 dlk_error *err)
{
    *toks = NULL;
    *n = 0;
    size_t cap = 0, len = strlen(src);
    if (len > Q_EXPR_MAX)
        return FAIL(1, "the expression has %zu bytes, at most %d", len,
                    Q_EXPR_MAX);
    dlk_status rc = DLK_OK;
    size_t i = 0;
    while (!rc) {
        while (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' ||
               src[i] == '\r')
            i++;
        q_token t = {0};
        t.col = i + 1;
        char c = src[i];
        if (!c) {
            t.kind = TK_END;
            rc = push(toks, n, &cap, t, err);
            break;
        }
        if ((c >= '0' && c <= '9') ||
            (c == '.' && src[i + 1] >= '0' && src[i + 1] <= '9')) {
            char *end;
            t.kind = TK_NUM;
            t.num = strtod(src + i, &end);
            size_t used = (size_t)(end - (src + i));
            t.integer = strcspn(src + i, ".eExX") >= used;
            if (name_char(*end))
                rc = FAIL(t.col, "column %zu: malformed number '%.*s'", t.col,
                          (int)(used + 1), src + i);
            else if (!isfinite(t.num))
                rc = FAIL(t.col, "column %zu: number out of range", t.col);
            i += used;
        } else if (c == '\'' || c == '"') {
            /* quotes doubled or backslashed stand for themselves */
            char *s = malloc(len - i + 1);
            size_t k = 0, j = i + 1;
            if (!s) {
                rc = dlk_oom(err); /* the tokens so far: freed below */
                break;
            }
            for (;;) {
                if (!src[j]) {
                    free(s);
                    s = NULL;
                    rc = FAIL(t.col, "column %zu: the string is not closed",
                              t.col);
                    break;
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
            if (!s)
                break;
            s[k] = 0;
            t.kind = TK_STR;
            t.text = s;
            t.len = k;
            i = j;
        } else if (c == '`') {
            size_t j = i + 1;
            while (src[j] && src[j] != '`')
                j++;
            if (!src[j]) {
                rc = FAIL(t.col, "column %zu: the name is not closed with '`'",
                          t.col);
                break;
            }
            t.kind = TK_NAME;
            t.quoted = true;
            t.len = j - i - 1;
            if (!(t.text = dup_n(src + i + 1, t.len))) {
                rc = dlk_oom(err); /* the tokens so far: freed below */
                break;
            }
            i = j + 1;
        } else if (name_start(c)) {
            size_t j = i;
            while (name_char(src[j]))
                j++;
            t.kind = TK_NAME;
            t.len = j - i;
            if (!(t.text = dup_n(src + i, t.len))) {
                rc = dlk_oom(err); /* the tokens so far: freed below */
                break;
            }
            i = j;
        } else {
            static const char *const ops[] = {
                "==", "!=", "<>", "<=", ">=", "=", "<", ">", "+", "-", "*",
                "/", "%"};
            t.kind = TK_OP;
            size_t k;
            for (k = 0; k < sizeof ops / sizeof *ops; k++)
                if (strncmp(src + i, ops[k], strlen(ops[k])) == 0)
                    break;
            if (k < sizeof ops / sizeof *ops) {
                t.len = strlen(ops[k]);
                if (!(t.text = dup_n(ops[k], t.len))) {
                    rc = dlk_oom(err); /* the tokens so far: freed below */
                    break;
                }
                i += t.len;
            } else if (c == '(' || c == ')' || c == '[' || c == ']' ||
                       c == ',') {
                t.kind = c == '(' ? TK_LP : c == ')' ? TK_RP
                       : c == '[' ? TK_LB : c == ']' ? TK_RB : TK_COMMA;
                i++;
            } else if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f) {
                rc = FAIL(t.col, "column %zu: unexpected byte 0x%02x", t.col,
                          (unsigned char)c);
                break;
            } else {
                rc = FAIL(t.col, "column %zu: unexpected '%c'", t.col, c);
                break;
            }
        }
        if (!rc)
            rc = push(toks, n, &cap, t, err);
        else
            free(t.text);
    }
    if (rc) {
        q_tokens_free(*toks, *n);
        *toks = NULL;
        *n = 0;
    }
    return rc;
}
