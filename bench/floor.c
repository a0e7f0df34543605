/* The floor: the least a client can do on libdbus to read a Bird
 * characteristic or stream its notifications from BlueZ. No state machine,
 * no retries, no validation beyond what printing needs. birdctl is measured
 * against it by bench/run.py.
 *
 *   floor read  ADDRESS UUID         connect if needed, read, print, disconnect
 *   floor watch ADDRESS UUID COUNT   read, subscribe, print a line per value
 *                                    until COUNT lines (0: forever)
 *   floor acquire ADDRESS UUID COUNT the same through AcquireNotify's socket
 *
 * Values are printed as birdctl prints alpha: "HH:MM:SS.mmm  ADDRESS  alpha  0.42".
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <errno.h>
#include <unistd.h>

static DBusConnection *bus;
static const char *address;
static char device_path[256], char_path[256];

static void die(const char *what, DBusError *error) {
    fprintf(stderr, "floor: %s: %s\n", what, error && dbus_error_is_set(error) ? error->message : "failed");
    exit(1);
}

static DBusMessage *method(const char *path, const char *interface, const char *member) {
    return dbus_message_new_method_call("org.bluez", path, interface, member);
}

static DBusMessage *send_and_wait(DBusMessage *message) {
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, message, 25000, &error);
    if (!reply) die(dbus_message_get_member(message), &error);
    dbus_message_unref(message);
    return reply;
}

/* Moves iter (at a variant) into the variant's value. */
static void enter_variant(DBusMessageIter *variant, DBusMessageIter *value) {
    dbus_message_iter_recurse(variant, value);
}

/* Finds the device with `address` and its characteristic with `uuid` in a
 * GetManagedObjects reply; returns whether the device is ServicesResolved. */
static int find_objects(DBusMessage *reply, const char *uuid) {
    DBusMessageIter root, objects;
    int resolved = 0;
    device_path[0] = char_path[0] = 0;
    dbus_message_iter_init(reply, &root);
    dbus_message_iter_recurse(&root, &objects);
    /* Two passes: the device first, then its characteristic. */
    for (int pass = 0; pass < 2; pass++) {
        DBusMessageIter walk = objects;
        while (dbus_message_iter_get_arg_type(&walk) == DBUS_TYPE_DICT_ENTRY) {
            DBusMessageIter entry, interfaces;
            const char *path;
            dbus_message_iter_recurse(&walk, &entry);
            dbus_message_iter_get_basic(&entry, &path);
            dbus_message_iter_next(&entry);
            dbus_message_iter_recurse(&entry, &interfaces);
            while (dbus_message_iter_get_arg_type(&interfaces) == DBUS_TYPE_DICT_ENTRY) {
                DBusMessageIter ientry, props;
                const char *interface;
                dbus_message_iter_recurse(&interfaces, &ientry);
                dbus_message_iter_get_basic(&ientry, &interface);
                dbus_message_iter_next(&ientry);
                dbus_message_iter_recurse(&ientry, &props);
                int is_device = pass == 0 && strcmp(interface, "org.bluez.Device1") == 0;
                int is_char = pass == 1 && device_path[0] && strcmp(interface, "org.bluez.GattCharacteristic1") == 0 &&
                              strncmp(path, device_path, strlen(device_path)) == 0;
                int matched_address = 0, is_resolved = 0, matched_uuid = 0;
                while ((is_device || is_char) && dbus_message_iter_get_arg_type(&props) == DBUS_TYPE_DICT_ENTRY) {
                    DBusMessageIter pentry, value;
                    const char *name;
                    dbus_message_iter_recurse(&props, &pentry);
                    dbus_message_iter_get_basic(&pentry, &name);
                    dbus_message_iter_next(&pentry);
                    enter_variant(&pentry, &value);
                    if (is_device && strcmp(name, "Address") == 0) {
                        const char *text;
                        dbus_message_iter_get_basic(&value, &text);
                        matched_address = strcasecmp(text, address) == 0;
                    } else if (is_device && strcmp(name, "ServicesResolved") == 0) {
                        dbus_bool_t flag;
                        dbus_message_iter_get_basic(&value, &flag);
                        is_resolved = flag;
                    } else if (is_char && strcmp(name, "UUID") == 0) {
                        const char *text;
                        dbus_message_iter_get_basic(&value, &text);
                        matched_uuid = strcasecmp(text, uuid) == 0;
                    }
                    dbus_message_iter_next(&props);
                }
                if (matched_address) {
                    snprintf(device_path, sizeof device_path, "%s", path);
                    resolved = is_resolved;
                }
                if (matched_uuid) snprintf(char_path, sizeof char_path, "%s", path);
                dbus_message_iter_next(&interfaces);
            }
            dbus_message_iter_next(&walk);
        }
    }
    return resolved;
}

