/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The names pullgate uses on D-Bus (docs/interfaces.md §9, docs/dbus.md), shared
 * by the emitter (notifier.c) and the listener (pullgatectl monitor) so the two
 * cannot drift apart.
 */
#ifndef PULLGATE_DBUS_NAMES_H
#define PULLGATE_DBUS_NAMES_H

#define PG_DBUS_INTERFACE "dev.pullgate.PullGate1"
#define PG_DBUS_PATH "/dev/pullgate/PullGate1"
/* libdbus's own default when DBUS_SYSTEM_BUS_ADDRESS is unset. */
#define PG_SYSTEM_BUS_DEFAULT "unix:path=/run/dbus/system_bus_socket"

/* Signal members. */
#define PG_SIGNAL_PULL_INTENT "PullIntent"
#define PG_SIGNAL_IMAGE_PULLED "ImagePulled"
#define PG_SIGNAL_PULL_FAILED "PullFailed"
#define PG_SIGNAL_CONTAINER_ALLOWED "ContainerAllowed"
#define PG_SIGNAL_CONTAINER_DENIED "ContainerDenied"
#define PG_SIGNAL_RECORDS_PRUNED "RecordsPruned"
/* pullgate-cri answered an ImageStatus "not present" to make the kubelet pull with the
 * pod's own credentials (a verification pull): image, namespace, reason. */
#define PG_SIGNAL_PULL_REQUIRED "PullRequired"

#endif
