/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's lookups, for the engine above the store (decide.c, the
 * tests): per-directory lookups (store_identity.h), focused records and
 * credential times (store_credidx.h), which records map a name
 * (store_names.h). Files of the store itself include the header of the layer
 * they use, never this one (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_LOOKUP_H
#define PULLGATE_STORE_LOOKUP_H

#include "store_credidx.h"
#include "store_identity.h"
#include "store_names.h"

#endif
