/* link_proxy.c - a TCP link as object storage is reached over a real
 * network, between a client and a server on loopback: every byte is held
 * DELAY_MS in each direction (so a request's round trip is twice that,
 * and a new connection pays one more round trip for the handshake that
 * loopback skips), and every connection is capped at RATE bytes a second
 * in each direction (S3 serves about 100 MB/s a connection).  Loopback
 * alone answers in microseconds at gigabytes a second on one connection,
 * which flatters any reader that keeps few requests in flight.
 *
 *   link_proxy LISTEN_PORT TARGET_PORT DELAY_MS RATE_MB_PER_S
 *
 * Listens on 127.0.0.1:LISTEN_PORT, forwards to 127.0.0.1:TARGET_PORT.
 * Each direction of a connection is a reader thread, which stamps what
 * it reads with its arrival time, and a writer thread, which sends it on
 * no earlier than arrival + delay and no faster than the rate.  The
 * queue between them holds twice the bandwidth-delay product (at least
 * 1 MiB): a full queue stops the reader, and TCP's flow control then
 * slows the sender as a bottleneck link's queue would.  It runs until
 * killed; it prints "listening PORT" once ready. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { SLICE = 64 << 10 };

static double delay_s, rate; /* seconds; bytes a second (0: no cap) */

typedef struct piece {
    double t;     /* when its bytes arrived */
    size_t n;
} piece;

/* One direction: bytes from `from` to `to` through a ring of cap bytes
 * and a ring of pieces (their arrival times). */
typedef struct pipe_dir {
    int from, to;
    double extra;           /* more delay for the first piece (the
                               handshake's round trip), client side */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf;
    size_t cap, head, used; /* bytes */
    piece *pc;
    size_t npc, phead, pused;
    int eof;
    struct conn *c;
} pipe_dir;

typedef struct conn {
    pipe_dir d[2];
    pthread_mutex_t mu;
    int refs;
} conn;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    double d = t - now();
    if (d <= 0)
        return;
    struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

static void conn_put(conn *c)
{
    pthread_mutex_lock(&c->mu);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (!last)
        return;
    for (int i = 0; i < 2; i++) {
        free(c->d[i].buf);
        free(c->d[i].pc);
    }
    close(c->d[0].from);
    close(c->d[1].from);
    free(c);
}

static void *reader(void *arg)
{
    pipe_dir *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while ((p->used == p->cap || p->pused == p->npc) && !p->eof)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->eof) { /* the writer failed */
            pthread_mutex_unlock(&p->mu);
            break;
        }
        size_t tail = (p->head + p->used) % p->cap;
        size_t room = p->cap - p->used;
        if (room > p->cap - tail)
            room = p->cap - tail;
        if (room > SLICE)
            room = SLICE;
        pthread_mutex_unlock(&p->mu);
        ssize_t n = read(p->from, p->buf + tail, room);
        if (n < 0 && errno == EINTR)
            continue;
        pthread_mutex_lock(&p->mu);
        if (n <= 0) {
            p->eof = 1;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
            break;
        }
        piece *q = &p->pc[(p->phead + p->pused) % p->npc];
        q->t = now();
        q->n = (size_t)n;
        p->pused++;
        p->used += (size_t)n;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    conn_put(p->c);
    return NULL;
}

static void *writer(void *arg)
{
    pipe_dir *p = arg;
    double next_free = 0; /* when the capped link is idle again */
    int first = 1, failed = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->pused && !p->eof)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->pused) { /* end of stream, all sent */
            pthread_mutex_unlock(&p->mu);
            break;
        }
        piece q = p->pc[p->phead];
        size_t at = p->head;
        pthread_mutex_unlock(&p->mu);
        sleep_until(q.t + delay_s + (first ? p->extra : 0));
        first = 0;
        /* send at the rate, a slice at a time */
        size_t off = 0;
        while (off < q.n && !failed) {
            size_t m = q.n - off < SLICE ? q.n - off : SLICE;
            if (rate > 0) {
                double t = now();
                if (next_free < t)
                    next_free = t;
                sleep_until(next_free);
                next_free += (double)m / rate;
            }
            ssize_t w = write(p->to, p->buf + (at + off) % p->cap, m);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                failed = 1;
            else
                off += (size_t)w;
        }
        pthread_mutex_lock(&p->mu);
        p->phead = (p->phead + 1) % p->npc;
        p->pused--;
        p->head = (p->head + q.n) % p->cap;
        p->used -= q.n;
        if (failed)
            p->eof = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (failed)
            break;
    }
    shutdown(p->to, failed ? SHUT_RDWR : SHUT_WR);
    if (failed)
        shutdown(p->from, SHUT_RDWR);
    conn_put(p->c);
    return NULL;
}

static int start(conn *c)
{
    /* each ring: twice the bandwidth-delay product, at least 1 MiB, and
     * a piece per 4 KiB of it (reads are rarely smaller) */
    size_t cap = rate > 0 ? (size_t)(2 * rate * delay_s) : (64u << 20);
    if (cap < (1u << 20))
        cap = 1u << 20;
    c->refs = 4;
    pthread_mutex_init(&c->mu, NULL);
    for (int i = 0; i < 2; i++) {
        pipe_dir *p = &c->d[i];
        p->c = c;
        p->cap = cap;
        p->npc = cap / 4096 + 16;
        p->buf = malloc(cap);
        p->pc = malloc(p->npc * sizeof *p->pc);
        if (!p->buf || !p->pc)
            return -1;
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv, NULL);
    }
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 << 10);
    pthread_t t;
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&t, &a, reader, &c->d[i]) ||
            pthread_create(&t, &a, writer, &c->d[i])) {
            fprintf(stderr, "link_proxy: no thread\n");
            exit(1);
        }
    }
    pthread_attr_destroy(&a);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: link_proxy LISTEN_PORT TARGET_PORT DELAY_MS "
                        "RATE_MB_PER_S\n");
        return 2;
    }
    int lport = atoi(argv[1]), tport = atoi(argv[2]);
    delay_s = atof(argv[3]) / 1e3;
    rate = atof(argv[4]) * 1e6;
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)lport);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1024)) {
        perror("link_proxy: listen");
        return 1;
    }
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    printf("listening %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    struct sockaddr_in ta = {0};
    ta.sin_family = AF_INET;
    ta.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ta.sin_port = htons((uint16_t)tport);
    for (;;) {
        int cs = accept(ls, NULL, NULL);
        if (cs < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                continue;
            perror("link_proxy: accept");
            return 1;
        }
        int ss = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(ss, (struct sockaddr *)&ta, sizeof ta)) {
            close(ss);
            close(cs);
            continue;
        }
        setsockopt(cs, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(ss, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(ss);
            close(cs);
            continue;
        }
        c->d[0].from = cs; /* client to server */
        c->d[0].to = ss;
        c->d[0].extra = 2 * delay_s; /* SYN and SYN-ACK */
        c->d[1].from = ss; /* server to client */
        c->d[1].to = cs;
        if (start(c)) {
            fprintf(stderr, "link_proxy: out of memory\n");
            return 1;
        }
    }
}
