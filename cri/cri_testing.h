/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What pullgate-cri's files expose for their unit tests only (as crun's
 * libcrun_testing): nothing in the daemon calls these. Include it from tests.
 */
#ifndef PULLGATE_CRI_TESTING_H
#define PULLGATE_CRI_TESTING_H

#include "verify_memory.h"

#include <stddef.h>

/* verify_memory.c: the entries held now. */
size_t cri_verify_memory_size(const cri_verify_memory *m);

#endif