static int load_objects(const char *uuid) {
    DBusMessage *message = method("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects");
    DBusMessage *reply = send_and_wait(message);
    int resolved = find_objects(reply, uuid);
    dbus_message_unref(reply);
    return resolved;
}

static void add_match(const char *rule) {
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_add_match(bus, rule, &error);
    if (dbus_error_is_set(&error)) die("AddMatch", &error);
}

/* Whether a PropertiesChanged signal sets the boolean property `name` to true. */
static int sets_true(DBusMessage *signal, const char *name) {
    DBusMessageIter args, changed;
    dbus_message_iter_init(signal, &args);
    dbus_message_iter_next(&args);
    dbus_message_iter_recurse(&args, &changed);
    for (; dbus_message_iter_get_arg_type(&changed) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&changed)) {
        DBusMessageIter entry, value;
        const char *key;
        dbus_message_iter_recurse(&changed, &entry);
        dbus_message_iter_get_basic(&entry, &key);
        dbus_message_iter_next(&entry);
        enter_variant(&entry, &value);
        if (strcmp(key, name) == 0 && dbus_message_iter_get_arg_type(&value) == DBUS_TYPE_BOOLEAN) {
            dbus_bool_t flag;
            dbus_message_iter_get_basic(&value, &flag);
            return flag;
        }
    }
    return 0;
}

/* Connects the device and waits for ServicesResolved, as any client must. */
static void connect_device(const char *uuid) {
    char rule[512];
    snprintf(rule, sizeof rule,
             "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',"
             "member='PropertiesChanged',path='%s'", device_path);
    add_match(rule);
    DBusMessage *message = method(device_path, "org.bluez.Device1", "Connect");
    dbus_message_unref(send_and_wait(message));
    /* Signals that came during the blocking call are queued already: pop
     * before blocking in read_write, which waits for new bytes only. */
    for (int resolved = 0; !resolved;) {
        DBusMessage *signal = dbus_connection_pop_message(bus);
        if (!signal) {
            if (!dbus_connection_read_write(bus, -1)) die("the bus went away", NULL);
            continue;
        }
        if (dbus_message_is_signal(signal, "org.freedesktop.DBus.Properties", "PropertiesChanged") &&
            strcmp(dbus_message_get_path(signal), device_path) == 0 && sets_true(signal, "ServicesResolved"))
            resolved = 1;
        dbus_message_unref(signal);
    }
    load_objects(uuid);
}

static void print_alpha(const unsigned char *bytes, int length) {
    char text[8];
    if (length <= 0 || length > 3) {
        fprintf(stderr, "floor: bad alpha\n");
        return;
    }
    memcpy(text, bytes, length);
    text[length] = 0;
    int percent = atoi(text);
    struct timeval now;
    struct tm local;
    gettimeofday(&now, NULL);
    localtime_r(&now.tv_sec, &local);
    printf("%02d:%02d:%02d.%03d  %s  alpha  %g\n", local.tm_hour, local.tm_min, local.tm_sec,
           (int)(now.tv_usec / 1000), address, percent / 100.0);
}

static void read_and_print(void) {
    DBusMessage *message;
    DBusMessageIter args, options, array;
    message = method(char_path, "org.bluez.GattCharacteristic1", "ReadValue");
    dbus_message_iter_init_append(message, &args);
    dbus_message_iter_open_container(&args, DBUS_TYPE_ARRAY, "{sv}", &options);
    dbus_message_iter_close_container(&args, &options);
    DBusMessage *reply = send_and_wait(message);
    const unsigned char *bytes;
    int length;
    dbus_message_iter_init(reply, &args);
    dbus_message_iter_recurse(&args, &array);
    dbus_message_iter_get_fixed_array(&array, &bytes, &length);
    print_alpha(bytes, length);
    dbus_message_unref(reply);
}

