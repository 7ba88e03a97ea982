/* Exercises every function of include/skq.h, error paths included. Built and
 * run under AddressSanitizer by tests/c_programs.rs; exits non-zero (with the
 * failing line) on the first failed check. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "skq.h"

static int checks;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, #cond, skq_last_error());                              \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)
#define OK(call) CHECK((call) == SKQ_OK)

static const int64_t SEC = 1000000000LL;

static void nonblocking_pair(int sv[2]) {
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
}

static void test_errors_and_config(void) {
    const int codes[] = {SKQ_OK,    SKQ_EINVAL, SKQ_EBADHANDLE, SKQ_ECONFIG,  SKQ_EIO,  SKQ_ESTALE,
                         SKQ_EFULL, SKQ_EBUSY,  SKQ_ENOWORKER,  SKQ_EPANIC, 3, -100};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        CHECK(skq_strerror(codes[i]) != NULL && strlen(skq_strerror(codes[i])) > 0);
    CHECK(strcmp(skq_strerror(SKQ_EBADHANDLE), "invalid handle") == 0);

    skq_config cfg;
    CHECK(skq_config_init(NULL, SKQ_POLICY_CPU, 1) == SKQ_EINVAL);
    CHECK(skq_config_init(&cfg, 42, 1) == SKQ_EINVAL);
    CHECK(strstr(skq_last_error(), "policy") != NULL);
    OK(skq_config_init(&cfg, SKQ_POLICY_HYBRID, 2));
    CHECK(cfg.steal == 1 && cfg.steal_k == 1 && cfg.rtshare == 100 && cfg.workers == 2);
    CHECK(cfg.poll_groups == 0 && cfg.promote_min_ns == 0 && cfg.pollers == 0);
    CHECK(cfg.batch_polls_above == 8);

    skq_t *skq = NULL;
    CHECK(skq_new(NULL, &skq) == SKQ_EINVAL);
    CHECK(skq_new(&cfg, NULL) == SKQ_EINVAL);
    cfg.workers = 0;
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG && skq == NULL);
    CHECK(strlen(skq_last_error()) > 0);
    OK(skq_config_init(&cfg, SKQ_POLICY_VANILLA, 2));
    cfg.steal = 1; /* refused with vanilla */
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG);
    cfg.steal = 7;
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG);
    OK(skq_config_init(&cfg, SKQ_POLICY_CPU, 1));
    cfg.rtshare = 0;
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG);
    cfg.policy = 9;
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG);
    OK(skq_config_init(&cfg, SKQ_POLICY_HYBRID, 2));
    cfg.poll_groups = 3; /* more sets than workers */
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG);
    CHECK(strstr(skq_last_error(), "poll-groups") != NULL);
    cfg.poll_groups = 2; /* one epoll set per worker */
    cfg.batch_polls_above = 65; /* out of range */
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG);
    CHECK(strstr(skq_last_error(), "batch-polls-above") != NULL);
    cfg.batch_polls_above = 64; /* never */
    cfg.seed = 77;
    OK(skq_new(&cfg, &skq));
    skq_config built;
    memset(&built, 0xff, sizeof built);
    CHECK(skq_get_config(NULL, &built) == SKQ_EBADHANDLE);
    CHECK(skq_get_config(skq, NULL) == SKQ_EINVAL);
    OK(skq_get_config(skq, &built));
    CHECK(built.policy == SKQ_POLICY_HYBRID && built.workers == 2 && built.steal == 1);
    CHECK(built.poll_groups == 2 && built.seed == 77 && built.steal_k == cfg.steal_k);
    CHECK(built.rtshare == cfg.rtshare && built.capacity == cfg.capacity);
    CHECK(built.pollers == 0 && built.promote_min_ns == 0 && built.batch_polls_above == 64);
    skq_free(skq);
    skq = NULL;
    OK(skq_config_init(&cfg, SKQ_POLICY_HYBRID, 2));
    OK(skq_new(&cfg, &skq));
    OK(skq_get_config(skq, &built));
    CHECK(built.poll_groups == 1); /* hybrid's choice: one shared set */
    skq_free(skq);
    skq = NULL;
    OK(skq_config_init(&cfg, SKQ_POLICY_CPU, 2));
    CHECK(cfg.poll_groups == 0); /* the policy's choice */
    OK(skq_new(&cfg, &skq));
    /* cpu takes a set per worker when each worker has a CPU of its own: the
     * library places worker w on the w-th CPU this process may use. */
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    OK(skq_get_config(skq, &built));
    CHECK(built.policy == SKQ_POLICY_CPU && built.workers == 2 && built.steal == 0);
    CHECK(built.poll_groups == (CPU_COUNT(&allowed) >= 2 ? 2u : 1u));
    skq_free(skq);
    skq = NULL;
    OK(skq_config_init(&cfg, SKQ_POLICY_HYBRID, 2));
    cfg.pollers = 3; /* more pollers than workers */
    CHECK(skq_new(&cfg, &skq) == SKQ_ECONFIG);
    CHECK(strstr(skq_last_error(), "pollers") != NULL);
    cfg.pollers = 1; /* leader/follower */
    OK(skq_new(&cfg, &skq));
    skq_free(skq);
    skq = NULL;
}

