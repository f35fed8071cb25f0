/* SPDX-License-Identifier: MIT */
/*
 * The stats endpoint (see stats-server.h). Nothing here ever waits on a
 * client: sockets are non-blocking, the thread sleeps only in poll(), and
 * a client that does not take its snapshot within STATS_CLIENT_MS is
 * dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "stats-server.h"

#define STATS_MAX_CLIENTS  32
#define STATS_CLIENT_MS	   2000
#define STATS_SNAPSHOT_MAX (1u << 20)

struct stats_client {
	int fd;
	char *buf;
	size_t len, off;
	uint64_t deadline; /* CLOCK_MONOTONIC ms */
};

struct stats_server {
	int listen_fd;
	int wake[2]; /* a byte on wake[1] stops the thread */
	pthread_t thread;
	struct vpmu_vcpu *vcpus[STATS_MAX_VCPUS];
	unsigned int nr_vcpus;
	struct stats_client clients[STATS_MAX_CLIENTS];
	unsigned int nr_clients;
};

/* For a SIGINT/SIGTERM handler: the socket to remove (async-signal-safe unlink). */
static char stats_path[sizeof(((struct sockaddr_un *) 0)->sun_path)];
static volatile sig_atomic_t stats_path_set;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* Only a peer of our own effective uid may read the figures. */
static bool stats_peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
		return false;
	return cred.uid == geteuid();
}

/* The snapshot document, malloc'ed; NULL if it cannot be built. */
static char *stats_snapshot(struct stats_server *srv, size_t *ret_len)
{
	size_t cap = 4096, len;
	char *buf = NULL;

	for (;;) {
		char *nb = realloc(buf, cap);
		bool again = false;

		if (!nb)
			break;
		buf = nb;
		len = (size_t) snprintf(buf, cap,
					"{\"version\":1,\"vmm\":\"vpmu-vmm\",\"pid\":%ld,"
					"\"vcpus\":[",
					(long) getpid());
		for (unsigned int i = 0; i < srv->nr_vcpus && len < cap; i++) {
			struct vpmu_stats st;
			size_t n;
			int r;

			if (vpmu_stats_read(srv->vcpus[i], &st) < 0)
				continue;
			if (i)
				buf[len++] = ',';
			r = vpmu_stats_to_json(&st, i, buf + len, cap - len, &n);
			if (r == -ENOSPC) {
				again = true;
				break;
			}
			if (r < 0)
				goto fail;
			len += n;
		}
		if (!again && len + 4 <= cap) {
			memcpy(buf + len, "]}\n", 4);
			*ret_len = len + 3;
			return buf;
		}
		if (cap >= STATS_SNAPSHOT_MAX)
			break;
		cap *= 2;
	}
fail:
	free(buf);
	return NULL;
}

static void stats_drop(struct stats_server *srv, unsigned int i)
{
	close(srv->clients[i].fd);
	free(srv->clients[i].buf);
	srv->clients[i] = srv->clients[--srv->nr_clients];
}

static void stats_accept(struct stats_server *srv)
{
	/* bounded per round, so a connect storm cannot starve the clients we have */
	for (unsigned int n = 0; n < 16 && srv->nr_clients < STATS_MAX_CLIENTS; n++) {
		struct stats_client *c;
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (!stats_peer_allowed(fd)) {
			close(fd);
			continue;
		}
		c = &srv->clients[srv->nr_clients];
		c->buf = stats_snapshot(srv, &c->len);
		if (!c->buf) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->off = 0;
		c->deadline = now_ms() + STATS_CLIENT_MS;
		srv->nr_clients++;
	}
}

/* Returns false when the client is done with (sent, failed or hung up). */
static bool stats_serve(struct stats_client *c, short revents)
{
	char junk[4096];
	ssize_t n;

	if (revents & POLLIN) {
		/* a client may send anything; it is read and ignored */
		while ((n = read(c->fd, junk, sizeof(junk))) > 0)
			;
	}
	if (revents & (POLLERR | POLLNVAL))
		return false;
	if (revents & POLLOUT) {
		while (c->off < c->len) {
			n = send(c->fd, c->buf + c->off, c->len - c->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0)
				return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
			c->off += (size_t) n;
		}
		shutdown(c->fd, SHUT_WR);
		return false;
	}
	return !(revents & POLLHUP);
}

