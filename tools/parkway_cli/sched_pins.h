/* sched_pins.h -- where `parkway sched load` keeps its state: its own
 * directory (PARKWAY_RUN_DIR), the lock against a second loader, the pid
 * file, and a bpffs instance of its own for the pins. */
#ifndef PARKWAY_CLI_SCHED_PINS_H
#define PARKWAY_CLI_SCHED_PINS_H

#include <stdbool.h>

/* Creates PARKWAY_RUN_DIR (0755) or accepts it only if it is a directory
 * owned by root and writable by no one else, in a parent nobody else can
 * rename it in; then takes the lock (kept until the process exits).
 * Returns the lock's fd, or -1 after printing why (another loader runs,
 * or the directory is not safe). */
int pins_lock(void);

/* pins_lock without the message when another loader holds the lock:
 * returns PINS_LOCK_HELD then (a loader is running: starting, loaded or
 * leaving). */
#define PINS_LOCK_HELD (-2)
int pins_try_lock(void);

/* Unmounts what a killed loader left, mounts a fresh bpffs (mode 0755) at
 * PARKWAY_BPFFS and creates PARKWAY_PIN_DIR in it. Needs the lock. */
bool pins_prepare(void);

/* Removes the pins, unmounts the bpffs and removes the pid file. Needs the
 * lock; harmless when there is nothing to remove. */
void pins_remove(void);

bool pins_write_pid(void);

#endif
