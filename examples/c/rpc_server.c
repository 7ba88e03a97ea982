/* A small skq RPC server in C on libskq (crates/skq-capi/include/skq.h).
 *
 *   rpc_server PORT POLICY THREADS [raw|ev]
 *
 * PORT 0 picks a free port; the server prints "listening on PORT" once ready.
 * POLICY is vanilla, shared, queue, cpu, best2 or hybrid. THREADS threads
 * share one skq instance. With `raw` (the default) each loops on
 * skq_worker_wait; with `ev` the same server runs on the libevent-style
 * layer: one event base dispatched by all THREADS threads at once, a
 * persistent event per connection. SIGTERM or SIGINT stops it and the server
 * exits 0 after freeing everything (so AddressSanitizer's leak check sees a
 * clean exit).
 *
 * Protocol (crates/skq-proto/src/wire.rs): 20-byte little-endian frames
 * {u32 frame_len, u8 kind, u8 class, u16 flags, u64 id, u32 service_ns}
 * then frame_len - 20 payload bytes. A request (kind 1) is answered by a
 * reply (kind 2) with the same id after spinning service_ns (capped at
 * 10 ms); a malformed frame closes the connection.
 *
 * Sources are edge-triggered and never re-armed: each handler reads and
 * accepts until EAGAIN; a connection is never processed by two workers at
 * once, so it needs no lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "skq.h"

#define HEADER_LEN 20
#define MAX_FRAME (HEADER_LEN + (1 << 20))
#define LISTENER_TOKEN 0

struct conn {
    int fd;
    uint64_t id; /* raw: the registration */
    skq_ev ev;   /* ev: the connection's event (caller storage) */
    unsigned char *in;
    size_t in_len, in_cap;
    unsigned char *out;
    size_t out_len, out_off, out_cap;
};

static skq_t *skq;
static skq_ev_base *base; /* ev mode */
static int listen_fd;
/* Open connections by fd, so the ones still open at shutdown are freed. */
#define MAX_FDS 65536
static struct conn *conns[MAX_FDS];

static void die(const char *what, int code) {
    fprintf(stderr, "rpc_server: %s: %s (%s)\n", what, skq_strerror(code), skq_last_error());
    exit(2);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static int reserve(unsigned char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need) n *= 2;
    unsigned char *b = realloc(*buf, n);
    if (!b) return -1;
    *buf = b;
    *cap = n;
    return 0;
}

static void conn_close(struct conn *c) {
    int r = base ? skq_ev_del(&c->ev) : skq_deregister(skq, c->id, c->fd);
    if (r != SKQ_OK) fprintf(stderr, "rpc_server: deregister: %s\n", skq_last_error());
    conns[c->fd] = NULL;
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Writes pending output; -1 on a fatal error. */
static int flush_out(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return 0; /* a writable edge will come */
        } else {
            return -1;
        }
    }
    c->out_off = c->out_len = 0;
    return 0;
}

/* Answers every whole frame in the input buffer; -1 on a protocol error. */
static int serve_frames(struct conn *c) {
    size_t off = 0;
    while (c->in_len - off >= HEADER_LEN) {
        const unsigned char *h = c->in + off;
        uint32_t len = get32(h);
        if (len < HEADER_LEN || len > MAX_FRAME || h[4] != 1 || h[6] != 0 || h[7] != 0) return -1;
        if (c->in_len - off < len) break;
        uint32_t service = get32(h + 16);
        if (service > 10000000u) service = 10000000u;
        uint64_t start = now_ns();
        while (now_ns() - start < service) {
        }
        if (reserve(&c->out, &c->out_cap, c->out_len + HEADER_LEN) < 0) return -1;
        unsigned char *r = c->out + c->out_len;
        memcpy(r, h, HEADER_LEN);
        put32(r, HEADER_LEN);
        r[4] = 2;
        put32(r + 16, service);
        c->out_len += HEADER_LEN;
        off += len;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return 0;
}

static void ev_on_conn(int fd, short what, void *arg);

static void on_conn(struct conn *c, uint32_t ready) {
    if (c->out_len && flush_out(c) < 0) goto close;
    if (ready & (SKQ_READY_READABLE | SKQ_READY_HUP | SKQ_READY_ERROR)) {
        for (;;) {
            if (reserve(&c->in, &c->in_cap, c->in_len + 16384) < 0) goto close;
            ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
            if (n > 0) {
                c->in_len += (size_t)n;
                if (serve_frames(c) < 0) goto close;
            } else if (n == 0) {
                goto close;
            } else if (errno == EINTR) {
                continue;
            } else if (errno == EAGAIN) {
                break;
            } else {
                goto close;
            }
        }
    }
    if (c->out_len && flush_out(c) < 0) goto close;
    return;
close:
    conn_close(c);
}

static void ev_on_conn(int fd, short what, void *arg) {
    (void)fd;
    uint32_t ready = (what & SKQ_EV_READ ? SKQ_READY_READABLE : 0) | (what & SKQ_EV_WRITE ? SKQ_READY_WRITABLE : 0);
    on_conn(arg, ready);
}

static void on_listener(int worker) {
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return; /* EAGAIN, or out of fds: the next connection retries */
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = fd < MAX_FDS ? calloc(1, sizeof *c) : NULL;
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        conns[fd] = c;
        int r;
        if (base) {
            r = skq_ev_assign(&c->ev, base, fd, SKQ_EV_READ | SKQ_EV_WRITE | SKQ_EV_PERSIST, ev_on_conn, c);
            if (r == SKQ_OK) r = skq_ev_add(&c->ev, NULL);
        } else {
            r = skq_register(skq, fd, (uint64_t)(uintptr_t)c, SKQ_READ | SKQ_WRITE, 0, worker, &c->id);
        }
        if (r != SKQ_OK) {
            fprintf(stderr, "rpc_server: register: %s\n", skq_last_error());
            conns[fd] = NULL;
            close(fd);
            free(c);
        }
    }
}

