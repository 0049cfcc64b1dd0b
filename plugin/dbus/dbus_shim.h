/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libdbus, loaded on demand. Linking libdbus-1 pulls in libsystemd, libgcrypt,
 * liblzma, libzstd, liblz4, libcap and libgpg-error (Debian/Fedora builds):
 * eight libraries mapped and relocated on every container start even with
 * dbus "none". notifier.c and pullgatectl monitor call libdbus only through
 * this table, which pg_dbus_load() fills from dlopen("libdbus-1.so.3") the
 * first time a notifier for a real bus is created or monitor subscribes.
 * <dbus/dbus.h> is used for types only.
 */
#ifndef PULLGATE_DBUS_SHIM_H
#define PULLGATE_DBUS_SHIM_H

#include "internal.h"

#include <dbus/dbus.h>

#define PG_DBUS_FUNCS(X) \
    X(dbus_address_entries_free) \
    X(dbus_address_entry_get_method) \
    X(dbus_address_entry_get_value) \
    X(dbus_bus_add_match) \
    X(dbus_bus_register) \
    X(dbus_bus_set_unique_name) \
    X(dbus_connection_close) \
    X(dbus_connection_get_is_authenticated) \
    X(dbus_connection_get_is_connected) \
    X(dbus_connection_has_messages_to_send) \
    X(dbus_connection_open_private) \
    X(dbus_connection_pop_message) \
    X(dbus_connection_read_write) \
    X(dbus_connection_send) \
    X(dbus_connection_send_with_reply_and_block) \
    X(dbus_connection_set_change_sigpipe) \
    X(dbus_connection_set_exit_on_disconnect) \
    X(dbus_connection_unref) \
    X(dbus_error_free) \
    X(dbus_error_init) \
    X(dbus_error_is_set) \
    X(dbus_message_append_args) \
    X(dbus_message_get_args) \
    X(dbus_message_get_member) \
    X(dbus_message_get_reply_serial) \
    X(dbus_message_get_signature) \
    X(dbus_message_get_type) \
    X(dbus_message_has_interface) \
    X(dbus_message_has_signature) \
    X(dbus_message_iter_append_basic) \
    X(dbus_message_iter_get_arg_type) \
    X(dbus_message_iter_get_basic) \
    X(dbus_message_iter_init) \
    X(dbus_message_iter_init_append) \
    X(dbus_message_iter_next) \
    X(dbus_message_new_method_call) \
    X(dbus_message_new_signal) \
    X(dbus_message_unref) \
    X(dbus_parse_address) \
    X(dbus_set_error_from_message) \
    X(dbus_validate_utf8) \

typedef struct pg_dbus_api {
#define PG_DBUS_MEMBER(f) __typeof__(f) *f;
    PG_DBUS_FUNCS(PG_DBUS_MEMBER)
#undef PG_DBUS_MEMBER
} pg_dbus_api;

extern pg_dbus_api pg_dbus_fn;

/* Loads libdbus once (thread-safe). PG_OK, or PG_ERR_IO naming what is missing. */
int pg_dbus_load(pg_error *err);

#ifndef PG_DBUS_SHIM_IMPL
#define dbus_address_entries_free pg_dbus_fn.dbus_address_entries_free
#define dbus_address_entry_get_method pg_dbus_fn.dbus_address_entry_get_method
#define dbus_address_entry_get_value pg_dbus_fn.dbus_address_entry_get_value
#define dbus_bus_add_match pg_dbus_fn.dbus_bus_add_match
#define dbus_bus_register pg_dbus_fn.dbus_bus_register
#define dbus_bus_set_unique_name pg_dbus_fn.dbus_bus_set_unique_name
#define dbus_connection_close pg_dbus_fn.dbus_connection_close
#define dbus_connection_get_is_authenticated pg_dbus_fn.dbus_connection_get_is_authenticated
#define dbus_connection_get_is_connected pg_dbus_fn.dbus_connection_get_is_connected
#define dbus_connection_has_messages_to_send pg_dbus_fn.dbus_connection_has_messages_to_send
#define dbus_connection_open_private pg_dbus_fn.dbus_connection_open_private
#define dbus_connection_pop_message pg_dbus_fn.dbus_connection_pop_message
#define dbus_connection_read_write pg_dbus_fn.dbus_connection_read_write
#define dbus_connection_send pg_dbus_fn.dbus_connection_send
#define dbus_connection_send_with_reply_and_block pg_dbus_fn.dbus_connection_send_with_reply_and_block
#define dbus_connection_set_change_sigpipe pg_dbus_fn.dbus_connection_set_change_sigpipe
#define dbus_connection_set_exit_on_disconnect pg_dbus_fn.dbus_connection_set_exit_on_disconnect
#define dbus_connection_unref pg_dbus_fn.dbus_connection_unref
#define dbus_error_free pg_dbus_fn.dbus_error_free
#define dbus_error_init pg_dbus_fn.dbus_error_init
#define dbus_error_is_set pg_dbus_fn.dbus_error_is_set
#define dbus_message_append_args pg_dbus_fn.dbus_message_append_args
#define dbus_message_get_args pg_dbus_fn.dbus_message_get_args
#define dbus_message_get_member pg_dbus_fn.dbus_message_get_member
#define dbus_message_get_reply_serial pg_dbus_fn.dbus_message_get_reply_serial
#define dbus_message_get_signature pg_dbus_fn.dbus_message_get_signature
#define dbus_message_get_type pg_dbus_fn.dbus_message_get_type
#define dbus_message_has_interface pg_dbus_fn.dbus_message_has_interface
#define dbus_message_has_signature pg_dbus_fn.dbus_message_has_signature
#define dbus_message_iter_append_basic pg_dbus_fn.dbus_message_iter_append_basic
#define dbus_message_iter_get_arg_type pg_dbus_fn.dbus_message_iter_get_arg_type
#define dbus_message_iter_get_basic pg_dbus_fn.dbus_message_iter_get_basic
#define dbus_message_iter_init pg_dbus_fn.dbus_message_iter_init
#define dbus_message_iter_init_append pg_dbus_fn.dbus_message_iter_init_append
#define dbus_message_iter_next pg_dbus_fn.dbus_message_iter_next
#define dbus_message_new_method_call pg_dbus_fn.dbus_message_new_method_call
#define dbus_message_new_signal pg_dbus_fn.dbus_message_new_signal
#define dbus_message_unref pg_dbus_fn.dbus_message_unref
#define dbus_parse_address pg_dbus_fn.dbus_parse_address
#define dbus_set_error_from_message pg_dbus_fn.dbus_set_error_from_message
#define dbus_validate_utf8 pg_dbus_fn.dbus_validate_utf8
#endif

#endif
