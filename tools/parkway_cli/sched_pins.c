/* sched_pins.c -- see sched_pins.h.
 *
 * Why a bpffs of our own: pinning into the shared /sys/fs/bpf means
 * trusting whoever may write there (its mode varies: systemd mounts it
 * 0700, a bare `mount -t bpf` gives 1777) and checking the owner of every
 * path component. A fresh instance mounted on a root-owned directory in
 * /run has no entry we did not make. */
#include "sched_pins.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sched_common.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

/* A directory is safe when root owns it and no one else may write to it. */
static bool safe_dir(const char *path, bool must_exist)
{
	struct stat st;

	if (lstat(path, &st) != 0) {
		if (!must_exist && errno == ENOENT)
			return true;
		fprintf(stderr, "parkway: cannot stat %s: %s\n", path, strerror(errno));
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "parkway: %s is not a directory; remove it and load again\n", path);
		return false;
	}
	if (st.st_uid != 0) {
		fprintf(stderr, "parkway: %s belongs to uid %u, not root: another user created it, "
				"which would let them replace the scheduler's pins; remove it and load again\n",
			path, (unsigned)st.st_uid);
		return false;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		fprintf(stderr, "parkway: %s is writable by group or others (mode %04o); "
				"remove it and load again\n", path, (unsigned)(st.st_mode & 07777));
		return false;
	}
	return true;
}

/* The parent (/run): others may not rename entries of root in it, which
 * holds when it is not writable by them or has the sticky bit. */
static bool safe_parent(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "parkway: cannot stat %s: %s\n", path, strerror(errno));
		return false;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		fprintf(stderr, "parkway: %s is writable by others without the sticky bit (mode %04o): "
				"they could replace %s\n", path, (unsigned)(st.st_mode & 07777), PARKWAY_RUN_DIR);
		return false;
	}
	return true;
}

static int lock_holder(void)
{
	char buf[32] = "";
	FILE *f = fopen(PARKWAY_PID_FILE, "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	return atoi(buf);
}

int pins_try_lock(void)
{
	int fd;

	if (!safe_parent("/run") || !safe_dir(PARKWAY_RUN_DIR, false))
		return -1;
	if (mkdir(PARKWAY_RUN_DIR, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "parkway: cannot create %s: %s\n", PARKWAY_RUN_DIR, strerror(errno));
		return -1;
	}
	/* Again: between the check and mkdir someone may have made it. */
	if (!safe_dir(PARKWAY_RUN_DIR, true))
		return -1;
	fd = open(PARKWAY_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "parkway: cannot open %s: %s\n", PARKWAY_LOCK_FILE, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int err = errno;

		close(fd);
		if (err == EWOULDBLOCK)
			return PINS_LOCK_HELD;
		fprintf(stderr, "parkway: cannot lock %s: %s\n", PARKWAY_LOCK_FILE, strerror(err));
		return -1;
	}
	return fd;
}

int pins_lock(void)
{
	int fd = pins_try_lock();
	int pid;
	char who[48] = "starting: no pid file yet";

	if (fd != PINS_LOCK_HELD)
		return fd;
	pid = lock_holder();
	if (pid > 0)
		snprintf(who, sizeof(who), "pid %d", pid);
	fprintf(stderr, "parkway: the parkway scheduler is already loaded or being loaded: "
			"another `parkway sched load` (%s) holds %s; `parkway sched unload` "
			"first\n", who, PARKWAY_LOCK_FILE);
	return -1;
}

static bool is_bpffs(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

static void unmount_all(void)
{
	/* A loader killed with -9 leaves its mount (and the maps it pins). */
	for (int i = 0; i < 64 && is_bpffs(PARKWAY_BPFFS); i++)
		if (umount2(PARKWAY_BPFFS, MNT_DETACH) != 0)
			break;
}

bool pins_prepare(void)
{
	/* Everyone must reach the registration pin, whatever the umask the
	 * directory was made under (root's is often 027 or 077) or the mode it
	 * was left with: safe_dir has checked that only root may write it. */
	if (chmod(PARKWAY_RUN_DIR, 0755) != 0) {
		fprintf(stderr, "parkway: cannot make %s mode 0755: %s\n", PARKWAY_RUN_DIR, strerror(errno));
		return false;
	}
	unmount_all();
	if (is_bpffs(PARKWAY_BPFFS)) {
		fprintf(stderr, "parkway: cannot unmount the stale %s: %s\n", PARKWAY_BPFFS, strerror(errno));
		return false;
	}
	if (mkdir(PARKWAY_BPFFS, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "parkway: cannot create %s: %s\n", PARKWAY_BPFFS, strerror(errno));
		return false;
	}
	if (!safe_dir(PARKWAY_BPFFS, true))
		return false;
	if (mount("bpf", PARKWAY_BPFFS, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755") != 0) {
		fprintf(stderr, "parkway: cannot mount a bpf filesystem on %s: %s\n", PARKWAY_BPFFS,
			strerror(errno));
		return false;
	}
	if (mkdir(PARKWAY_PIN_DIR, 0755) != 0 || chmod(PARKWAY_PIN_DIR, 0755) != 0) {
		fprintf(stderr, "parkway: cannot create %s: %s\n", PARKWAY_PIN_DIR, strerror(errno));
		pins_remove();
		return false;
	}
	return true;
}

void pins_remove(void)
{
	static const char *pins[] = { PARKWAY_PIN_REGISTER, PARKWAY_PIN_STATS, PARKWAY_PIN_PROCS,
				      PARKWAY_PIN_RUNTIME, PARKWAY_PIN_EVENTS };

	if (is_bpffs(PARKWAY_BPFFS)) {
		for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
			unlink(pins[i]);
		rmdir(PARKWAY_PIN_DIR);
	}
	unmount_all();
	rmdir(PARKWAY_BPFFS);
	unlink(PARKWAY_PID_FILE);
}

bool pins_write_pid(void)
{
	char buf[32];
	int fd = open(PARKWAY_PID_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());

	/* fchmod: readable by everyone (`parkway sched status`), whatever the umask. */
	if (fd < 0 || fchmod(fd, 0644) != 0 || write(fd, buf, (size_t)n) != n) {
		fprintf(stderr, "parkway: cannot write %s: %s\n", PARKWAY_PID_FILE, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	return true;
}
