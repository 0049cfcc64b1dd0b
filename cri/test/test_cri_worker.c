/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's worker thread (worker.h): tasks posted from any thread run on
 * the worker, in posting order per thread; timers fire in due order, a
 * disarmed timer never fires, and stop runs what was posted first. No timing
 * assertion: only orders and counts.
 */
#include "worker.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define POSTERS 4
#define PER_POSTER 500

typedef struct counter_task {
    cri_task task;
    atomic_int *ran;
    int poster, seq;
    int *last_seq; /* per poster, touched on the worker only */
} counter_task;

static void count(cri_task *t)
{
    counter_task *c = (counter_task *)t;
    /* Tasks of one poster run in the order it posted them. */
    ck_assert_int_eq(c->last_seq[c->poster] + 1, c->seq);
    c->last_seq[c->poster] = c->seq;
    atomic_fetch_add(c->ran, 1);
}

typedef struct poster_arg {
    cri_worker *w;
    counter_task *tasks;
} poster_arg;

static void *poster(void *arg)
{
    poster_arg *p = arg;
    for (int i = 0; i < PER_POSTER; i++)
        cri_worker_post(p->w, &p->tasks[i].task);
    return NULL;
}

START_TEST(tasks_from_many_threads_all_run_in_order)
{
    pg_error err = {0};
    cri_worker *w = cri_worker_new(&err);
    ck_assert_ptr_nonnull(w);
    atomic_int ran = 0;
    int last_seq[POSTERS];
    for (int p = 0; p < POSTERS; p++)
        last_seq[p] = -1;
    counter_task *tasks = calloc(POSTERS * PER_POSTER, sizeof *tasks);
    ck_assert_ptr_nonnull(tasks);
    pthread_t threads[POSTERS];
    poster_arg args[POSTERS];
    for (int p = 0; p < POSTERS; p++) {
        for (int i = 0; i < PER_POSTER; i++) {
            counter_task *c = &tasks[p * PER_POSTER + i];
            c->task.fn = count;
            c->ran = &ran;
            c->poster = p;
            c->seq = i;
            c->last_seq = last_seq;
        }
        args[p] = (poster_arg){w, &tasks[p * PER_POSTER]};
        ck_assert_int_eq(pthread_create(&threads[p], NULL, poster, &args[p]), 0);
    }
    for (int p = 0; p < POSTERS; p++)
        pthread_join(threads[p], NULL);
    ck_assert_int_eq(cri_worker_stop(w, 10000), 1); /* stop runs what was posted */
    ck_assert_int_eq(atomic_load(&ran), POSTERS * PER_POSTER);
    free(tasks);
}
END_TEST

/* Timers are armed from a task on the worker, as intercept.c arms them. */
typedef struct timer_env {
    cri_worker *w;
    cri_timer timers[4];
    int fired[4];
    int n_fired;
    cri_task arm;
} timer_env;

static void fire(cri_task *t)
{
    timer_env *e = t->owner;
    cri_timer *tm = (cri_timer *)t; /* the task is the timer's first member */
    e->fired[e->n_fired++] = (int)(tm - e->timers);
}

static void arm_all(cri_task *t)
{
    timer_env *e = t->owner;
    int64_t now = pg_monotonic_ms();
    /* Armed out of order; timer 1 is disarmed, timer 3 re-armed earlier. */
    cri_worker_arm(e->w, &e->timers[0], now + 60);
    cri_worker_arm(e->w, &e->timers[1], now + 20);
    cri_worker_arm(e->w, &e->timers[2], now + 40);
    cri_worker_arm(e->w, &e->timers[3], now + 500);
    cri_worker_disarm(e->w, &e->timers[1]);
    cri_worker_arm(e->w, &e->timers[3], now + 10);
}

START_TEST(timers_fire_in_due_order_and_disarmed_never)
{
    pg_error err = {0};
    timer_env e;
    memset(&e, 0, sizeof e);
    e.w = cri_worker_new(&err);
    ck_assert_ptr_nonnull(e.w);
    for (int i = 0; i < 4; i++)
        e.timers[i].task = (cri_task){.fn = fire, .owner = &e};
    e.arm = (cri_task){.fn = arm_all, .owner = &e};
    cri_worker_post(e.w, &e.arm);
    /* stop waits until no timer is armed: every armed one has fired by then. */
    ck_assert_int_eq(cri_worker_stop(e.w, 10000), 1);
    ck_assert_int_eq(e.n_fired, 3);
    ck_assert_int_eq(e.fired[0], 3);
    ck_assert_int_eq(e.fired[1], 2);
    ck_assert_int_eq(e.fired[2], 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cri_worker");
    TCase *tc = tcase_create("worker");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tasks_from_many_threads_all_run_in_order);
    tcase_add_test(tc, timers_fire_in_due_order_and_disarmed_never);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