/* Worker handles: range, double take, wrong kinds, NULL. */
static void test_handles(void) {
    skq_config cfg;
    OK(skq_config_init(&cfg, SKQ_POLICY_HYBRID, 2));
    skq_t *skq = NULL;
    OK(skq_new(&cfg, &skq));
    skq_worker_t *w0 = NULL, *w1 = NULL, *w = NULL;
    CHECK(skq_worker_new(skq, 2, &w) == SKQ_ENOWORKER);
    CHECK(skq_worker_new(skq, 0, NULL) == SKQ_EINVAL);
    CHECK(skq_worker_new(NULL, 0, &w) == SKQ_EBADHANDLE);
    OK(skq_worker_new(skq, 0, &w0));
    CHECK(skq_worker_new(skq, 0, &w) == SKQ_EBUSY && w == NULL);
    OK(skq_worker_new(skq, 1, &w1));
    CHECK(skq_worker_id(w1) == 1);
    CHECK(skq_worker_id(NULL) == SKQ_EBADHANDLE);
    /* A handle of one kind passed as another is refused. */
    CHECK(skq_worker_new((skq_t *)w0, 1, &w) == SKQ_EBADHANDLE);
    CHECK(skq_worker_id((skq_worker_t *)skq) == SKQ_EBADHANDLE);
    CHECK(skq_shutdown((skq_t *)w0) == SKQ_EBADHANDLE);
    CHECK(skq_free((skq_t *)w0) == SKQ_EBADHANDLE);
    CHECK(skq_worker_exit((skq_worker_t *)skq, NULL) == SKQ_EBADHANDLE);
    CHECK(skq_user_event_notify((skq_user_event_t *)skq) == SKQ_EBADHANDLE);
    CHECK(skq_shutdown(NULL) == SKQ_EBADHANDLE);

    skq_exit_report rep;
    OK(skq_worker_exit(w1, &rep));
    CHECK(rep.rescheduled == 0 && rep.stranded == 0);
    CHECK(skq_worker_exit(w1, &rep) == SKQ_EBADHANDLE); /* second exit */
    OK(skq_worker_exit(w0, NULL));
    /* The exited worker's slot cannot be taken again. */
    CHECK(skq_worker_new(skq, 0, &w) == SKQ_EBUSY);
    OK(skq_free(skq));
    CHECK(skq_free(skq) == SKQ_EBADHANDLE); /* second free */
    CHECK(skq_free(NULL) == SKQ_EBADHANDLE);
}

