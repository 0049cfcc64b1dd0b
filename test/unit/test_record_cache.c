/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin/store/record_cache.c: a hit needs the same file (inode, size, times, mode),
 * every change reloads, bounds evict least recently used entries, readers keep
 * their records across replacement and eviction, threads share one cache.
 */
#include "internal.h"
#include "record_cache.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define H_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define H_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define DIR_KEY "/var/lib/pullgate"

static char *root;
static int dirfd_;
static int loads; /* loader calls, to tell a hit from a reload */

static void setup(void)
{
    root = tu_mkdtemp();
    dirfd_ = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dirfd_, 0);
    loads = 0;
}

static void teardown(void)
{
    close(dirfd_);
    tu_rmrf(root);
    free(root);
}

/* The uncached path's checks: safe read, strict parse. */
static int test_loader(int dfd, const char *name, void **out, pg_error *err, void *ud)
{
    (void)ud;
    __atomic_add_fetch(&loads, 1, __ATOMIC_RELAXED);
    char *buf;
    size_t len;
    pg_record *rec = NULL;
    int rc = pg_read_file_at(dfd, name, PG_MAX_RECORD_BYTES, PG_READ_STRICT, &buf, &len, err);
    if (rc != PG_OK)
        return rc;
    rc = pg_record_parse(buf, len, &rec, err);
    free(buf);
    *out = rec;
    return rc;
}

static void free_rec(void *obj) { pg_record_free(obj); }

static const pg_record *rec_of(const pg_cached_record *ref) { return pg_cached_get(ref); }

/* A kubelet record for ref whose one secret (uid) has credential hash `hash`;
 * the hashes are equally long, so versions differing only in it have one size. */
static char *record_json_uid(const char *ref, const char *hash, const char *uid)
{
    return tu_sprintf("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"kubelet.config.k8s.io/v1beta1\","
                      "\"lastUpdatedTime\":\"2026-01-01T00:00:00Z\",\"imageRef\":\"%s\","
                      "\"credentialMapping\":{\"registry.example.com/app\":{\"kubernetesSecrets\":"
                      "[{\"uid\":\"%s\",\"namespace\":\"team-a\",\"name\":\"regcred\","
                      "\"credentialHash\":\"%s\"}]}}}",
                      ref, uid, hash);
}

static char *record_json(const char *ref, const char *hash) { return record_json_uid(ref, hash, "u1"); }

static void write_record(const char *name, const char *ref, const char *hash)
{
    char *path = tu_sprintf("%s/%s", root, name);
    char *json = record_json(ref, hash);
    tu_write_file(path, json, -1, 0600);
    free(json);
    free(path);
}

/* Writes a new file and renames it over name: a new inode, as the store writes. */
static void replace_record(const char *name, const char *ref, const char *hash)
{
    char *tmp = tu_sprintf("%s/.tmp-%s", root, name);
    char *path = tu_sprintf("%s/%s", root, name);
    char *json = record_json(ref, hash);
    tu_write_file(tmp, json, -1, 0600);
    ck_assert_int_eq(rename(tmp, path), 0);
    free(json);
    free(tmp);
    free(path);
}

