#include "CTestSupport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

int test_support_free_loopback_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    int result;
    if (bind(fd, (struct sockaddr *)&address, length) == 0 &&
        getsockname(fd, (struct sockaddr *)&address, &length) == 0) {
        result = ntohs(address.sin_port);
    } else {
        result = -errno;
    }
    close(fd);
    return result;
}