/* Registration, wait, still_ready, release, modify, deregister, shutdown. */
static void test_sources(void) {
    skq_config cfg;
    OK(skq_config_init(&cfg, SKQ_POLICY_CPU, 1));
    skq_t *skq = NULL;
    OK(skq_new(&cfg, &skq));
    skq_worker_t *w = NULL;
    OK(skq_worker_new(skq, 0, &w));
    int sv[2];
    nonblocking_pair(sv);
    uint64_t id = 0;
    CHECK(skq_register(skq, sv[1], 7, 4, 0, SKQ_NO_WORKER, &id) == SKQ_EINVAL);
    CHECK(skq_register(skq, sv[1], 7, SKQ_READ, 8, SKQ_NO_WORKER, &id) == SKQ_EINVAL);
    CHECK(skq_register(skq, -1, 7, SKQ_READ, 0, SKQ_NO_WORKER, &id) == SKQ_EINVAL);
    CHECK(skq_register(skq, sv[1], 7, SKQ_READ, 0, SKQ_NO_WORKER, NULL) == SKQ_EINVAL);
    CHECK(skq_register(skq, sv[1], 7, SKQ_READ, 0, 5, &id) == SKQ_ENOWORKER);
    CHECK(skq_register(skq, sv[1], 7, SKQ_READ, SKQ_PINNED, SKQ_NO_WORKER, &id) == SKQ_ENOWORKER);
    CHECK(skq_register(NULL, sv[1], 7, SKQ_READ, 0, SKQ_NO_WORKER, &id) == SKQ_EBADHANDLE);
    int closed = dup(sv[1]);
    close(closed);
    CHECK(skq_register(skq, closed, 7, SKQ_READ, 0, SKQ_NO_WORKER, &id) == SKQ_EIO);
    CHECK(skq_last_os_error() == EBADF);
    OK(skq_register(skq, sv[1], 7, SKQ_READ, 0, 0, &id));

    skq_event evs[8];
    CHECK(skq_worker_wait(w, evs, 8, 0) == 0); /* nothing yet */
    CHECK(skq_worker_wait(w, NULL, 8, 0) == SKQ_EINVAL);
    CHECK(skq_worker_wait(w, evs, 0, 0) == SKQ_EINVAL);
    CHECK(skq_worker_wait(NULL, evs, 8, 0) == SKQ_EBADHANDLE);
    CHECK(write(sv[0], "ping", 4) == 4);
    CHECK(skq_worker_wait(w, evs, 8, 5 * SEC) == 1);
    CHECK(evs[0].token == 7 && evs[0].source == id && (evs[0].ready & SKQ_READY_READABLE));
    CHECK(evs[0].high == 0);
    char buf[16];
    CHECK(read(sv[1], buf, 2) == 2); /* stop before EAGAIN ... */
    OK(skq_worker_still_ready(w, &evs[0])); /* ... and say so */
    CHECK(skq_worker_still_ready(w, NULL) == SKQ_EINVAL);
    CHECK(skq_worker_still_ready(NULL, &evs[0]) == SKQ_EBADHANDLE);
    skq_event bogus = evs[0];
    bogus.source = 0xffffffffu;
    CHECK(skq_worker_still_ready(w, &bogus) == SKQ_ESTALE);
    OK(skq_worker_release(w));
    CHECK(skq_worker_release(NULL) == SKQ_EBADHANDLE);
    CHECK(skq_worker_wait(w, evs, 8, 5 * SEC) == 1); /* redelivered without new data */
    CHECK(evs[0].token == 7);
    CHECK(read(sv[1], buf, sizeof buf) == 2);
    CHECK(read(sv[1], buf, sizeof buf) == -1 && errno == EAGAIN);
    CHECK(skq_worker_wait(w, evs, 8, 0) == 0);

    /* modify: new token, writable interest (re-armed: reported now), high priority */
    CHECK(skq_modify(skq, id, sv[1], 8, 9, 0) == SKQ_EINVAL);
    CHECK(skq_modify(skq, id, -1, 8, SKQ_READ, 0) == SKQ_EINVAL);
    CHECK(skq_modify(NULL, id, sv[1], 8, SKQ_READ, 0) == SKQ_EBADHANDLE);
    OK(skq_modify(skq, id, sv[1], 8, SKQ_READ | SKQ_WRITE, SKQ_HIGH_PRIORITY));
    CHECK(skq_worker_wait(w, evs, 8, 5 * SEC) == 1);
    CHECK(evs[0].token == 8 && (evs[0].ready & SKQ_READY_WRITABLE) && evs[0].high == 1);

    /* a hang-up is reported as readable + HUP */
    close(sv[0]);
    CHECK(skq_worker_wait(w, evs, 8, 5 * SEC) == 1);
    CHECK(evs[0].token == 8 && (evs[0].ready & SKQ_READY_HUP));

    CHECK(skq_deregister(skq, id, -1) == SKQ_EINVAL);
    CHECK(skq_deregister(NULL, id, sv[1]) == SKQ_EBADHANDLE);
    OK(skq_deregister(skq, id, sv[1]));
    CHECK(skq_deregister(skq, id, sv[1]) != SKQ_OK); /* second time: not registered */
    CHECK(skq_deregister(skq, 1u << 30, sv[1]) == SKQ_ESTALE);
    CHECK(skq_modify(skq, id, sv[1], 8, SKQ_READ, 0) != SKQ_OK);
    close(sv[1]);

    /* user events */
    skq_user_event_t *ue = NULL;
    CHECK(skq_user_event_new(skq, 99, SKQ_PINNED, &ue) == SKQ_EINVAL);
    CHECK(skq_user_event_new(skq, 99, 0, NULL) == SKQ_EINVAL);
    CHECK(skq_user_event_new(NULL, 99, 0, &ue) == SKQ_EBADHANDLE);
    OK(skq_user_event_new(skq, 99, 0, &ue));
    uint64_t uid = 0;
    OK(skq_user_event_source(ue, &uid));
    CHECK(skq_user_event_source(ue, NULL) == SKQ_EINVAL);
    CHECK(skq_user_event_source(NULL, &uid) == SKQ_EBADHANDLE);
    OK(skq_user_event_notify(ue));
    OK(skq_user_event_notify(ue));
    CHECK(skq_worker_wait(w, evs, 8, 5 * SEC) == 1);
    CHECK(evs[0].token == 99 && evs[0].source == uid && (evs[0].ready & SKQ_READY_READABLE));
    uint64_t count = 0;
    OK(skq_user_event_reset(ue, &count));
    CHECK(count == 2);
    OK(skq_user_event_reset(ue, NULL));
    CHECK(skq_user_event_reset(NULL, &count) == SKQ_EBADHANDLE);
    CHECK(skq_user_event_notify(NULL) == SKQ_EBADHANDLE);
    OK(skq_user_event_free(ue));
    CHECK(skq_user_event_free(ue) == SKQ_EBADHANDLE);
    CHECK(skq_user_event_free(NULL) == SKQ_EBADHANDLE);

    /* virtual sources: no fd, activated directly */
    skq_virtual_source_t *vs = NULL;
    CHECK(skq_virtual_source_new(skq, 77, SKQ_PINNED, &vs) == SKQ_EINVAL);
    CHECK(skq_virtual_source_new(skq, 77, 0, NULL) == SKQ_EINVAL);
    CHECK(skq_virtual_source_new(NULL, 77, 0, &vs) == SKQ_EBADHANDLE);
    OK(skq_virtual_source_new(skq, 77, 0, &vs));
    uint64_t vid = 0;
    OK(skq_virtual_source_id(vs, &vid));
    CHECK(skq_virtual_source_id(vs, NULL) == SKQ_EINVAL);
    CHECK(skq_virtual_source_id(NULL, &vid) == SKQ_EBADHANDLE);
    CHECK(skq_virtual_source_activate((skq_virtual_source_t *)skq) == SKQ_EBADHANDLE);
    OK(skq_virtual_source_activate(vs));
    OK(skq_virtual_source_activate(vs)); /* merged into the queued delivery */
    CHECK(skq_worker_wait(w, evs, 8, 5 * SEC) == 1);
    CHECK(evs[0].token == 77 && evs[0].source == vid && (evs[0].ready & SKQ_READY_USER) &&
          (evs[0].ready & SKQ_READY_READABLE));
    OK(skq_virtual_source_activate(vs)); /* while processed: redelivered after release */
    CHECK(skq_worker_wait(w, evs, 8, 5 * SEC) == 1);
    CHECK(evs[0].token == 77 && evs[0].source == vid);
    CHECK(skq_worker_wait(w, evs, 8, 0) == 0); /* and only once */
    OK(skq_virtual_source_free(vs));
    CHECK(skq_virtual_source_free(vs) == SKQ_EBADHANDLE);
    CHECK(skq_virtual_source_free(NULL) == SKQ_EBADHANDLE);

    /* statistics */
    CHECK(skq_stats(skq, NULL, 0) == 1);
    CHECK(skq_stats(skq, NULL, 4) == SKQ_EINVAL);
    CHECK(skq_stats(NULL, NULL, 0) == SKQ_EBADHANDLE);
    skq_worker_stats st[4];
    memset(st, 0, sizeof st);
    CHECK(skq_stats(skq, st, 4) == 1);
    CHECK(st[0].delivered >= 5 && st[0].exited == 0 && st[0].high_served >= 1);
    double imb = -1;
    OK(skq_imbalance(skq, &imb));
    CHECK(imb >= 0.0 && imb <= 1.0);
    CHECK(skq_imbalance(skq, NULL) == SKQ_EINVAL);
    CHECK(skq_imbalance(NULL, &imb) == SKQ_EBADHANDLE);

    uint32_t cpu = 12345;
    int r = skq_pin_current_thread(skq, 0, &cpu);
    CHECK(r == SKQ_OK || r == SKQ_EIO);
    CHECK(r != SKQ_OK || cpu != 12345);
    CHECK(skq_pin_current_thread(skq, 3, &cpu) == SKQ_ENOWORKER);
    CHECK(skq_pin_current_thread(NULL, 0, &cpu) == SKQ_EBADHANDLE);

    /* shutdown makes waits return 0 at once, even without a timeout */
    OK(skq_shutdown(skq));
    CHECK(skq_worker_wait(w, evs, 8, -1) == 0);
    skq_exit_report rep;
    OK(skq_worker_exit(w, &rep));
    OK(skq_free(skq));
}