/* Prints the Value of a characteristic's PropertiesChanged; returns 1 if it had one. */
static int print_notification(DBusMessage *signal) {
    DBusMessageIter args, changed;
    dbus_message_iter_init(signal, &args);
    dbus_message_iter_next(&args);
    dbus_message_iter_recurse(&args, &changed);
    for (; dbus_message_iter_get_arg_type(&changed) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&changed)) {
        DBusMessageIter entry, value, array;
        const char *key;
        dbus_message_iter_recurse(&changed, &entry);
        dbus_message_iter_get_basic(&entry, &key);
        if (strcmp(key, "Value") != 0) continue;
        dbus_message_iter_next(&entry);
        enter_variant(&entry, &value);
        const unsigned char *bytes;
        int length;
        dbus_message_iter_recurse(&value, &array);
        dbus_message_iter_get_fixed_array(&array, &bytes, &length);
        print_alpha(bytes, length);
        return 1;
    }
    return 0;
}

/* AcquireNotify: one notification per datagram on the socket it returns;
 * flush only before blocking, as the signal loop does. */
static void watch_acquired(long count) {
    DBusMessage *message = method(char_path, "org.bluez.GattCharacteristic1", "AcquireNotify");
    DBusMessageIter args, options;
    dbus_message_iter_init_append(message, &args);
    dbus_message_iter_open_container(&args, DBUS_TYPE_ARRAY, "{sv}", &options);
    dbus_message_iter_close_container(&args, &options);
    DBusMessage *reply = send_and_wait(message);
    int fd = -1;
    dbus_uint16_t mtu = 0;
    DBusError error;
    dbus_error_init(&error);
    if (!dbus_message_get_args(reply, &error, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_UINT16, &mtu, DBUS_TYPE_INVALID))
        die("AcquireNotify", &error);
    dbus_message_unref(reply);
    unsigned char buffer[600];
    long printed = 1;
    while (count == 0 || printed < count) {
        ssize_t length = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (length < 0 && errno == EAGAIN) {
            fflush(stdout);
            length = recv(fd, buffer, sizeof buffer, 0);
        }
        if (length < 0) die("the notify socket failed", NULL);
        print_alpha(buffer, (int)length);
        printed++;
    }
    fflush(stdout);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[1], "read") != 0 && strcmp(argv[1], "watch") != 0 && strcmp(argv[1], "acquire") != 0)) {
        fprintf(stderr, "usage: floor read ADDRESS UUID | floor watch|acquire ADDRESS UUID COUNT\n");
        return 2;
    }
    int acquire = strcmp(argv[1], "acquire") == 0;
    int watch = strcmp(argv[1], "watch") == 0 || acquire;
    address = argv[2];
    const char *uuid = argv[3];
    long count = watch && argc > 4 ? atol(argv[4]) : 0;
    DBusError error;
    dbus_error_init(&error);
    bus = dbus_bus_get(DBUS_BUS_SYSTEM, &error);
    if (!bus) die("system bus", &error);

    int resolved = load_objects(uuid);
    if (!device_path[0]) die("no such device", NULL);
    int connected_here = !resolved;
    if (!resolved) connect_device(uuid);
    if (!char_path[0]) die("no such characteristic", NULL);

    if (!watch) {
        read_and_print();
        if (connected_here) {
            DBusMessage *message = method(device_path, "org.bluez.Device1", "Disconnect");
            dbus_message_unref(send_and_wait(message));
        }
        return 0;
    }

    if (acquire) {
        read_and_print();
        watch_acquired(count);
        return 0;
    }

    char rule[512];
    snprintf(rule, sizeof rule,
             "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',"
             "member='PropertiesChanged',path='%s',arg0='org.bluez.GattCharacteristic1'", char_path);
    /* Read, then listen: BlueZ announces a value it reads as a change just
     * before the reply, which a rule added first would print as a notification. */
    read_and_print();
    add_match(rule);
    long printed = 1;
    DBusMessage *message = method(char_path, "org.bluez.GattCharacteristic1", "StartNotify");
    dbus_message_unref(send_and_wait(message));
    fflush(stdout);
    while (count == 0 || printed < count) {
        DBusMessage *signal = dbus_connection_pop_message(bus);
        if (!signal) {
            fflush(stdout);
            if (!dbus_connection_read_write(bus, -1)) die("the bus went away", NULL);
            continue;
        }
        if (dbus_message_is_signal(signal, "org.freedesktop.DBus.Properties", "PropertiesChanged") &&
            strcmp(dbus_message_get_path(signal), char_path) == 0)
            printed += print_notification(signal);
        dbus_message_unref(signal);
    }
    fflush(stdout);
    /* Unsubscribe, as a client that leaves should. */
    message = method(char_path, "org.bluez.GattCharacteristic1", "StopNotify");
    dbus_message_unref(send_and_wait(message));
    return 0;
}
