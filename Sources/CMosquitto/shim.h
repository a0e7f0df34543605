#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H

// libmosquitto, the reference MQTT client library (Debian libmosquitto-dev).
// Nothing here needs a wrapper: its API has no variadics or cast macros.
#include <mosquitto.h>

#endif
