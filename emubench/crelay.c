/* The physical floor of emubench overhead: the Python relay of emubench.nicd_port written in C
 * (same three hops: Unix SEQPACKET, UDP, Unix SEQPACKET; fragments of MTU bytes behind an 8-byte
 * header of message length and offset; blocking sockets; no reliability), compiled by the
 * system compiler at benchmark time by emubench/crelay.py.
 *
 *   crelay relay UNIX_PATH         binds UDP on 127.0.0.1, prints its port, reads the peer's
 *                                  port from stdin, accepts one host on UNIX_PATH, relays
 *                                  until the host hangs up
 *   crelay host UNIX_PATH N SIZE ping|echo
 *                                  ping: N+20 round trips of SIZE bytes, prints the one-way
 *                                  time of the last N in microseconds, one per line; echo:
 *                                  sends back every message it receives, N+20 times
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MTU 4096
#define MAX_MSG (1 << 20)
#define WARMUP 20

static void die(const char *what) {
    perror(what);
    exit(1);
}

static int unix_socket(const char *path, struct sockaddr_un *addr) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0) die("socket");
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    strncpy(addr->sun_path, path, sizeof addr->sun_path - 1);
    return fd;
}

static int relay(const char *path) {
    int udp = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET}, peer = {.sin_family = AF_INET};
    socklen_t len = sizeof me;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (udp < 0 || bind(udp, (struct sockaddr *)&me, sizeof me) < 0) die("udp");
    if (getsockname(udp, (struct sockaddr *)&me, &len) < 0) die("getsockname");
    printf("%d\n", ntohs(me.sin_port));
    fflush(stdout);
    int port;
    if (scanf("%d", &port) != 1) die("peer port");
    peer.sin_port = htons((uint16_t)port);
    struct sockaddr_un addr;
    int listener = unix_socket(path, &addr);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(listener, 1) < 0)
        die("listen");
    printf("ready\n");
    fflush(stdout);
    int conn = accept(listener, NULL, NULL);
    if (conn < 0) die("accept");
    static unsigned char msg[MAX_MSG], packet[8 + MTU], whole[MAX_MSG];
    struct pollfd fds[2] = {{.fd = conn, .events = POLLIN}, {.fd = udp, .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) die("poll");
        if (fds[0].revents) {
            ssize_t n = recv(conn, msg, sizeof msg, 0);
            if (n <= 0) return 0;
            uint32_t total = (uint32_t)n, off = 0;
            do {
                uint32_t part = total - off < MTU ? total - off : MTU;
                uint32_t header[2] = {htonl(total), htonl(off)};
                memcpy(packet, header, 8);
                memcpy(packet + 8, msg + off, part);
                sendto(udp, packet, 8 + part, 0, (struct sockaddr *)&peer, sizeof peer);
                off += part;
            } while (off < total);
        }
        if (fds[1].revents) {
            ssize_t n = recv(udp, packet, sizeof packet, 0);
            if (n < 8) continue;
            uint32_t header[2];
            memcpy(header, packet, 8);
            uint32_t total = ntohl(header[0]), off = ntohl(header[1]);
            uint32_t part = (uint32_t)n - 8;
            if (total > MAX_MSG || off + part > total) continue;
            memcpy(whole + off, packet + 8, part);
            if (off + part >= total) {
                send(conn, whole, total, 0);
            }
        }
    }
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int host(const char *path, long n, long size, int echo) {
    struct sockaddr_un addr;
    int fd = unix_socket(path, &addr);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
    int sndbuf = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    static unsigned char buf[MAX_MSG];
    if (size > MAX_MSG) size = MAX_MSG;
    memset(buf, 'x', (size_t)size);
    for (long i = 0; i < n + WARMUP; i++) {
        if (echo) {
            ssize_t got = recv(fd, buf, sizeof buf, 0);
            if (got < 0) die("recv");
            send(fd, buf, (size_t)got, 0);
            continue;
        }
        double t0 = now_us();
        send(fd, buf, (size_t)size, 0);
        if (recv(fd, buf, sizeof buf, 0) < 0) die("recv");
        if (i >= WARMUP) printf("%.3f\n", (now_us() - t0) / 2);
    }
    fflush(stdout);
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "relay") == 0) return relay(argv[2]);
    if (argc == 6 && strcmp(argv[1], "host") == 0)
        return host(argv[2], atol(argv[3]), atol(argv[4]), strcmp(argv[5], "echo") == 0);
    fprintf(stderr, "usage: crelay relay PATH | crelay host PATH N SIZE ping|echo\n");
    return 2;
}