static void *worker_main(void *arg) {
    skq_worker_t *w = arg;
    int me = skq_worker_id(w);
    skq_event evs[64];
    for (;;) {
        int n = skq_worker_wait(w, evs, 64, -1);
        if (n < 0) die("wait", n);
        if (n == 0) break; /* shut down */
        for (int i = 0; i < n; i++) {
            if (evs[i].token == LISTENER_TOKEN)
                on_listener(me);
            else
                on_conn((struct conn *)(uintptr_t)evs[i].token, evs[i].ready);
        }
    }
    skq_exit_report rep;
    int r = skq_worker_exit(w, &rep);
    if (r != SKQ_OK) die("exit", r);
    return NULL;
}

static void ev_on_listener(int fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
    on_listener(SKQ_NO_WORKER);
}

static void *ev_thread_main(void *arg) {
    (void)arg;
    int r = skq_ev_base_dispatch(base);
    if (r < 0) die("dispatch", r);
    if ((r = skq_ev_base_thread_exit(base)) != SKQ_OK) die("thread exit", r);
    return NULL;
}

static int policy_of(const char *s) {
    const char *names[] = {"vanilla", "shared", "queue", "cpu", "best2", "hybrid"};
    const int ids[] = {SKQ_POLICY_VANILLA, SKQ_POLICY_SHARED, SKQ_POLICY_QUEUE,
                       SKQ_POLICY_CPU,     SKQ_POLICY_BEST2,  SKQ_POLICY_HYBRID};
    for (int i = 0; i < 6; i++)
        if (strcmp(s, names[i]) == 0) return ids[i];
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: rpc_server PORT POLICY THREADS [raw|ev]\n");
        return 2;
    }
    int ev_mode = argc == 5 && strcmp(argv[4], "ev") == 0;
    int port = atoi(argv[1]);
    int policy = policy_of(argv[2]);
    int threads = atoi(argv[3]);
    if (policy < 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "rpc_server: bad policy or thread count\n");
        return 2;
    }
    /* SIGTERM/SIGINT are taken by sigwait below, in this thread only. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    skq_config cfg;
    int r = skq_config_init(&cfg, policy, (uint32_t)threads);
    if (r != SKQ_OK) die("config", r);
    if (ev_mode) {
        if (!(base = skq_ev_base_new_with_config(&cfg))) die("base", SKQ_ECONFIG);
    } else if ((r = skq_new(&cfg, &skq)) != SKQ_OK) {
        die("new", r);
    }

    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(listen_fd, 1024) < 0) {
        perror("rpc_server: bind/listen");
        return 2;
    }
    socklen_t alen = sizeof a;
    getsockname(listen_fd, (struct sockaddr *)&a, &alen);
    uint64_t lid = 0;
    skq_ev *lev = NULL;
    if (ev_mode) {
        lev = skq_ev_new(base, listen_fd, SKQ_EV_READ | SKQ_EV_PERSIST, ev_on_listener, NULL);
        if (!lev || (r = skq_ev_add(lev, NULL)) != SKQ_OK) die("listener event", SKQ_EINVAL);
    } else if ((r = skq_register(skq, listen_fd, LISTENER_TOKEN, SKQ_READ, 0, SKQ_NO_WORKER, &lid)) != SKQ_OK) {
        die("register listener", r);
    }

    pthread_t *th = calloc((size_t)threads, sizeof *th);
    for (int i = 0; i < threads; i++) {
        if (ev_mode) {
            pthread_create(&th[i], NULL, ev_thread_main, NULL);
            continue;
        }
        skq_worker_t *w;
        if ((r = skq_worker_new(skq, (uint32_t)i, &w)) != SKQ_OK) die("worker", r);
        pthread_create(&th[i], NULL, worker_main, w);
    }
    printf("listening on %d\n", ntohs(a.sin_port));
    fflush(stdout);

    int sig;
    sigwait(&sigs, &sig);
    if (ev_mode)
        skq_ev_base_loopbreak(base);
    else
        skq_shutdown(skq);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    free(th);
    for (int fd = 0; fd < MAX_FDS; fd++)
        if (conns[fd]) conn_close(conns[fd]);
    if (ev_mode) {
        if ((r = skq_ev_free(lev)) != SKQ_OK) die("free listener event", r);
        close(listen_fd);
        if ((r = skq_ev_base_free(base)) != SKQ_OK) die("free base", r);
        fprintf(stderr, "rpc_server: event base stopped; delivered by %d threads\n", threads);
        return 0;
    }
    skq_deregister(skq, lid, listen_fd);
    close(listen_fd);
    skq_worker_stats st[64];
    int n = skq_stats(skq, st, 64);
    uint64_t delivered = 0;
    for (int i = 0; i < n && i < 64; i++) delivered += st[i].delivered;
    fprintf(stderr, "rpc_server: %d workers delivered %llu events\n", n, (unsigned long long)delivered);
    if ((r = skq_free(skq)) != SKQ_OK) die("free", r);
    return 0;
}