static void *stats_thread(void *data)
{
	struct stats_server *srv = data;
	struct pollfd pfd[2 + STATS_MAX_CLIENTS];

	for (;;) {
		uint64_t now = now_ms(), next = UINT64_MAX;
		unsigned int nfds = 2;
		int timeout;

		pfd[0] = (struct pollfd){ .fd = srv->wake[0], .events = POLLIN };
		/* at the client limit, new peers wait in the backlog */
		pfd[1] = (struct pollfd){ .fd = srv->nr_clients < STATS_MAX_CLIENTS ? srv->listen_fd
										    : -1,
					  .events = POLLIN };
		for (unsigned int i = 0; i < srv->nr_clients; i++) {
			pfd[nfds++] = (struct pollfd){ .fd = srv->clients[i].fd,
						       .events = POLLIN | POLLOUT };
			if (srv->clients[i].deadline < next)
				next = srv->clients[i].deadline;
		}
		timeout = next == UINT64_MAX ? -1 : next <= now ? 0 : (int) (next - now);
		if (poll(pfd, nfds, timeout) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			break;
		now = now_ms();
		/* walk backwards: stats_drop moves the last client into slot i */
		for (unsigned int i = nfds - 2; i-- > 0;) {
			if (!stats_serve(&srv->clients[i], pfd[2 + i].revents) ||
			    srv->clients[i].deadline <= now)
				stats_drop(srv, i);
		}
		if (pfd[1].revents & POLLIN)
			stats_accept(srv);
	}
	while (srv->nr_clients)
		stats_drop(srv, srv->nr_clients - 1);
	return NULL;
}

/* The directory part of `path` (".", "/" or the text before the last slash). */
static void dir_of(const char *path, char *ret, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(ret, size, ".");
	else if (slash == path)
		snprintf(ret, size, "/");
	else
		snprintf(ret, size, "%.*s", (int) (slash - path), path);
}

/*
 * Whether the socket's directory is one where another user may create,
 * remove or rename entries: writable by group or others, or owned by
 * another user (root aside, who can do anything anyway). *ret_sticky:
 * it is, but with the sticky bit (/tmp): others cannot remove or rename
 * what is ours there.
 */
static int check_dir(const char *path, bool *ret_shared, bool *ret_sticky, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *) 0)->sun_path)];
	struct stat d;
	uid_t me = geteuid();

	dir_of(path, dir, sizeof(dir));
	if (stat(dir, &d) < 0) {
		snprintf(err, errlen, "--stats %s: directory %s: %s", path, dir, strerror(errno));
		return -errno;
	}
	*ret_shared = (d.st_mode & (S_IWGRP | S_IWOTH)) || (d.st_uid != me && d.st_uid != 0);
	*ret_sticky = d.st_mode & S_ISVTX;
	if (*ret_shared && !*ret_sticky) {
		snprintf(err, errlen,
			 "--stats %s: other users can write to directory %s (mode %04o, owner "
			 "uid %u) and it is not sticky: one of them could swap the socket; use "
			 "a directory only you can write (e.g. $XDG_RUNTIME_DIR)",
			 path, dir, (unsigned int) (d.st_mode & 07777), (unsigned int) d.st_uid);
		return -EPERM;
	}
	return 0;
}