/* Several threads on one instance: every notification is delivered, and one
 * source is never held by two workers at once. */
#define THREADS 3
#define ROUNDS 2000
static skq_t *mt_skq;
static skq_user_event_t *mt_ue;
static int mt_busy, mt_overlap, mt_seen;
static pthread_mutex_t mt_lock = PTHREAD_MUTEX_INITIALIZER;

static void *mt_worker(void *arg) {
    skq_worker_t *w = arg;
    skq_event evs[4];
    for (;;) {
        int n = skq_worker_wait(w, evs, 4, -1);
        if (n <= 0) break;
        for (int i = 0; i < n; i++) {
            if (__atomic_fetch_add(&mt_busy, 1, __ATOMIC_SEQ_CST) != 0)
                __atomic_fetch_add(&mt_overlap, 1, __ATOMIC_SEQ_CST);
            uint64_t c = 0;
            skq_user_event_reset(mt_ue, &c);
            pthread_mutex_lock(&mt_lock);
            mt_seen += (int)c;
            int done = mt_seen >= ROUNDS;
            pthread_mutex_unlock(&mt_lock);
            __atomic_fetch_sub(&mt_busy, 1, __ATOMIC_SEQ_CST);
            if (done) skq_shutdown(mt_skq);
        }
    }
    skq_worker_exit(w, NULL);
    return NULL;
}