static void set_mtime(const char *name, time_t sec)
{
    struct timespec ts[2] = {{sec, 0}, {sec, 0}};
    ck_assert_int_eq(utimensat(dirfd_, name, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static ino_t inode_of(const char *name)
{
    struct stat st;
    ck_assert_int_eq(fstatat(dirfd_, name, &st, AT_SYMLINK_NOFOLLOW), 0);
    return st.st_ino;
}

/* The credential hash of the record the cache returns for name (asserts PG_OK). */
static void expect_hash(pg_record_cache *c, const char *name, const char *hash)
{
    pg_cached_record *ref;
    pg_error err = {0};
    ck_assert_msg(pg_record_cache_get(c, dirfd_, DIR_KEY, name, test_loader, free_rec, NULL, &ref, &err) == PG_OK,
                  "get %s: %s", name, err.message);
    const pg_rec_mapping *m = pg_record_find(rec_of(ref), "registry.example.com/app");
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->n_secrets, 1);
    ck_assert_str_eq(m->secrets[0].credential_hash, hash);
    pg_cached_record_release(ref);
}

static int get_code(pg_record_cache *c, const char *name)
{
    pg_cached_record *ref = (pg_cached_record *)1;
    pg_error err = {0};
    int rc = pg_record_cache_get(c, dirfd_, DIR_KEY, name, test_loader, free_rec, NULL, &ref, &err);
    if (rc != PG_OK) {
        ck_assert_ptr_null(ref);
        ck_assert_str_ne(err.message, "");
    }
    pg_cached_record_release(ref);
    return rc;
}

static pg_record_cache_stats stats_of(pg_record_cache *c)
{
    pg_record_cache_stats s;
    pg_record_cache_get_stats(c, &s);
    return s;
}

START_TEST(hit_after_first_load)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    write_record("r1", "sha256:1111", H_A);
    expect_hash(c, "r1", H_A);
    expect_hash(c, "r1", H_A);
    expect_hash(c, "r1", H_A);
    ck_assert_int_eq(loads, 1);
    pg_record_cache_stats s = stats_of(c);
    ck_assert_uint_eq(s.hits, 2);
    ck_assert_uint_eq(s.misses, 1);
    ck_assert_uint_eq(s.entries, 1);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(miss_is_not_found_and_not_cached)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    ck_assert_int_eq(get_code(c, "absent"), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(get_code(c, "absent"), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(loads, 0); /* the stat answers: nothing to load, nothing remembered */
    ck_assert_uint_eq(stats_of(c).entries, 0);
    /* A cached record whose file disappears is not found either. */
    write_record("r1", "sha256:1111", H_A);
    expect_hash(c, "r1", H_A);
    char *path = tu_sprintf("%s/r1", root);
    ck_assert_int_eq(unlink(path), 0);
    free(path);
    ck_assert_int_eq(get_code(c, "r1"), PG_ERR_NOT_FOUND);
    ck_assert_uint_eq(stats_of(c).entries, 0);
    write_record("absent", "sha256:2222", H_A); /* a file that appears is read */
    expect_hash(c, "absent", H_A);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(size_change_in_place_reloads)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    write_record("r1", "sha256:1111", H_A);
    set_mtime("r1", 1700000000);
    expect_hash(c, "r1", H_A);
    ino_t ino = inode_of("r1");
    /* Same inode (O_TRUNC rewrite), longer content, mtime put back. */
    char *path = tu_sprintf("%s/r1", root);
    char *json = record_json_uid("sha256:1111", H_B, "a-longer-uid");
    tu_write_file(path, json, -1, 0600);
    free(json);
    free(path);
    set_mtime("r1", 1700000000);
    ck_assert_uint_eq(inode_of("r1"), ino);
    expect_hash(c, "r1", H_B);
    ck_assert_int_eq(loads, 2);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(mtime_change_reloads)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    write_record("r1", "sha256:1111", H_A);
    set_mtime("r1", 1700000000);
    expect_hash(c, "r1", H_A);
    set_mtime("r1", 1700000001); /* same inode, same size, same bytes: still reloaded */
    expect_hash(c, "r1", H_A);
    ck_assert_int_eq(loads, 2);
    expect_hash(c, "r1", H_A);
    ck_assert_int_eq(loads, 2);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(replaced_same_size_same_mtime_new_inode_reloads)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    write_record("r1", "sha256:1111", H_A);
    set_mtime("r1", 1700000000);
    expect_hash(c, "r1", H_A);
    ino_t old = inode_of("r1");
    /* Same size (the hashes are equally long), same mtime, other content, new inode. */
    replace_record("r1", "sha256:1111", H_B);
    set_mtime("r1", 1700000000);
    ck_assert_uint_ne(inode_of("r1"), old);
    expect_hash(c, "r1", H_B);
    ck_assert_int_eq(loads, 2);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(unsafe_change_is_refused_not_served)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    write_record("r1", "sha256:1111", H_A);
    expect_hash(c, "r1", H_A);
    /* Group-writable now: the loader's check refuses it, the cache must not serve it. */
    ck_assert_int_eq(fchmodat(dirfd_, "r1", 0620, 0), 0);
    ck_assert_int_eq(get_code(c, "r1"), PG_ERR_UNSAFE);
    ck_assert_uint_eq(stats_of(c).entries, 0);
    /* Replaced by a symlink to a valid record: refused too. */
    ck_assert_int_eq(fchmodat(dirfd_, "r1", 0600, 0), 0);
    expect_hash(c, "r1", H_A);
    write_record("r2", "sha256:2222", H_A);
    char *path = tu_sprintf("%s/r1", root);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(symlink("r2", path), 0);
    free(path);
    ck_assert_int_eq(get_code(c, "r1"), PG_ERR_UNSAFE);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(corrupt_file_error_is_the_loaders)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    write_record("r1", "sha256:1111", H_A);
    expect_hash(c, "r1", H_A);
    char *path = tu_sprintf("%s/r1", root);
    tu_write_file(path, "{\"kind\":", -1, 0600);
    free(path);
    ck_assert_int_ne(get_code(c, "r1"), PG_OK);
    ck_assert_uint_eq(stats_of(c).entries, 0);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(lru_eviction_by_count)
{
    pg_record_cache *c = pg_record_cache_new(3, 0, 0, NULL);
    write_record("a", "sha256:aaaa", H_A);
    write_record("b", "sha256:bbbb", H_A);
    write_record("c", "sha256:cccc", H_A);
    write_record("d", "sha256:dddd", H_A);
    expect_hash(c, "a", H_A);
    expect_hash(c, "b", H_A);
    expect_hash(c, "c", H_A);
    expect_hash(c, "a", H_A); /* a is now the most recent; b the least */
    expect_hash(c, "d", H_A); /* evicts b */
    pg_record_cache_stats s = stats_of(c);
    ck_assert_uint_eq(s.entries, 3);
    ck_assert_uint_eq(s.evictions, 1);
    ck_assert_int_eq(loads, 4);
    expect_hash(c, "a", H_A);
    expect_hash(c, "c", H_A);
    expect_hash(c, "d", H_A);
    ck_assert_int_eq(loads, 4); /* a, c, d stayed */
    expect_hash(c, "b", H_A);
    ck_assert_int_eq(loads, 5); /* b was the one evicted */
    pg_record_cache_free(c);
}
END_TEST

START_TEST(byte_bound_evicts_and_skips_oversized)
{
    write_record("a", "sha256:aaaa", H_A);
    write_record("b", "sha256:bbbb", H_A);
    struct stat st;
    ck_assert_int_eq(fstatat(dirfd_, "a", &st, 0), 0);
    /* Room for one record only. */
    pg_record_cache *c = pg_record_cache_new(100, (uint64_t)st.st_size + 10, 0, NULL);
    expect_hash(c, "a", H_A);
    expect_hash(c, "b", H_A);
    pg_record_cache_stats s = stats_of(c);
    ck_assert_uint_eq(s.entries, 1);
    ck_assert_uint_eq(s.evictions, 1);
    ck_assert_uint_le(s.bytes, (uint64_t)st.st_size + 10);
    pg_record_cache_free(c);
    /* Smaller than one record: served, never cached. */
    c = pg_record_cache_new(100, 16, 0, NULL);
    expect_hash(c, "a", H_A);
    expect_hash(c, "a", H_A);
    ck_assert_uint_eq(stats_of(c).entries, 0);
    ck_assert_uint_eq(stats_of(c).hits, 0);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(fresh_files_are_not_cached_until_settled)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 300, NULL);
    write_record("r1", "sha256:1111", H_A);
    expect_hash(c, "r1", H_A);
    expect_hash(c, "r1", H_A);
    ck_assert_int_eq(loads, 2); /* changed < 300 ms ago: parsed each time */
    usleep(400 * 1000);
    expect_hash(c, "r1", H_A);
    expect_hash(c, "r1", H_A);
    ck_assert_int_eq(loads, 3);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(reader_keeps_record_across_replace_evict_and_free)
{
    pg_record_cache *c = pg_record_cache_new(1, 0, 0, NULL);
    write_record("r1", "sha256:1111", H_A);
    write_record("r2", "sha256:2222", H_A);
    pg_cached_record *held;
    ck_assert_int_eq(pg_record_cache_get(c, dirfd_, DIR_KEY, "r1", test_loader, free_rec, NULL, &held, NULL),
                     PG_OK);
    replace_record("r1", "sha256:1111", H_B);
    expect_hash(c, "r1", H_B); /* replaces the entry */
    expect_hash(c, "r2", H_A); /* evicts it */
    pg_record_cache_free(c);
    /* Still the version read at the time (ASan would flag a use after free). */
    ck_assert_str_eq(pg_record_image_ref(rec_of(held)), "sha256:1111");
    ck_assert_str_eq(pg_record_find(rec_of(held), "registry.example.com/app")
                         ->secrets[0]
                         .credential_hash,
                     H_A);
    pg_cached_record_release(held);
}
END_TEST

START_TEST(keys_are_per_directory)
{
    pg_record_cache *c = pg_record_cache_new(8, 0, 0, NULL);
    char *sub = tu_sprintf("%s/other", root);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    int other = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    write_record("r1", "sha256:1111", H_A);
    char *p2 = tu_sprintf("%s/r1", sub);
    char *json = record_json("sha256:1111", H_B);
    tu_write_file(p2, json, -1, 0600);
    expect_hash(c, "r1", H_A);
    pg_cached_record *ref;
    ck_assert_int_eq(pg_record_cache_get(c, other, "/other", "r1", test_loader, free_rec, NULL, &ref, NULL), PG_OK);
    ck_assert_str_eq(pg_record_find(rec_of(ref), "registry.example.com/app")
                         ->secrets[0]
                         .credential_hash,
                     H_B);
    pg_cached_record_release(ref);
    ck_assert_uint_eq(stats_of(c).entries, 2);
    pg_record_cache_forget(c, "/other", "r1");
    ck_assert_uint_eq(stats_of(c).entries, 1);
    close(other);
    free(json);
    free(p2);
    free(sub);
    pg_record_cache_free(c);
}
END_TEST

START_TEST(bad_arguments)
{
    pg_error err = {0};
    ck_assert_ptr_null(pg_record_cache_new(0, 0, 0, &err));
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    pg_record_cache *c = pg_record_cache_new(4, 0, 0, NULL);
    pg_cached_record *ref;
    ck_assert_int_eq(pg_record_cache_get(c, dirfd_, DIR_KEY, "../x", test_loader, free_rec, NULL, &ref, &err),
                     PG_ERR_INVALID);
    ck_assert_int_eq(pg_record_cache_get(c, dirfd_, DIR_KEY, "", test_loader, free_rec, NULL, &ref, &err),
                     PG_ERR_INVALID);
    ck_assert_int_eq(pg_record_cache_get(c, dirfd_, DIR_KEY, "..", test_loader, free_rec, NULL, &ref, &err),
                     PG_ERR_INVALID);
    ck_assert_int_eq(pg_record_cache_get(c, dirfd_, DIR_KEY, "r", NULL, free_rec, NULL, &ref, &err),
                     PG_ERR_INVALID);
    ck_assert_ptr_null(ref);
    pg_record_cache_free(c);
}
END_TEST

/* ---------------------------------------------------- concurrent readers */

#define FILES 16
#define READERS 4
#define READS_PER_THREAD 4000

static atomic_int stop_writer;
static pg_record_cache *shared_cache;

static void file_name(int i, char *out, size_t n) { snprintf(out, n, "f%02d", i); }
static void file_ref(int i, char *out, size_t n) { snprintf(out, n, "sha256:%04d", i); }

static void *reader(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    long bad = 0;
    for (int k = 0; k < READS_PER_THREAD; k++) {
        int i = (int)(rand_r(&seed) % FILES);
        char name[16], ref[32];
        file_name(i, name, sizeof name);
        file_ref(i, ref, sizeof ref);
        pg_cached_record *r;
        pg_error err = {0};
        if (pg_record_cache_get(shared_cache, dirfd_, DIR_KEY, name, test_loader, free_rec, NULL, &r, &err) != PG_OK) {
            bad++;
            continue;
        }
        const pg_record *rec = rec_of(r);
        const pg_rec_mapping *m = pg_record_find(rec, "registry.example.com/app");
        /* Whole versions only: the right file, one secret, hash A or B. */
        if (strcmp(pg_record_image_ref(rec), ref) != 0 || !m || m->n_secrets != 1 ||
            (strcmp(m->secrets[0].credential_hash, H_A) && strcmp(m->secrets[0].credential_hash, H_B)))
            bad++;
        pg_cached_record_release(r);
    }
    return (void *)bad;
}

static void *writer(void *arg)
{
    (void)arg;
    for (int round = 0; !atomic_load(&stop_writer); round++) {
        char name[16], ref[32];
        file_name(round % FILES, name, sizeof name);
        file_ref(round % FILES, ref, sizeof ref);
        replace_record(name, ref, (round / FILES) % 2 ? H_A : H_B);
        usleep(200);
    }
    return NULL;
}

START_TEST(concurrent_readers_and_a_writer)
{
    for (int i = 0; i < FILES; i++) {
        char name[16], ref[32];
        file_name(i, name, sizeof name);
        file_ref(i, ref, sizeof ref);
        write_record(name, ref, H_A);
    }
    shared_cache = pg_record_cache_new(FILES / 2, 0, 0, NULL); /* evictions too */
    atomic_store(&stop_writer, 0);
    pthread_t w, r[READERS];
    ck_assert_int_eq(pthread_create(&w, NULL, writer, NULL), 0);
    for (uintptr_t t = 0; t < READERS; t++)
        ck_assert_int_eq(pthread_create(&r[t], NULL, reader, (void *)(t + 1)), 0);
    long bad = 0;
    for (int t = 0; t < READERS; t++) {
        void *res;
        pthread_join(r[t], &res);
        bad += (long)res;
    }
    atomic_store(&stop_writer, 1);
    pthread_join(w, NULL);
    ck_assert_int_eq(bad, 0);
    pg_record_cache_stats s = stats_of(shared_cache);
    ck_assert_uint_eq(s.hits + s.misses, (uint64_t)READERS * READS_PER_THREAD);
    ck_assert_uint_gt(s.hits, 0);
    ck_assert_uint_le(s.entries, FILES / 2);
    /* Once writes stop, every lookup sees the last version on disk. */
    for (int i = 0; i < FILES; i++) {
        char name[16], ref[32];
        file_name(i, name, sizeof name);
        file_ref(i, ref, sizeof ref);
        replace_record(name, ref, H_B);
        expect_hash(shared_cache, name, H_B);
    }
    pg_record_cache_free(shared_cache);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("record_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, hit_after_first_load);
    tcase_add_test(tc, miss_is_not_found_and_not_cached);
    tcase_add_test(tc, size_change_in_place_reloads);
    tcase_add_test(tc, mtime_change_reloads);
    tcase_add_test(tc, replaced_same_size_same_mtime_new_inode_reloads);
    tcase_add_test(tc, unsafe_change_is_refused_not_served);
    tcase_add_test(tc, corrupt_file_error_is_the_loaders);
    tcase_add_test(tc, lru_eviction_by_count);
    tcase_add_test(tc, byte_bound_evicts_and_skips_oversized);
    tcase_add_test(tc, fresh_files_are_not_cached_until_settled);
    tcase_add_test(tc, reader_keeps_record_across_replace_evict_and_free);
    tcase_add_test(tc, keys_are_per_directory);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, concurrent_readers_and_a_writer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