/* Bind `path`, replacing a stale socket nobody listens on. One line in `err` on failure. */
static int stats_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat stb;
	bool shared, sticky;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "--stats %s: path too long (at most %zu bytes)", path,
			 sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	if (!path[0]) {
		snprintf(err, errlen, "--stats: an empty path: give a socket path");
		return -EINVAL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	r = check_dir(path, &shared, &sticky, err, errlen);
	if (r < 0)
		return r;
	if (lstat(path, &stb) == 0) {
		int probe;

		if (!S_ISSOCK(stb.st_mode)) {
			snprintf(err, errlen,
				 "--stats %s: exists and is not a socket: remove it or pick "
				 "another path",
				 path);
			return -EEXIST;
		}
		/*
		 * In a shared sticky directory only a socket of ours may be
		 * replaced: nobody else can remove or rename it between this
		 * check and the unlink, and another user's file is never ours
		 * to remove (root's neither).
		 */
		if (shared && stb.st_uid != geteuid()) {
			snprintf(err, errlen,
				 "--stats %s: a socket of uid %u in a directory other users "
				 "share: not this user's to replace; pick another path",
				 path, (unsigned int) stb.st_uid);
			return -EPERM;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe < 0) {
			snprintf(err, errlen, "--stats %s: socket: %s", path, strerror(errno));
			return -errno;
		}
		r = connect(probe, (struct sockaddr *) &sa, sizeof(sa));
		close(probe);
		if (r == 0) {
			snprintf(err, errlen,
				 "--stats %s: another process serves this socket: pick "
				 "another path",
				 path);
			return -EADDRINUSE;
		}
		unlink(path); /* stale: left by a VMM that was killed */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "--stats %s: socket: %s", path, strerror(errno));
		return -errno;
	}
	/*
	 * Mode 0600 from the start, with no window where another uid could
	 * connect: Linux creates the socket file with the socket's own mode
	 * less the umask, and that mode is what fchmod() sets here.
	 */
	if (fchmod(fd, 0600) < 0) {
		r = -errno;
		snprintf(err, errlen, "--stats %s: fchmod: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		r = -errno;
		snprintf(err, errlen, "--stats %s: cannot listen: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	/* ours from here: a signal handler may remove it */
	memcpy(stats_path, path, strlen(path) + 1);
	stats_path_set = 1;
	if (listen(fd, 64) < 0) {
		r = -errno;
		snprintf(err, errlen, "--stats %s: cannot listen: %s", path, strerror(errno));
		stats_server_unlink_path();
		close(fd);
		return r;
	}
	return fd;
}

void stats_server_unlink_path(void)
{
	if (stats_path_set) {
		stats_path_set = 0;
		unlink(stats_path);
	}
}

int stats_server_start(const char *path, struct vpmu_vcpu *const *vcpus, unsigned int nr,
		       struct stats_server **ret, char *err, size_t errlen)
{
	struct stats_server *srv;
	sigset_t all, old;
	int r;

	if (nr > STATS_MAX_VCPUS) {
		snprintf(err, errlen, "--stats %s: %u vCPUs, the server takes up to %u", path, nr,
			 STATS_MAX_VCPUS);
		return -E2BIG;
	}
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		snprintf(err, errlen, "--stats %s: out of memory", path);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < nr; i++)
		srv->vcpus[i] = vcpus[i];
	srv->nr_vcpus = nr;
	srv->listen_fd = stats_listen(path, err, errlen);
	if (srv->listen_fd < 0) {
		r = srv->listen_fd;
		free(srv);
		return r;
	}
	if (pipe2(srv->wake, O_CLOEXEC) < 0) {
		r = -errno;
		snprintf(err, errlen, "--stats %s: pipe: %s", path, strerror(errno));
		goto fail;
	}
	/* no signal for this thread: they go to the vCPU threads and the main thread */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = -pthread_create(&srv->thread, NULL, stats_thread, srv);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		snprintf(err, errlen, "--stats %s: cannot start the server thread: %s", path,
			 strerror(-r));
		close(srv->wake[0]);
		close(srv->wake[1]);
		goto fail;
	}
	*ret = srv;
	return 0;
fail:
	close(srv->listen_fd);
	stats_server_unlink_path();
	free(srv);
	return r;
}

void stats_server_stop(struct stats_server *srv)
{
	char c = 0;

	if (!srv)
		return;
	while (write(srv->wake[1], &c, 1) < 0 && errno == EINTR)
		;
	pthread_join(srv->thread, NULL);
	close(srv->wake[0]);
	close(srv->wake[1]);
	close(srv->listen_fd);
	stats_server_unlink_path();
	free(srv);
}