static void test_threads(void) {
    skq_config cfg;
    OK(skq_config_init(&cfg, SKQ_POLICY_BEST2, THREADS));
    OK(skq_new(&cfg, &mt_skq));
    OK(skq_user_event_new(mt_skq, 1, 0, &mt_ue));
    pthread_t th[THREADS];
    for (uint32_t i = 0; i < THREADS; i++) {
        skq_worker_t *w = NULL;
        OK(skq_worker_new(mt_skq, i, &w));
        CHECK(pthread_create(&th[i], NULL, mt_worker, w) == 0);
    }
    for (int i = 0; i < ROUNDS; i++) OK(skq_user_event_notify(mt_ue));
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    CHECK(mt_seen == ROUNDS);
    CHECK(mt_overlap == 0);
    OK(skq_user_event_free(mt_ue));
    OK(skq_free(mt_skq));
}

/* Handlers that checkpoint (skq_checkpoint) on a set per worker: every
 * notification of every source is still counted once, no source is held by
 * two workers at once, and a checkpoint off a worker's thread does nothing. */
#define CK_SOURCES 4
#define CK_ROUNDS 1000
static skq_t *ck_skq;
static skq_user_event_t *ck_ue[CK_SOURCES];
static int ck_busy[CK_SOURCES], ck_overlap, ck_seen, ck_negative, ck_moved;
static pthread_mutex_t ck_lock = PTHREAD_MUTEX_INITIALIZER;

