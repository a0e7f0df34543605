#ifndef CLOOP_SHIM_H
#define CLOOP_SHIM_H

// The event loop's epoll set, wake-up and signal descriptors (not in Swift's Glibc module).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <errno.h>
#include <unistd.h>

// recvmmsg(2) and struct mmsghdr are declared only under _GNU_SOURCE, which
// Swift's Glibc module is built without: the same layout, and the system call
// by number. Receives up to `count` datagrams without waiting; -1 and errno
// (EAGAIN: none waiting) if none was received.
struct cloop_datagram_header { struct msghdr header; unsigned int length; };
static inline int cloop_receive_datagrams(int fd, struct cloop_datagram_header *entries, unsigned int count) {
    return (int)syscall(SYS_recvmmsg, fd, entries, count, MSG_DONTWAIT, (void *)0);
}

// accept4(2) is declared only under _GNU_SOURCE too: a connection taken
// non-blocking and close-on-exec in one call. -1 and errno (EAGAIN: none waiting).
static inline int cloop_accept(int fd) {
    return (int)syscall(SYS_accept4, fd, (void *)0, (void *)0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

// The kernel's Bluetooth management channel (HCI_CHANNEL_CONTROL of a raw
// HCI socket, for no adapter in particular: HCI_DEV_NONE), non-blocking and
// close-on-exec. -1 and errno: EAFNOSUPPORT where the kernel has no Bluetooth.
struct cloop_hci_address { sa_family_t family; unsigned short device; unsigned short channel; };
static inline int cloop_open_bluetooth_management(void) {
    int fd = socket(31 /* AF_BLUETOOTH */, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 1 /* BTPROTO_HCI */);
    if (fd < 0) return -1;
    struct cloop_hci_address address = { 31, 0xFFFF, 3 };
    if (bind(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        int failure = errno;
        close(fd);
        errno = failure;
        return -1;
    }
    return fd;
}

#endif
