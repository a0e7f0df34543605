#ifndef CDBUS_SHIM_H
#define CDBUS_SHIM_H

#include <dbus/dbus.h>

// DBusError carries bitfields and is meant to be initialised by DBUS_ERROR_INIT;
// Swift gets a zeroed value from this instead.
static inline DBusError cdbus_error_make(void) { DBusError e = DBUS_ERROR_INIT; return e; }

#endif