static void *ck_worker(void *arg) {
    skq_worker_t *w = arg;
    skq_event evs[1];
    for (;;) {
        /* One event per wait: the rest stay queued, where a checkpoint can
         * hand them on (a batch in hand is never moved). */
        int n = skq_worker_wait(w, evs, 1, -1);
        if (n <= 0) break;
        for (int i = 0; i < n; i++) {
            int s = (int)evs[i].token;
            if (__atomic_fetch_add(&ck_busy[s], 1, __ATOMIC_SEQ_CST) != 0)
                __atomic_fetch_add(&ck_overlap, 1, __ATOMIC_SEQ_CST);
            /* A "long" handler: checkpoints between pieces of its work. */
            for (int k = 0; k < 3; k++) {
                int moved = skq_checkpoint();
                if (moved < 0) __atomic_fetch_add(&ck_negative, 1, __ATOMIC_SEQ_CST);
                else __atomic_fetch_add(&ck_moved, moved, __ATOMIC_SEQ_CST);
                for (volatile int spin = 0; spin < 20000; spin++) {
                }
            }
            uint64_t c = 0;
            skq_user_event_reset(ck_ue[s], &c);
            __atomic_fetch_sub(&ck_busy[s], 1, __ATOMIC_SEQ_CST);
            pthread_mutex_lock(&ck_lock);
            ck_seen += (int)c;
            int done = ck_seen >= CK_ROUNDS;
            pthread_mutex_unlock(&ck_lock);
            if (done) skq_shutdown(ck_skq);
        }
    }
    skq_worker_exit(w, NULL);
    return NULL;
}

static void test_checkpoint(void) {
    CHECK(skq_checkpoint() == 0); /* not a worker's thread */
    skq_config cfg;
    OK(skq_config_init(&cfg, SKQ_POLICY_HYBRID, 2));
    cfg.poll_groups = 2;
    OK(skq_new(&cfg, &ck_skq));
    for (int s = 0; s < CK_SOURCES; s++) OK(skq_user_event_new(ck_skq, (uint64_t)s, 0, &ck_ue[s]));
    pthread_t th[2];
    for (uint32_t i = 0; i < 2; i++) {
        skq_worker_t *w = NULL;
        OK(skq_worker_new(ck_skq, i, &w));
        CHECK(pthread_create(&th[i], NULL, ck_worker, w) == 0);
    }
    for (int i = 0; i < CK_ROUNDS; i++) {
        OK(skq_user_event_notify(ck_ue[i % CK_SOURCES]));
        for (volatile int spin = 0; spin < 5000; spin++) {
        }
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(ck_seen == CK_ROUNDS);
    CHECK(ck_overlap == 0);
    CHECK(ck_negative == 0);
    CHECK(skq_checkpoint() == 0); /* still not a worker's thread */
    printf("test_checkpoint: %d events handed on by checkpoints\n", ck_moved);
    for (int s = 0; s < CK_SOURCES; s++) OK(skq_user_event_free(ck_ue[s]));
    OK(skq_free(ck_skq));
}

/* ---- the libevent-style layer ---- */

struct reader {
    skq_ev_base *base;
    int fd;
    size_t want, got;
};

static void on_read(int fd, short what, void *arg) {
    struct reader *r = arg;
    CHECK(fd == r->fd && (what & SKQ_EV_READ));
    char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) __atomic_fetch_add(&r->got, (size_t)n, __ATOMIC_SEQ_CST);
}

/* Breaks the loops once everything was read; persistent, so a thread that
 * enters its loop after one break is stopped by the next. */
