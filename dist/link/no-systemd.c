/* Linked into the release binary beside Debian's static libdbus (libdbus-1.a).
 *
 * That archive was built with systemd support, so it calls sd_listen_fds and
 * sd_is_socket — only from _dbus_listen_systemd_sockets, which a bus daemon
 * uses when systemd starts it with its listening sockets. birdctl is a client
 * and never listens; Debian ships no libsystemd.a to satisfy the references,
 * and linking libsystemd.so for them would bring back the six libraries it
 * loads (libgcrypt, liblzma, libzstd, lz4, libcap, libgpg-error). These answer
 * as libsystemd does in a process systemd passed no sockets to. */

int sd_listen_fds(int unset_environment) {
    (void)unset_environment;
    return 0;
}

int sd_is_socket(int fd, int family, int type, int listening) {
    (void)fd;
    (void)family;
    (void)type;
    (void)listening;
    return 0;
}
