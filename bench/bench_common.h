/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the benchmark drivers (bench/ only; not installed). */
#ifndef PULLGATE_BENCH_COMMON_H
#define PULLGATE_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);
/* Sorts v in place; returns the q-quantile (0..1, nearest rank). */
double bench_quantile(double *v, size_t n, double q);
/* Lowercase hex SHA-256 of s. */
void bench_sha256_hex(const char *s, char out[65]);

/*
 * The synthetic record i (deterministic):
 *   image      registry.example.com/team-<i%100>/app-<i>:v1
 *   name       registry.example.com/team-<i%100>/app-<i>
 *   imageRef   hex sha256("image-<i>")  (bare image ID, as CRI-O names it)
 *   secret     team-<i%100>/regcred/uid-<i>, credentialHash hex sha256("cred-<i>")
 */
void bench_image(size_t i, char *out, size_t n);
void bench_image_name(size_t i, char *out, size_t n);
void bench_image_ref(size_t i, char out[65]);
void bench_namespace(size_t i, char *out, size_t n);
void bench_cred_hash(size_t i, char out[65]);
/* The credentials annotation a pod of record i presents (matches its secret). */
void bench_annotation(size_t i, char *out, size_t n);

/*
 * Writes records [from, to) directly as kubelet JSON files into dir/pulled/
 * (mode 0600, no fsync: bulk setup only). extra_secrets > 0 adds that many
 * non-matching secrets (other namespaces) before the matching one.
 * Creates dir, dir/pulled, dir/pulling (0700). Returns 0 or -1 (errno).
 */
int bench_write_records(const char *dir, size_t from, size_t to, size_t extra_secrets);
/* Bytes of the kubelet JSON of record i (for same-size raw writes). */
size_t bench_record_size(size_t i);

#endif