static void on_check(int fd, short what, void *arg) {
    (void)fd;
    CHECK(what == SKQ_EV_TIMEOUT);
    struct reader *r = arg;
    if (__atomic_load_n(&r->got, __ATOMIC_SEQ_CST) >= r->want) OK(skq_ev_base_loopbreak(r->base));
}

static int ticks;
static void on_tick(int fd, short what, void *arg) {
    CHECK(fd == -1 && what == SKQ_EV_TIMEOUT);
    skq_ev *ev = arg;
    if (++ticks == 3) OK(skq_ev_del(ev));
}

static int once_fired;
static void on_once(int fd, short what, void *arg) {
    (void)fd;
    (void)arg;
    CHECK(what & SKQ_EV_WRITE);
    once_fired++;
}

static void *loop_thread(void *arg) {
    skq_ev_base *b = arg;
    int r = skq_ev_base_dispatch(b);
    CHECK(r == 0);
    OK(skq_ev_base_thread_exit(b));
    return NULL;
}

static void *busy_loop_thread(void *arg) {
    /* the base has one worker, held by the main thread: refused */
    CHECK(skq_ev_base_loop(arg, SKQ_EVLOOP_NONBLOCK) == SKQ_EBUSY);
    return NULL;
}

static void nothing(int fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
}

static void test_event_layer(void) {
    skq_ev_base *dflt = skq_ev_base_new();
    CHECK(dflt != NULL);
    OK(skq_ev_base_free(dflt));
    CHECK(skq_ev_base_free(dflt) == SKQ_EBADHANDLE);
    CHECK(skq_ev_base_new_with_config(NULL) == NULL);
    skq_config cfg;
    OK(skq_config_init(&cfg, SKQ_POLICY_CPU, 0));
    CHECK(skq_ev_base_new_with_config(&cfg) == NULL); /* 0 workers: refused */
    CHECK(skq_ev_get_struct_event_size() == sizeof(skq_ev));

    OK(skq_config_init(&cfg, SKQ_POLICY_HYBRID, 3));
    skq_ev_base *b = skq_ev_base_new_with_config(&cfg);
    CHECK(b != NULL);
    CHECK(skq_ev_base_loop(b, 0) == 1); /* nothing pending */
    CHECK(skq_ev_base_loop(b, 64) == SKQ_EINVAL);
    CHECK(skq_ev_base_loop(NULL, 0) == SKQ_EBADHANDLE);
    CHECK(skq_ev_base_dispatch(NULL) == SKQ_EBADHANDLE);
    CHECK(skq_ev_base_loopbreak(NULL) == SKQ_EBADHANDLE);
    CHECK(skq_ev_base_thread_exit(NULL) == SKQ_EBADHANDLE);

    /* assign/new errors */
    skq_ev stack_ev;
    memset(&stack_ev, 0, sizeof stack_ev);
    CHECK(skq_ev_add(&stack_ev, NULL) == SKQ_EBADHANDLE); /* never assigned */
    CHECK(skq_ev_add(NULL, NULL) == SKQ_EINVAL);
    CHECK(skq_ev_del(NULL) == SKQ_EINVAL);
    CHECK(skq_ev_free(NULL) == SKQ_EINVAL);
    CHECK(skq_ev_pending(NULL, SKQ_EV_READ) == 0);
    CHECK(skq_ev_assign(&stack_ev, b, 0, SKQ_EV_READ, NULL, NULL) == SKQ_EINVAL);
    CHECK(skq_ev_assign(&stack_ev, b, -1, SKQ_EV_READ, nothing, NULL) == SKQ_EINVAL);
    CHECK(skq_ev_assign(&stack_ev, b, 0, 0x100, nothing, NULL) == SKQ_EINVAL);
    CHECK(skq_ev_assign(&stack_ev, NULL, -1, 0, nothing, NULL) == SKQ_EBADHANDLE);
    CHECK(skq_ev_new(b, -1, SKQ_EV_READ, nothing, NULL) == NULL);
    CHECK(skq_ev_new(NULL, -1, 0, nothing, NULL) == NULL);

    /* a persistent timer in caller storage: fires three times, deletes itself */
    OK(skq_ev_assign(&stack_ev, b, -1, SKQ_EV_PERSIST, on_tick, &stack_ev));
    skq_timeval bad = {0, 2000000};
    CHECK(skq_ev_add(&stack_ev, &bad) == SKQ_EINVAL);
    skq_timeval ms5 = {0, 5000};
    OK(skq_ev_add(&stack_ev, &ms5));
    CHECK(skq_ev_pending(&stack_ev, SKQ_EV_TIMEOUT | SKQ_EV_READ) == SKQ_EV_TIMEOUT);
    CHECK(skq_ev_base_loop(b, 0) == 1); /* returns once nothing is pending */
    CHECK(ticks == 3);
    CHECK(skq_ev_pending(&stack_ev, SKQ_EV_TIMEOUT) == 0);

    /* a one-shot write event: fires once, then is no longer pending */
    int sv[2];
    nonblocking_pair(sv);
    skq_ev *wev = skq_ev_new(b, sv[0], SKQ_EV_WRITE, on_once, NULL);
    CHECK(wev != NULL);
    OK(skq_ev_add(wev, NULL));
    CHECK(skq_ev_pending(wev, SKQ_EV_WRITE) == SKQ_EV_WRITE);
    CHECK(skq_ev_base_loop(b, SKQ_EVLOOP_ONCE) == 0);
    CHECK(once_fired == 1);
    CHECK(skq_ev_pending(wev, SKQ_EV_WRITE) == 0);
    /* a second event on the same fd cannot be added while one watches it */
    OK(skq_ev_add(wev, NULL));
    skq_ev *dup_ev = skq_ev_new(b, sv[0], SKQ_EV_READ, nothing, NULL);
    CHECK(skq_ev_add(dup_ev, NULL) == SKQ_EIO);
    OK(skq_ev_free(dup_ev));
    OK(skq_ev_free(wev));

    /* one worker held by this thread: a second thread is refused */
    skq_config one;
    OK(skq_config_init(&one, SKQ_POLICY_CPU, 1));
    skq_ev_base *b1 = skq_ev_base_new_with_config(&one);
    CHECK(b1 != NULL);
    skq_ev *t1 = skq_ev_new(b1, -1, 0, nothing, NULL);
    skq_timeval sec = {1, 0};
    OK(skq_ev_add(t1, &sec));
    CHECK(skq_ev_base_loop(b1, SKQ_EVLOOP_NONBLOCK) == 0);
    pthread_t bt;
    CHECK(pthread_create(&bt, NULL, busy_loop_thread, b1) == 0);
    pthread_join(bt, NULL);
    OK(skq_ev_free(t1));
    OK(skq_ev_base_thread_exit(b1));
    OK(skq_ev_base_free(b1));

    /* two threads dispatch one base (this thread gives its worker back
     * first); a persistent read event gets all data, then a persistent timer
     * breaks both loops */
    OK(skq_ev_base_thread_exit(b));
    struct reader rd = {b, sv[1], 64 * 1024, 0};
    skq_ev *rev = skq_ev_new(b, sv[1], SKQ_EV_READ | SKQ_EV_PERSIST, on_read, &rd);
    CHECK(rev != NULL);
    OK(skq_ev_add(rev, NULL));
    skq_ev *check = skq_ev_new(b, -1, SKQ_EV_PERSIST, on_check, &rd);
    skq_timeval ms1 = {0, 1000};
    OK(skq_ev_add(check, &ms1));
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, loop_thread, b) == 0);
    char chunk[1024];
    memset(chunk, 'x', sizeof chunk);
    size_t sent = 0;
    while (sent < rd.want) {
        ssize_t n = write(sv[0], chunk, sizeof chunk);
        if (n > 0) sent += (size_t)n;
        else usleep(100);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(rd.got == rd.want);
    OK(skq_ev_del(rev));
    OK(skq_ev_free(rev));
    OK(skq_ev_free(check));
    close(sv[0]);
    close(sv[1]);
    OK(skq_ev_base_thread_exit(b));
    OK(skq_ev_base_free(b));
}

int main(void) {
    test_errors_and_config();
    test_handles();
    test_sources();
    test_threads();
    test_checkpoint();
    test_event_layer();
    printf("test_api: %d checks passed\n", checks);
    return 0;
}
