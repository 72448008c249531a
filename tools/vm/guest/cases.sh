#!/bin/sh
# cases.sh -- the sched_ext test cases, run inside the VM as root (busybox
# sh). Each case prints "VMTEST <n> <name>: PASS|FAIL|SKIP <detail>" and
# "VMLOG <n> ..." lines for the evidence. `parkway_tests=1,3` on the kernel
# command line runs only those cases.

SCX=/sys/kernel/sched_ext
only=$(sed -n 's/.*parkway_tests=\([0-9,]*\).*/\1/p' /proc/cmdline)

log() { echo "VMLOG $cur $*"; }
result() { echo "VMTEST $cur $name: $1 $2"; }
want() { [ -z "$only" ] || echo ",$only," | grep -q ",$1,"; }

state() { cat $SCX/state 2>/dev/null; }

# wait_for N CMD...: retry CMD every 0.2 s for up to N seconds.
wait_for() {
	n=$(( $1 * 5 )); shift
	while [ $n -gt 0 ]; do
		"$@" && return 0
		sleep 0.2; n=$((n - 1))
	done
	return 1
}
is_state() { [ "$(state)" = "$1" ]; }
loader_gone() { ! kill -0 "$1" 2>/dev/null; }

# start_loader LOG ARGS...: background `parkway sched load`; sets $lpid.
start_loader() {
	llog=$1; shift
	parkway sched load "$@" >"$llog" 2>&1 &
	lpid=$!
	wait_for 30 is_state enabled
}

# stop_loader: unload and wait (kill -9 after 15 s); returns the loader's
# exit status.
stop_loader() {
	parkway sched unload >/tmp/unload.log 2>&1
	wait_for 15 loader_gone "$lpid" || { log "loader $lpid did not exit: kill -9"; kill -9 "$lpid"; }
	wait "$lpid"
}

# up_then_status LOG...: wait (up to 20 s) until each program LOG says
# "runtime up", then snapshot `parkway sched status` into /tmp/status.log.
up_then_status() {
	for f in "$@"; do wait_for 20 grep -q '^runtime up' "$f" || log "no 'runtime up' in $f"; done
	sleep 0.3
	parkway sched status >/tmp/status.log 2>&1
}
workers_of() { sed -n "s/^program $1 .* workers=\([0-9]*\).*/\1/p" /tmp/status.log; }

stat_of() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" /tmp/status.log | head -n 1; }

# ---------------------------------------------------------------- case 1
case1() {
	if ! start_loader /tmp/l1.log --stats 1; then
		result FAIL "state never became enabled (is $(state)); loader log: $(tail -n 3 /tmp/l1.log)"
		kill "$lpid" 2>/dev/null; wait "$lpid"; return
	fi
	ops=$(cat $SCX/root/ops)
	parkway sched status >/tmp/status.log 2>&1
	log "after load: state=$(state) root/ops=$ops; status: $(head -n 2 /tmp/status.log | tr '\n' ' ')"
	sleep 2.5
	stop_loader; rc=$?
	st=$(state)
	nstats=$(grep -c '^parkway: dispatch=' /tmp/l1.log)
	log "after unload: state=$st loader_rc=$rc; $nstats stats lines, e.g. $(grep -m 1 '^parkway: dispatch=' /tmp/l1.log); $(tail -n 1 /tmp/l1.log)"
	if [ "$ops" != parkway ]; then result FAIL "root/ops is '$ops', not parkway"
	elif ! grep -q 'state enabled, ops parkway' /tmp/status.log; then result FAIL "status did not report ours: $(cat /tmp/status.log)"
	elif [ "$st" != disabled ]; then result FAIL "state after unload is '$st'"
	elif [ $rc -ne 0 ]; then result FAIL "loader exited $rc"
	elif [ "$nstats" -lt 1 ]; then result FAIL "--stats 1 printed no stats line"
	else result PASS "enabled with ops=parkway, then disabled (loader exit 0)"
	fi
}

# ---------------------------------------------------------------- case 2
case2() {
	if ! start_loader /tmp/l2.log; then result FAIL "load failed: $(tail -n 3 /tmp/l2.log)"; return; fi
	parkway sched status >/tmp/status.log 2>&1
	runs0=$(stat_of worker_runs)
	bad=""
	# 2a: the publisher itself (SchedExtLink) with plain threads, two
	# processes claiming slots at once.
	pw_linkprobe 3 3 >/tmp/probe.log 2>&1 &
	ppid=$!
	pw_linkprobe 2 3 >/tmp/probe2.log 2>&1 &
	ppid2=$!
	sleep 1.5
	parkway sched status >/tmp/status.log 2>&1
	wk=$(sed -n "s/^program $ppid .* workers=\([0-9]*\).*/\1/p" /tmp/status.log)
	wk2=$(sed -n "s/^program $ppid2 .* workers=\([0-9]*\).*/\1/p" /tmp/status.log)
	wait $ppid; prc=$?
	wait $ppid2; prc2=$?
	log "linkprobes $ppid/$ppid2: workers in map while running=${wk:-none}/${wk2:-none}, exit $prc/$prc2: $(tail -n 1 /tmp/probe.log)"
	[ "$wk" = 3 ] && [ "$wk2" = 2 ] || bad="$bad linkprobe-not-registered(${wk:-none}/${wk2:-none})"
	[ $prc -eq 0 ] && [ $prc2 -eq 0 ] || bad="$bad linkprobe-exit-$prc/$prc2"
	parkway sched status >/tmp/status.log 2>&1
	promo=$(stat_of busy_promote)
	log "after the probes: $(grep '^counters' /tmp/status.log)"
	# 5 spinning threads on 2 CPUs: busy ones are preempted, so promoted.
	[ "${promo:-0}" -gt 0 ] || bad="$bad no-busy-promotion"
	# 2b': the policy itself. Two threads stay Busy and two Searching, all
	# spinning, on 2 CPUs: a per-thread fair scheduler gives the busy pair
	# half the CPU; ours must give them clearly more (BWS).
	pw_linkprobe bws 2 2 3 >/tmp/bws.log 2>&1; brc=$?
	share=$(sed -n 's/.*busy_share=\([0-9]*\)%.*/\1/p' /tmp/bws.log)
	log "2 busy + 2 searching spinners: $(tail -n 1 /tmp/bws.log) (exit $brc)"
	[ "${share:-0}" -ge 70 ] || bad="$bad busy-share-${share:-none}%-under-70%"
	# 2c: kill -9 a registered process: the scheduler frees its slots.
	freed0=$(stat_of slot_freed)
	pw_linkprobe 2 30 >/tmp/probe3.log 2>&1 &
	ppid3=$!
	sleep 1
	kill -9 $ppid3; wait $ppid3 2>/dev/null
	sleep 0.5
	parkway sched status >/tmp/status.log 2>&1
	freed1=$(stat_of slot_freed)
	left=$(sed -n "s/^program $ppid3 .* workers=\([0-9]*\).*/\1/p" /tmp/status.log)
	log "kill -9 of probe $ppid3: slot_freed ${freed0}->${freed1}, its workers left in map: ${left:-0}"
	[ $(( ${freed1:-0} - ${freed0:-0} )) -eq 2 ] && [ "${left:-0}" = 0 ] || bad="$bad slots-not-reclaimed"
	# 2b: a parkway program through the runtime.
	if [ -x /bin/pw_vmprog ]; then
		pw_vmprog --workers 2 --seconds 3 >/tmp/prog.log 2>&1 &
		gpid=$!
		up_then_status /tmp/prog.log
		wk=$(workers_of $gpid)
		[ "$wk" = 2 ] || log "status while pw_vmprog ran: $(tr '\n' '|' </tmp/status.log)"
		wait $gpid; grc=$?
		log "pw_vmprog pid $gpid: workers in map while running=${wk:-none}, exit $grc: $(tail -n 1 /tmp/prog.log)"
		[ "$wk" = 2 ] || bad="$bad runtime-workers-not-registered(${wk:-none})"
		{ [ $grc -eq 0 ] && grep -q '^result ok' /tmp/prog.log; } || bad="$bad program-result($grc)"
	else
		bad="$bad pw_vmprog-missing"
	fi
	# 2d: parked workers cost nothing: an idle program's workers show as
	# parked and its CPU time stands still.
	if [ -x /bin/pw_vmprog ]; then
		pw_vmprog --workers 2 --idle 4 --seconds 1 >/tmp/idle.log 2>&1 &
		ipid=$!
		up_then_status /tmp/idle.log
		sleep 0.5
		parkway sched status >/tmp/status.log 2>&1
		line0=$(grep "^program $ipid " /tmp/status.log)
		sleep 1.5
		parkway sched status >/tmp/status.log 2>&1
		line1=$(grep "^program $ipid " /tmp/status.log)
		wait $ipid
		c0=$(echo "$line0" | sed -n 's/.* cpu_ms=\([0-9]*\).*/\1/p')
		c1=$(echo "$line1" | sed -n 's/.* cpu_ms=\([0-9]*\).*/\1/p')
		log "idle program $ipid: [$line0] then 1.5 s later [$line1]"
		echo "$line1" | grep -q 'workers=2 (busy 0, searching 0, parked 2' || bad="$bad idle-workers-not-parked"
		[ -n "$c0" ] && [ -n "$c1" ] && [ $((c1 - c0)) -le 20 ] || bad="$bad idle-program-used-cpu(${c0}->${c1}ms)"
	fi
	parkway sched status >/tmp/status.log 2>&1
	runs1=$(stat_of worker_runs)
	log "counters: $(grep '^counters' /tmp/status.log)"
	[ "${runs1:-0}" -gt "${runs0:-0}" ] || bad="$bad worker_runs-did-not-move(${runs0}->${runs1})"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "workers registered, worker_runs ${runs0}->${runs1}, results correct"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 3
# cpu_ms_of PID: user+system CPU time from /proc (USER_HZ is 100).
cpu_ms_of() { set -- $(cut -d' ' -f14,15 /proc/$1/stat); echo $(( ($1 + $2) * 10 )); }

# mix_run SECONDS: `pw_linkprobe bws 1 1 SECONDS` and a plain spinner side
# by side; sets mix_share (the spinner's % of both), mix_busy (busy % inside
# the probe).
mix_run() {
	sh -c 'while :; do :; done' & qpid=$!
	q0=$(cpu_ms_of $qpid)
	pw_linkprobe bws 1 1 "$1" >/tmp/mix.log 2>&1
	q1=$(cpu_ms_of $qpid)
	kill $qpid; wait $qpid 2>/dev/null
	pb=$(sed -n 's/.*busy_ms=\([0-9]*\).*/\1/p' /tmp/mix.log)
	ps=$(sed -n 's/.*searching_ms=\([0-9]*\).*/\1/p' /tmp/mix.log)
	mix_busy=$(sed -n 's/.*busy_share=\([0-9]*\)%.*/\1/p' /tmp/mix.log)
	qms=$((q1 - q0))
	mix_share=$(( qms * 100 / (qms + ${pb:-0} + ${ps:-0} + 1) ))
	mix_line="probe busy ${pb:-?} ms + searching ${ps:-?} ms (busy ${mix_busy:-?}%), plain spinner ${qms} ms (${mix_share}% of all)"
}

# cpu_ratio PID: our map's cpu_ms for PID over the program's own cpu_ms, x100.
case3() {
	if ! [ -x /bin/pw_vmprog ]; then result FAIL "pw_vmprog missing"; return; fi
	if ! start_loader /tmp/l3.log; then result FAIL "load failed: $(tail -n 3 /tmp/l3.log)"; return; fi
	# --linger 5: the scheduler drops a program's record at its exit.
	pw_vmprog --workers 2 --seconds 4 --linger 5 >/tmp/a.log 2>&1 & apid=$!
	pw_vmprog --workers 1 --seconds 4 --linger 5 >/tmp/b.log 2>&1 & bpid=$!
	up_then_status /tmp/a.log /tmp/b.log
	wa=$(workers_of $apid)
	wb=$(workers_of $bpid)
	[ "$wa" = 2 ] && [ "$wb" = 1 ] || log "status while both ran: $(tr '\n' '|' </tmp/status.log)"
	wait_for 30 grep -q '^result' /tmp/a.log
	wait_for 30 grep -q '^result' /tmp/b.log
	parkway sched status >/tmp/status.log 2>&1
	wait $apid; arc=$?
	wait $bpid; brc=$?
	bad=""
	# 3b: a program with 1 busy + 1 searching spinner against a plain
	# spinning process. Per program, each should get about one CPU (per
	# thread, the plain one would get a third), and inside the first the
	# busy thread should get most.
	mix_run 4
	log "1 busy + 1 searching worker vs a plain spinner: $mix_line"
	[ "${mix_share:-0}" -ge 40 ] && [ "${mix_share:-0}" -le 60 ] || bad="$bad other-program-share-${mix_share:-none}%"
	[ "${mix_busy:-0}" -ge 70 ] || bad="$bad busy-share-in-program-${mix_busy:-none}%"
	stop_loader || bad="$bad loader-exit-$?(ejected?)"
	log "registered workers while both ran: A ${wa:-none}, B ${wb:-none}"
	[ "$wa" = 2 ] && [ "$wb" = 1 ] || bad="$bad not-registered(${wa:-none}/${wb:-none})"
	for p in "a $apid $arc" "b $bpid $brc"; do
		set -- $p
		own=$(sed -n 's/.* cpu_ms=\([0-9]*\).*/\1/p' /tmp/$1.log | tail -n 1)
		map=$(sed -n "s/^program $2 .* cpu_ms=\([0-9]*\).*/\1/p" /tmp/status.log)
		log "program $1 (pid $2, exit $3): own cpu_ms=${own:-?} scheduler cpu_ms=${map:-?}; $(grep '^result' /tmp/$1.log)"
		{ [ "$3" -eq 0 ] && grep -q '^result ok' /tmp/$1.log; } || bad="$bad $1-result"
		if [ -z "$own" ] || [ -z "$map" ] || [ "$own" -eq 0 ]; then
			bad="$bad $1-no-cpu-figure"
		elif [ $((map * 100 / own)) -lt 50 ] || [ $((map * 100 / own)) -gt 200 ]; then
			bad="$bad $1-accounting-off(${map}ms-vs-${own}ms)"
		fi
		eval "cpu_$1=${map:-0}"
	done
	log "CPU received under parkway: A (2 workers) ${cpu_a} ms, B (1 worker) ${cpu_b} ms"
	grep -E "^program ($apid|$bpid) " /tmp/status.log | while read -r l; do log "  status: $l"; done
	# For contrast (logged, not judged): the same pair under the default
	# scheduler, which shares per thread.
	pw_vmprog --workers 2 --seconds 2 >/tmp/a0.log 2>&1 & apid=$!
	pw_vmprog --workers 1 --seconds 2 >/tmp/b0.log 2>&1 & bpid=$!
	wait $apid; wait $bpid
	mix_run 2
	log "default scheduler, 1 busy + 1 searching vs a plain spinner: $mix_line"
	log "same pair, default scheduler: A own cpu_ms=$(sed -n 's/.* cpu_ms=\([0-9]*\).*/\1/p' /tmp/a0.log) B own cpu_ms=$(sed -n 's/.* cpu_ms=\([0-9]*\).*/\1/p' /tmp/b0.log)"
	if [ -z "$bad" ]; then result PASS "both correct; CPU A(2w)=${cpu_a}ms B(1w)=${cpu_b}ms (TCG: not a performance figure)"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 4
case4() {
	if ! start_loader /tmp/l4.log; then result FAIL "load failed: $(tail -n 3 /tmp/l4.log)"; return; fi
	kill -9 $lpid
	wait $lpid 2>/dev/null
	if ! wait_for 20 is_state disabled; then result FAIL "state stayed '$(state)' after kill -9"; return; fi
	# Nothing hangs: processes still run, and a new load works (stale pins).
	if ! timeout 20 sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; then
		result FAIL "a shell loop did not finish in 20 s after the fallback"; return
	fi
	if ! start_loader /tmp/l4b.log; then result FAIL "reload after kill -9 failed: $(tail -n 3 /tmp/l4b.log)"; return; fi
	# This time leave with SIGINT (Ctrl-C), not `parkway sched unload`.
	kill -INT $lpid
	wait_for 15 loader_gone $lpid || kill -9 $lpid
	wait $lpid; rc=$?
	log "after kill -9: disabled; reload, then SIGINT: exit $rc, state $(state), $(tail -n 1 /tmp/l4b.log)"
	if [ $rc -eq 0 ] && is_state disabled && grep -q 'scheduler unloaded' /tmp/l4b.log; then
		result PASS "fell back to the default scheduler; reload works; SIGINT unloads cleanly"
	else result FAIL "reload/SIGINT after kill -9: exit $rc, state $(state)"; fi
}

# ---------------------------------------------------------------- case 5
case5() {
	cp /bin/busybox /tmp/busybox-stall
	if ! start_loader /tmp/l5.log --debug-watchdog-ms 5000 --debug-stall-comm busybox-stall; then
		result FAIL "load failed: $(tail -n 3 /tmp/l5.log)"; return
	fi
	/tmp/busybox-stall sh -c 'while :; do :; done' &
	spid=$!
	if ! wait_for 60 loader_gone $lpid; then
		result FAIL "not ejected within 60 s (state $(state))"; kill -9 $spid; stop_loader; return
	fi
	wait $lpid; rc=$?
	kill -9 $spid 2>/dev/null
	log "loader exit $rc; $(grep -E 'reason|kind|message' /tmp/l5.log | tr '\n' ' ')"
	if [ $rc -ne 1 ]; then result FAIL "loader exit $rc, want 1"
	elif ! grep -q 'runnable task stall' /tmp/l5.log; then result FAIL "no stall reason: $(tail -n 3 /tmp/l5.log)"
	elif ! is_state disabled; then result FAIL "state $(state) after ejection"
	else result PASS "ejected by the watchdog; tool reported it and exited 1"
	fi
}

# ---------------------------------------------------------------- case 6
case6() {
	bad=""
	# Not root.
	# Full path: busybox sh prefers its own (smaller) setpriv applet.
	/bin/setpriv --reuid=65534 --regid=65534 --clear-groups parkway sched load >/tmp/e1.log 2>&1; rc=$?
	log "as uid 65534: exit $rc: $(head -n 1 /tmp/e1.log)"
	{ [ $rc -eq 3 ] && grep -q 'must be run as root' /tmp/e1.log; } || bad="$bad not-root"
	# Another scheduler already loaded: name it.
	if start_loader /tmp/l6.log; then
		parkway sched load >/tmp/e2.log 2>&1; rc=$?
		log "second load: exit $rc: $(head -n 1 /tmp/e2.log)"
		{ [ $rc -eq 3 ] && grep -q 'already loaded' /tmp/e2.log && grep -q parkway /tmp/e2.log; } || bad="$bad already-loaded"
		stop_loader || bad="$bad unload"
	else
		bad="$bad load"
	fi
	# Verifier rejection: short hint without -v, the log's tail with -v.
	parkway sched load --debug-bad-verifier >/tmp/e3.log 2>&1; rc=$?
	log "bad object: exit $rc: $(tr '\n' ' ' </tmp/e3.log)"
	{ [ $rc -eq 1 ] && grep -q "verifier rejected BPF program 'pw_enqueue'" /tmp/e3.log &&
	  grep -q 'rerun with -v' /tmp/e3.log; } || bad="$bad verifier-hint"
	parkway sched load --debug-bad-verifier -v >/tmp/e4.log 2>&1; rc=$?
	tail -n 8 /tmp/e4.log | while read -r l; do log "  -v: $l"; done
	{ [ $rc -eq 1 ] && grep -q 'verifier log, last' /tmp/e4.log && grep -q 'invalid access to map value' /tmp/e4.log; } || bad="$bad verifier-log"
	is_state disabled || bad="$bad state-$(state)"
	if [ -z "$bad" ]; then result PASS "not root, already loaded (named), verifier log tail"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 7
# Run as uid 65534. Not a function: `$NOBODY prog &` must leave $! the
# program's pid (setpriv execs it), not a subshell's.
NOBODY="/bin/setpriv --reuid=65534 --regid=65534 --clear-groups"
loader_alive() { kill -0 "$lpid" 2>/dev/null && is_state enabled; }

# A service whose seccomp filter kills on bpf(2), with the scheduler loaded:
# it must run to the end (unregistered, saying why), as root and not; the
# same filter with PARKWAY_SCHED_EXT=on must kill it (the filter works).
case7() {
	if ! start_loader /tmp/l7.log; then result FAIL "load failed: $(tail -n 3 /tmp/l7.log)"; return; fi
	bad=""
	pw_seccomp pw_vmprog --workers 2 --seconds 2 >/tmp/s1.log 2>&1; rc1=$?
	$NOBODY pw_seccomp pw_vmprog --workers 2 --seconds 2 >/tmp/s2.log 2>&1; rc2=$?
	PARKWAY_SCHED_EXT=on pw_seccomp pw_vmprog --workers 1 --seconds 1 >/tmp/s3.log 2>&1; rc3=$?
	log "root under the filter: exit $rc1: $(grep -E '^(sched_ext|result)' /tmp/s1.log | tr '\n' ' ')"
	log "uid 65534 under the filter: exit $rc2: $(grep -E '^(sched_ext|result)' /tmp/s2.log | tr '\n' ' ')"
	log "root under the filter with PARKWAY_SCHED_EXT=on: exit $rc3 (159 = SIGSYS)"
	for n in 1 2; do
		eval "rc=\$rc$n"
		{ [ "$rc" -eq 0 ] && grep -q '^result ok' /tmp/s$n.log &&
		  grep -q 'registered 0 of 2: a seccomp filter applies' /tmp/s$n.log; } || bad="$bad run$n-exit-$rc"
	done
	[ $rc3 -eq 159 ] || bad="$bad filter-did-not-kill-bpf($rc3)"
	loader_alive || bad="$bad scheduler-gone"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "hardened services ran to the end with the scheduler loaded, root and uid 65534"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 8
# An unprivileged server takes part; a hostile local user cannot mark,
# flood or read anything but its own (docs/design/sched-ext.md, threat model).
case8() {
	if ! start_loader /tmp/l8.log --max-workers 8; then result FAIL "load failed: $(tail -n 3 /tmp/l8.log)"; return; fi
	bad=""
	# 8a: an ordinary server running as its own user registers its workers.
	$NOBODY pw_vmprog --workers 2 --seconds 3 >/tmp/u1.log 2>&1 & upid=$!
	up_then_status /tmp/u1.log
	wk=$(workers_of $upid)
	wait $upid; urc=$?
	log "uid 65534 program $upid: workers in the scheduler ${wk:-none}, exit $urc: $(grep -E '^(sched_ext|result)' /tmp/u1.log | tr '\n' ' ')"
	{ [ "$wk" = 2 ] && grep -q 'registered 2 of 2' /tmp/u1.log && [ $urc -eq 0 ] && grep -q '^result ok' /tmp/u1.log; } ||
		bad="$bad unprivileged-not-registered(${wk:-none})"
	# 8b: bad values are refused, from uid 65534 and from root; the maps
	# stay closed to uid 65534; an out-of-range state reads as Off.
	parkway sched status >/tmp/status.log 2>&1; bs0=$(stat_of bad_state)
	$NOBODY pw_abuse bad-register >/tmp/h1.log 2>&1; h1=$?
	pw_abuse bad-register >/tmp/h2.log 2>&1; h2=$?
	parkway sched status >/tmp/status.log 2>&1; bs1=$(stat_of bad_state)
	grep '^abuse' /tmp/h1.log | while read -r l; do log "  65534: $l"; done
	log "root: $(tail -n 1 /tmp/h2.log); bad_state ${bs0}->${bs1}"
	[ $h1 -eq 0 ] && [ $h2 -eq 0 ] || bad="$bad bad-values-accepted($h1/$h2)"
	[ "$(grep -c 'Permission denied' /tmp/h1.log)" = 3 ] || bad="$bad maps-open-to-65534"
	[ "${bs1:-0}" -gt "${bs0:-0}" ] || bad="$bad out-of-range-state-not-seen"
	# 8b': a registration does not survive execve (its word named the old
	# image; carried into a setuid program it would let the caller choose).
	# The new image is busybox under the name pw_sh: status must show that
	# name, not pw_abuse, which starts with the same letters.
	ln -sf /bin/busybox /tmp/pw_sh
	parkway sched status >/tmp/status.log 2>&1; fr0=$(stat_of slot_freed)
	$NOBODY pw_abuse exec-registered /tmp/pw_sh >/tmp/ex.log 2>&1 & epid=$!
	sleep 1.5
	parkway sched status >/tmp/status.log 2>&1; fr1=$(stat_of slot_freed)
	eline=$(grep "^program $epid " /tmp/status.log)
	ecomm=$(cat /proc/$epid/comm)
	wait $epid; erc=$?
	log "exec after registering: $(head -n 1 /tmp/ex.log); slot_freed ${fr0}->${fr1} while the new image ran; exit $erc; ${eline:-no status line} (its comm: $ecomm)"
	{ grep -q 'registration result 0' /tmp/ex.log && [ $((${fr1:-0} - ${fr0:-0})) -eq 1 ] && [ $erc -eq 0 ]; } ||
		bad="$bad registration-survived-exec"
	case "$eline" in *workers=[1-9]*) bad="$bad exec-status($eline)" ;; esac
	case "$eline" in "program $epid pw_sh "*) ;; *) bad="$bad exec-name(${eline:-no status line})" ;; esac
	# 8c: a flood from uid 65534, over the cap of 8: its extra threads are
	# refused and reported; other programs register all they need, and one
	# over the cap gets the cap and a reason; all results correct.
	$NOBODY pw_abuse flood 12 8 >/tmp/f.log 2>&1 & fpid=$!
	wait_for 30 grep -q 'registered' /tmp/f.log
	pw_vmprog --workers 3 --seconds 2 >/tmp/v3.log 2>&1 & v3=$!
	pw_vmprog --workers 10 --seconds 2 >/tmp/v10.log 2>&1 & v10=$!
	up_then_status /tmp/v3.log /tmp/v10.log
	fline=$(grep "^program $fpid " /tmp/status.log)
	w3=$(workers_of $v3); w10=$(workers_of $v10)
	wait $v3; r3=$?; wait $v10; r10=$?
	log "flood: $(cat /tmp/f.log | tr '\n' ' '); in status: $fline"
	log "3-worker program: ${w3:-none} in the scheduler, $(grep -E '^(sched_ext|result)' /tmp/v3.log | tr '\n' ' ')"
	log "10-worker program: ${w10:-none} in the scheduler, $(grep -E '^(sched_ext|result)' /tmp/v10.log | tr '\n' ' ')"
	grep -q 'registered 8 of 12: the scheduler.s per-program worker cap' /tmp/f.log || bad="$bad flood-not-capped"
	echo "$fline" | grep -q 'workers=8 .*refused=4' || bad="$bad flood-status"
	{ [ "$w3" = 3 ] && grep -q 'registered 3 of 3' /tmp/v3.log && [ $r3 -eq 0 ] && grep -q '^result ok' /tmp/v3.log; } ||
		bad="$bad victim-not-registered(${w3:-none})"
	{ [ "$w10" = 8 ] && grep -q 'registered 8 of 10: the scheduler.s per-program worker cap' /tmp/v10.log &&
	  [ $r10 -eq 0 ] && grep -q '^result ok' /tmp/v10.log; } || bad="$bad over-cap-program(${w10:-none})"
	wait $fpid
	sleep 0.5
	parkway sched status >/tmp/status.log 2>&1
	if grep -q "^program $fpid " /tmp/status.log; then bad="$bad stale-record-of-$fpid"; fi
	# 8d: a liar (4 threads of uid 65534 publishing Busy while spinning)
	# against one plain spinner: per program, the spinner keeps about half.
	sh -c 'while :; do :; done' & qpid=$!
	q0=$(cpu_ms_of $qpid)
	$NOBODY pw_abuse liar 4 4 >/tmp/liar.log 2>&1
	q1=$(cpu_ms_of $qpid)
	kill $qpid; wait $qpid 2>/dev/null
	lms=$(sed -n 's/.*cpu_ms=\([0-9]*\).*/\1/p' /tmp/liar.log)
	qms=$((q1 - q0))
	share=$(( qms * 100 / (qms + ${lms:-0} + 1) ))
	log "liar: $(cat /tmp/liar.log); plain spinner ${qms} ms = ${share}% of both"
	grep -q 'registered 4' /tmp/liar.log || bad="$bad liar-not-registered"
	[ "$share" -ge 40 ] || bad="$bad liar-took-the-cpu(${share}%)"
	loader_alive || bad="$bad scheduler-gone"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "uid 65534 registers its own; bad values refused; cap 8 enforced and reported; liar bounded (${share}%)"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 9
pins_left() {
	[ -e /run/parkway-sched/loader.pid ] && echo pid-file
	grep -q ' /run/parkway-sched/bpf ' /proc/mounts && echo bpffs-mounted
}

# The loader's directory pre-created by another user or writable by others;
# two loads at once; what a killed loader leaves is removed.
case9() {
	bad=""
	rm -rf /run/parkway-sched
	$NOBODY mkdir /run/parkway-sched
	parkway sched load >/tmp/p1.log 2>&1; rc=$?
	log "directory made by uid 65534: exit $rc: $(head -n 1 /tmp/p1.log)"
	{ [ $rc -eq 3 ] && grep -q 'belongs to uid 65534' /tmp/p1.log && is_state disabled; } || bad="$bad foreign-dir-accepted"
	rmdir /run/parkway-sched
	mkdir -m 0777 /run/parkway-sched
	parkway sched load >/tmp/p2.log 2>&1; rc=$?
	log "directory mode 0777: exit $rc: $(head -n 1 /tmp/p2.log)"
	{ [ $rc -eq 3 ] && grep -q 'writable by group or others' /tmp/p2.log; } || bad="$bad open-dir-accepted"
	rmdir /run/parkway-sched
	# Two loads at once: one runs, the other says so and leaves its pins.
	parkway sched load >/tmp/o1.log 2>&1 & o1=$!
	parkway sched load >/tmp/o2.log 2>&1 & o2=$!
	wait_for 30 is_state enabled
	sleep 1
	alive=""; loser=""
	for p in $o1 $o2; do if kill -0 $p 2>/dev/null; then alive="$alive $p"; else loser=$p; fi; done
	[ -n "$loser" ] && wait $loser; lrc=$?
	log "two loads: running:$alive; the other exited $lrc: $(cat /tmp/o1.log /tmp/o2.log | grep -v '^parkway: scheduler loaded' | head -n 1)"
	[ "$(echo $alive | wc -w)" = 1 ] && [ $lrc -eq 3 ] || bad="$bad overlap($alive/$lrc)"
	[ -e /run/parkway-sched/bpf/v2/register ] || bad="$bad pins-lost"
	$NOBODY pw_vmprog --workers 1 --seconds 1 >/tmp/o3.log 2>&1 || bad="$bad program-after-overlap"
	grep -q 'registered 1 of 1' /tmp/o3.log || bad="$bad not-registered-after-overlap"
	lpid=$(echo $alive)
	stop_loader || bad="$bad unload"
	left=$(pins_left)
	log "after unload: left behind: ${left:-nothing}"
	[ -z "$left" ] || bad="$bad left-after-unload($left)"
	# kill -9: the pins and pid file stay until `unload` or the next load.
	if start_loader /tmp/p3.log; then
		kill -9 $lpid; wait $lpid 2>/dev/null
		wait_for 20 is_state disabled
		left9=$(pins_left | tr '\n' ' ')
		parkway sched unload >/tmp/p4.log 2>&1
		left=$(pins_left)
		log "after kill -9: ${left9:-nothing}; after unload: ${left:-nothing}"
		[ -z "$left" ] || bad="$bad stale-after-unload($left)"
	else
		bad="$bad load"
	fi
	# The pid file a killed loader left names nobody: a load refused while
	# the next loader starts must not name the dead one.
	if start_loader /tmp/p14.log; then
		dead=$lpid
		kill -9 $dead; wait $dead 2>/dev/null
		wait_for 20 is_state disabled
		parkway sched load >/tmp/p15.log 2>&1 & lpid=$!
		holds_lock_of() { ls -l /proc/$1/fd 2>/dev/null | grep -q 'parkway-sched/lock'; }
		wait_for 30 holds_lock_of $lpid || log "the loader never held the lock"
		parkway sched load >/tmp/p16.log 2>&1; rc=$?
		log "a load while another starts over a killed loader's pid file ($dead): exit $rc: $(head -n 1 /tmp/p16.log)"
		{ [ $rc -eq 3 ] && ! grep -q "(pid $dead)" /tmp/p16.log; } || bad="$bad names-dead-loader-$dead"
		wait_for 30 is_state enabled
		stop_loader || bad="$bad unload-15"
	else
		bad="$bad load-14"
	fi
	# Every way out but SIGKILL cleans up: SIGHUP, and SIGPIPE from --stats
	# into a closed pipe.
	if start_loader /tmp/p5.log; then
		kill -HUP $lpid
		wait_for 15 loader_gone $lpid || kill -9 $lpid
		wait $lpid; rc=$?
		left=$(pins_left | tr '\n' ' ')
		log "SIGHUP: exit $rc, $(tail -n 1 /tmp/p5.log); left behind: ${left:-nothing}"
		[ $rc -eq 0 ] && [ -z "$left" ] && is_state disabled || bad="$bad sighup($rc,$left)"
	else
		bad="$bad load-5"
	fi
	timeout 60 sh -c 'parkway sched load --stats 1 2>/tmp/p6.err | head -n 1 >/tmp/p6.log'
	wait_for 10 is_state disabled
	left=$(pins_left | tr '\n' ' ')
	log "--stats into a pipe closed after one line: read '$(cat /tmp/p6.log)'; state $(state); left behind: ${left:-nothing}"
	[ -z "$left" ] && is_state disabled || bad="$bad sigpipe($left)"
	# unload while a load is starting (it holds the lock, no scheduler
	# yet): the unload waits for it and stops it; and once unload returns,
	# the loader has left, so a load right after it works.
	parkway sched load >/tmp/p7.log 2>&1 & lpid=$!
	holds_lock() { ls -l /proc/$lpid/fd 2>/dev/null | grep -q 'parkway-sched/lock'; }
	wait_for 30 holds_lock || log "the loader never held the lock"
	parkway sched unload >/tmp/p8.log 2>&1; urc=$?
	st=$(state)
	wait_for 15 loader_gone $lpid || kill -9 $lpid
	wait $lpid; rc=$?
	log "unload during a start: exit $urc, state $st after it: $(tr '\n' ' ' </tmp/p8.log); loader exit $rc: $(tail -n 1 /tmp/p7.log)"
	[ $urc -eq 0 ] && [ "$st" = disabled ] && [ $rc -eq 0 ] || bad="$bad unload-while-starting($urc,$st,$rc)"
	if start_loader /tmp/p9.log; then
		parkway sched unload >/tmp/p8.log 2>&1 && parkway sched load >/tmp/p10.log 2>&1 & l2=$!
		wait $lpid; rc=$?
		# The loader writes its pid file just after the attach.
		pid_written() { [ -s /run/parkway-sched/loader.pid ]; }
		wait_for 30 is_state enabled && wait_for 10 pid_written; st=$(state)
		lpid=$(cat /run/parkway-sched/loader.pid 2>/dev/null)
		log "unload && load: first loader exit $rc, then state $st: $(head -n 1 /tmp/p10.log)"
		[ "$st" = enabled ] && [ -n "$lpid" ] || bad="$bad unload-then-load($st: $(head -n 1 /tmp/p10.log))"
		parkway sched unload >/dev/null 2>&1
		wait $l2
		left=$(pins_left | tr '\n' ' ')
		[ -z "$left" ] || bad="$bad left-after-unload-2($left)"
	else
		bad="$bad load-9"
	fi
	# A loader started under root's restrictive umask (077), in a fresh
	# directory and in one left mode 0700: a program of uid 65534 still
	# registers, and its `status` names the loader's pid.
	for how in fresh 0700; do
		rm -rf /run/parkway-sched
		[ $how = 0700 ] && mkdir -m 0700 /run/parkway-sched
		um=$(umask); umask 077
		start_loader /tmp/p11.log; lrc=$?
		umask "$um"
		if [ $lrc -eq 0 ]; then
			$NOBODY pw_vmprog --workers 1 --seconds 1 >/tmp/o4.log 2>&1
			$NOBODY parkway sched status >/tmp/o5.log 2>&1
			log "umask 077, directory $how: $(ls -ld /run/parkway-sched | cut -c1-10); uid 65534: $(grep '^sched_ext' /tmp/o4.log); status: $(grep '^parkway scheduler' /tmp/o5.log)"
			grep -q 'registered 1 of 1' /tmp/o4.log || bad="$bad umask-077-$how-not-registered"
			grep -q "loaded by pid $lpid\$" /tmp/o5.log || bad="$bad umask-077-$how-status-pid"
			stop_loader || bad="$bad unload-umask-$how"
		else
			bad="$bad load-umask-$how"; kill "$lpid" 2>/dev/null; wait "$lpid"
		fi
	done
	# A stopped loader (Ctrl-Z, SIGSTOP): `unload` still stops it. Stopped
	# once it has said it is loaded: the state reads enabled before the
	# loader writes its pid file, and a loader stopped in between is one
	# still starting, which unload waits for (30 s) rather than stops.
	if start_loader /tmp/p12.log && wait_for 10 grep -q 'scheduler loaded' /tmp/p12.log; then
		kill -STOP $lpid
		parkway sched unload >/tmp/p13.log 2>&1; urc=$?
		st=$(state)
		wait_for 15 loader_gone $lpid || { kill -9 $lpid; kill -CONT $lpid; }
		wait $lpid; rc=$?
		log "unload of a stopped loader: exit $urc, state $st after it: $(tr '\n' ' ' </tmp/p13.log); loader exit $rc"
		[ $urc -eq 0 ] && [ "$st" = disabled ] && [ $rc -eq 0 ] || bad="$bad unload-stopped-loader($urc,$st,$rc)"
	else
		bad="$bad load-12"; kill "$lpid" 2>/dev/null; wait "$lpid"
	fi
	if [ -z "$bad" ]; then result PASS "foreign or open directory refused; one of two loads runs; nothing left behind (unload, SIGHUP, SIGPIPE); unload waits for a starting loader and for its leaving; a killed loader's pid named by nobody; umask 077; a stopped loader unloads"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 10
# The wait bound (docs/design/sched-ext.md, "The wait bound"), checked
# against what the scheduler measured. Runs in the timed guest (1 vCPU
# under -icount), whose ticks come every tick of its own clock.

jiffies() { sed -n 's/^jiffies: *\([0-9]*\).*/\1/p' /proc/timer_list | head -n 1; }
uptime_cs() { cut -d' ' -f1 /proc/uptime | tr -d .; }

# spin_begin: note the clock and the tick count before a spinner run.
spin_begin() { wj0=$(jiffies); wu0=$(uptime_cs); }

# check_wait LOADER_LOG PROGRAMS GAP_MS: compare the scheduler's longest
# wait of a runnable task (max_wait_us) and the spinners' own longest gap
# between two turns (GAP_MS) with the bound for plain tasks at the slice
# floor (docs/design/sched-ext.md, "The wait bound"):
#   W = ((Q + P x (C + 2)) x (F + T) + P x (p + 3) x F) / C
# Q the most tasks queued plus C, P the programs (every process, kernel
# threads included, counts), F the floor the loader printed, T the tick
# measured over the run, p the loader's default penalty (20 slices). The
# bound must also sit under half the 30 s watchdog. Sets wait_line;
# returns 1 when a figure is over.
check_wait() {
	parkway sched status >/tmp/status.log 2>&1
	mw=$(stat_of max_wait_us); mq=$(stat_of max_queued)
	c=$(nproc); pen=20
	f_us=$(sed -n 's/.*down to \([0-9]*\) us.*/\1/p' "$1" | head -n 1)
	dj=$(( $(jiffies) - wj0 )); du=$(( $(uptime_cs) - wu0 ))
	t_us=$(( du * 10000 / (dj > 0 ? dj : 1) ))
	q=$(( ${mq:-0} + c ))
	bound_us=$(( ((q + $2 * (c + 2)) * (${f_us:-0} + t_us) + $2 * (pen + 3) * ${f_us:-0}) / c ))
	wait_line="longest wait ${mw:-?} us (scheduler), ${3:-?} ms (spinners' own gap); bound ((Q=$q + P=$2 x (C=$c + 2)) x (F=${f_us:-?} + T=${t_us} us) + P x ($pen + 3) x F) / C = $((bound_us / 1000)) ms"
	[ -n "$mw" ] && [ -n "$3" ] && [ -n "$f_us" ] && [ "$dj" -gt 0 ] || return 1
	[ "$mw" -le "$bound_us" ] && [ $(( $3 * 1000 )) -le "$bound_us" ] && [ "$bound_us" -le 15000000 ]
}

# programs: processes now (each is a program to the scheduler).
programs() { ls -d /proc/[0-9]* | wc -l; }

# Slices over the bound refused; the largest allowed slice with a searching
# worker among spinners; 2,000 threads (created first, then spinning) for
# longer than the watchdog's 30 s: every thread ran, every wait within the
# bound, the scheduler loaded throughout.
case10() {
	bad=""
	parkway sched load --slice-us 250000 >/tmp/w0.log 2>&1; rc=$?
	log "--slice-us 250000: exit $rc: $(head -n 1 /tmp/w0.log)"
	{ [ $rc -eq 2 ] && grep -q 'breaks the wait bound' /tmp/w0.log && is_state disabled; } || bad="$bad big-slice-accepted"
	most=$(sed -n 's/.*slices above \([0-9]*\) us.*/\1/p' /tmp/w0.log)
	if ! start_loader /tmp/l10.log --slice-us "${most:-5000}"; then result FAIL "$bad load-${most}us: $(tail -n 2 /tmp/l10.log)"; return; fi
	log "$(head -n 1 /tmp/l10.log)"
	spids=""
	spin_begin
	for i in 1 2 3 4 5 6; do sh -c 'while :; do :; done' & spids="$spids $!"; done
	pw_linkprobe bws 1 1 8 >/tmp/wb.log 2>&1; brc=$?
	np=$(programs)
	kill $spids; wait $spids 2>/dev/null
	sms=$(sed -n 's/.*searching_ms=\([0-9]*\).*/\1/p' /tmp/wb.log)
	log "${most} us slices, 1 busy + 1 searching worker and 6 spinning programs for 8 s: $(tail -n 1 /tmp/wb.log) (exit $brc)"
	{ [ $brc -eq 0 ] && [ "${sms:-0}" -gt 0 ]; } || bad="$bad searcher-starved"
	# Above the floor, searchers included: W <= (2p + C + 6) x L + (Q + P x (C + 2)) x T / C.
	parkway sched status >/tmp/status.log 2>&1
	mw=$(stat_of max_wait_us); mq=$(stat_of max_queued); c=$(nproc)
	dj=$(( $(jiffies) - wj0 )); du=$(( $(uptime_cs) - wu0 ))
	t_us=$(( du * 10000 / (dj > 0 ? dj : 1) ))
	above_us=$(( (2 * 20 + c + 6) * ${most:-0} + (${mq:-0} + c + np * (c + 2)) * t_us / c ))
	log "above the floor: longest wait ${mw:-?} us; bound (2 x 20 + C=$c + 6) x L=${most:-?} us + (Q=$((${mq:-0} + c)) + P=$np x (C + 2)) x T=$t_us us / C = $((above_us / 1000)) ms"
	{ [ -n "$mw" ] && [ "$mw" -le "$above_us" ]; } || bad="$bad wait-over-the-bound-above-the-floor(${mw:-?}us)"
	loader_alive || bad="$bad ejected-with-the-largest-slice"
	stop_loader || bad="$bad loader-exit"
	# A fresh load: its max_wait_us covers the spinners only.
	if ! start_loader /tmp/l10s.log --stats 4; then result FAIL "$bad load: $(tail -n 2 /tmp/l10s.log)"; return; fi
	spin_begin
	pw_abuse spin 2000 32 >/tmp/sp.log 2>&1 & spid=$!
	wait_for 120 grep -q 'threads created' /tmp/sp.log
	np=$(programs)
	wait $spid; src=$?
	ran=$(sed -n 's/.* \([0-9]*\) got CPU.*/\1/p' /tmp/sp.log)
	gap=$(sed -n 's/.*longest_wait_ms=\([0-9]*\).*/\1/p' /tmp/sp.log)
	check_wait /tmp/l10s.log "$np" "$gap" || bad="$bad wait-over-the-bound"
	log "2000 spinning threads for 32 s: $(tail -n 1 /tmp/sp.log) (exit $src); $(grep '^counters' /tmp/status.log)"
	log "$wait_line"
	{ [ $src -eq 0 ] && [ "$ran" = 2000 ]; } || bad="$bad spinners(${ran:-none}-ran)"
	grep '^parkway: dispatch' /tmp/l10s.log | while read -r l; do log "  $l"; done
	loader_alive || bad="$bad ejected-by-the-spinners: $(grep -E 'reason|message' /tmp/l10s.log | tr '\n' ' ')"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "big slice refused; largest allowed slice with a searcher; 2000 spinners for 32 s: $wait_line"
	else result FAIL "$bad; $wait_line"; fi
}

# ---------------------------------------------------------------- case 11
# A parkway program keeps running, with correct results, across an unload,
# a watchdog ejection and a reload.
case11() {
	if ! start_loader /tmp/l11.log; then result FAIL "load failed: $(tail -n 3 /tmp/l11.log)"; return; fi
	bad=""
	rm -f /tmp/x.stop
	pw_vmprog --workers 2 --seconds 90 --until /tmp/x.stop >/tmp/x.log 2>&1 & xpid=$!
	wait_for 20 grep -q '^runtime up' /tmp/x.log || bad="$bad no-runtime-up"
	stop_loader || bad="$bad unload"
	cp /bin/busybox /tmp/busybox-stall
	if start_loader /tmp/l11b.log --debug-watchdog-ms 5000 --debug-stall-comm busybox-stall; then
		/tmp/busybox-stall sh -c 'while :; do :; done' & spid=$!
		wait_for 60 loader_gone $lpid || bad="$bad not-ejected"
		wait $lpid; erc=$?
		kill -9 $spid 2>/dev/null; wait $spid 2>/dev/null
		[ $erc -eq 1 ] || bad="$bad eject-exit-$erc"
	else
		bad="$bad load-2"
	fi
	if start_loader /tmp/l11c.log; then
		sleep 2
		kill -0 $xpid 2>/dev/null || bad="$bad program-ended-early"
		stop_loader || bad="$bad unload-3"
	else
		bad="$bad reload"
	fi
	touch /tmp/x.stop
	wait $xpid; xrc=$?
	log "program $xpid across unload, ejection, reload: exit $xrc: $(grep -E '^(sched_ext|result)' /tmp/x.log | tr '\n' ' ')"
	{ [ $xrc -eq 0 ] && grep -q '^result ok' /tmp/x.log; } || bad="$bad program-result($xrc)"
	if [ -z "$bad" ]; then result PASS "program correct across unload, ejection and reload"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 12
# The bound's many-programs term: 120 programs of 8 spinning threads each
# (created first, all started at once through a FIFO), every wait within
# the bound. Runs in the timed guest.
case12() {
	if ! start_loader /tmp/l12.log --stats 4; then result FAIL "load failed: $(tail -n 3 /tmp/l12.log)"; return; fi
	bad=""
	rm -f /tmp/gate; mkfifo /tmp/gate
	pids=""
	for i in $(seq 1 120); do pw_abuse spin 8 16 /tmp/gate >/tmp/mp.$i.log 2>&1 & pids="$pids $!"; done
	created() { [ "$(cat /tmp/mp.*.log | grep -c 'threads created')" = 120 ]; }
	wait_for 240 created || bad="$bad not-all-created($(cat /tmp/mp.*.log | grep -c 'threads created'))"
	np=$(programs)
	spin_begin
	exec 3<>/tmp/gate  # a writer: every spinner's open returns, all start
	failed=0
	for p in $pids; do wait $p || failed=$((failed + 1)); done
	exec 3>&-
	ran=$(cat /tmp/mp.*.log | sed -n 's/.* \([0-9]*\) got CPU.*/\1/p' | awk '{s += $1} END {print s + 0}')
	gap=$(cat /tmp/mp.*.log | sed -n 's/.*longest_wait_ms=\([0-9]*\).*/\1/p' | sort -n | tail -n 1)
	check_wait /tmp/l12.log "$np" "$gap" || bad="$bad wait-over-the-bound"
	log "120 programs x 8 spinning threads for 16 s: $ran threads got CPU, $failed failed; $(grep '^counters' /tmp/status.log)"
	log "$wait_line"
	{ [ $failed -eq 0 ] && [ "$ran" = 960 ]; } || bad="$bad spinners($ran-ran,$failed-failed)"
	grep '^parkway: dispatch' /tmp/l12.log | while read -r l; do log "  $l"; done
	loader_alive || bad="$bad ejected: $(grep -E 'reason|message' /tmp/l12.log | tr '\n' ' ')"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "120 programs x 8 spinners: $wait_line"
	else result FAIL "$bad; $wait_line"; fi
}

# ---------------------------------------------------------------- case 13
# `parkway trace record` with the scheduler loaded (the guest has no
# bpftrace: the scheduler's decisions only). Two Busy and two Searching
# spinners on 2 CPUs: busy ones are preempted, so promoted, and thieves
# yield to them. The trace must hold those decisions on the four workers'
# tracks, every event a known kind, promotions on the busy workers and
# yields on the searching ones, no more than the scheduler's own counters
# saw, and the export must draw them.
case13() {
	if ! start_loader /tmp/l13.log; then result FAIL "load failed: $(tail -n 3 /tmp/l13.log)"; return; fi
	parkway sched status >/tmp/status.log 2>&1
	p0=$(stat_of busy_promote); y0=$(stat_of yield_to_busy)
	parkway trace record -o /tmp/scx.pwt -- pw_linkprobe bws 2 2 2 >/tmp/rec13.log 2>&1; rrc=$?
	parkway sched status >/tmp/status.log 2>&1
	p1=$(stat_of busy_promote); y1=$(stat_of yield_to_busy)
	stop_loader
	parkway trace report /tmp/scx.pwt >/tmp/rep13.log 2>&1; prc=$?
	parkway trace export --json /tmp/scx.json --svg /tmp/scx.svg /tmp/scx.pwt >/tmp/exp13.log 2>&1; xrc=$?
	log "record exit $rrc: $(tr '\n' '|' </tmp/rec13.log)"
	log "report: $(grep -A6 "sched_ext scheduler's decisions" /tmp/rep13.log | tr '\n' '|')"
	log "counters over the recording: busy_promote ${p0}->${p1}, yield_to_busy ${y0}->${y1}"
	events=$(sed -n 's/.*traced, \([0-9]*\) events, .*/\1/p' /tmp/rep13.log)
	# worker rows of the section: "    wN promote keep yield other"
	rows=$(sed -n "/sched_ext scheduler's decisions/,/busy_promote: preempted/p" /tmp/rep13.log | grep -E '^ +w[0-9]+ ')
	nrows=$(echo "$rows" | grep -c .)
	promote=$(echo "$rows" | awk '{s += $2} END {print s + 0}')
	keep=$(echo "$rows" | awk '{s += $3} END {print s + 0}')
	yield=$(echo "$rows" | awk '{s += $4} END {print s + 0}')
	other=$(echo "$rows" | awk '{s += $5} END {print s + 0}')
	# bws registers its busy threads first (w0, w1), then the searching
	# ones (w2, w3): promotions are of busy workers, yields of searchers.
	misplaced=$(echo "$rows" | awk '($1 == "w0" || $1 == "w1") && $4 > 0 || ($1 == "w2" || $1 == "w3") && $2 > 0' | tr -s ' ' | tr '\n' '|')
	slices=$(grep -o '"name":"sched_ext [a-z_]*"' /tmp/scx.json 2>/dev/null | grep -vc '"sched_ext other"')
	if [ $rrc -ne 0 ] || [ $prc -ne 0 ] || [ $xrc -ne 0 ]; then result FAIL "record/report/export exit $rrc/$prc/$xrc: $(tail -n 2 /tmp/rec13.log /tmp/rep13.log /tmp/exp13.log)"
	elif [ "$nrows" != 4 ]; then result FAIL "want 4 worker rows in the sched_ext section, got $nrows: $(cat /tmp/rep13.log | head -30)"
	elif [ "$promote" -lt 1 ] || [ "$yield" -lt 1 ]; then result FAIL "no busy_promote ($promote) or yield_to_busy ($yield) in the trace"
	elif [ "$other" -ne 0 ]; then result FAIL "$other events of an unknown kind"
	elif [ -n "$misplaced" ]; then result FAIL "a promotion of a searcher or a yield of a busy worker: $misplaced"
	elif [ $((promote + keep + yield)) -ne "${events:-0}" ]; then result FAIL "the section counts $((promote + keep + yield)) of the file's ${events:-?} events"
	elif [ "$promote" -gt $(( ${p1:-0} - ${p0:-0} )) ] || [ "$yield" -gt $(( ${y1:-0} - ${y0:-0} )) ]; then result FAIL "more in the trace than the scheduler counted: promote $promote > $((p1 - p0)) or yield $yield > $((y1 - y0))"
	elif [ "${slices:-0}" -ne "${events:-0}" ]; then result FAIL "the JSON has ${slices:-0} sched_ext slices for ${events:-?} events"
	else result PASS "$events decisions on 4 workers: busy_promote $promote, keep_prev $keep, yield_to_busy $yield (the scheduler counted $((p1 - p0)) and $((y1 - y0)) over the run); all in the JSON"
	fi
}

# ---------------------------------------------------------------- case 14
# A task the scheduler keeps at the end of its slice (nothing queued ahead
# of it) starts a new turn, and the global clock moves with it: a program
# that ran alone for a while and one that starts beside it then share the
# CPU per program, whichever came first. With --penalty-slices 0 the lead
# cap is one slice, so a frozen clock would leave the newcomer (or the
# program that was first) only the turns other wakeups hand out. Runs in
# the timed guest (1 vCPU: the two compete for one CPU).

# share_run FIRST SECOND: start FIRST, let it run alone for 2 s, start
# SECOND beside it, and measure both over the next 3 s from /proc; each
# must get at least a third. FIRST and SECOND are "spin" (a plain spinning
# shell) or "busy"/"search" (`pw_linkprobe bws` with one worker publishing
# Busy or Searching). Sets share_line; returns 1 when a share is short.
share_start() {
	case $1 in
	spin) sh -c 'while :; do :; done' & ;;
	busy) pw_linkprobe bws 1 0 8 >/tmp/sh.$1.log 2>&1 & ;;
	search) pw_linkprobe bws 0 1 8 >/tmp/sh.$1.log 2>&1 & ;;
	esac
	spid=$!
}
share_run() {
	share_start "$1"; first=$spid
	sleep 2
	share_start "$2"; second=$spid
	a0=$(cpu_ms_of $first); b0=$(cpu_ms_of $second)
	sleep 3
	a1=$(cpu_ms_of $first); b1=$(cpu_ms_of $second)
	kill $first $second 2>/dev/null; wait $first $second 2>/dev/null
	da=$((a1 - a0)); db=$((b1 - b0))
	sa=$(( da * 100 / (da + db + 1) )); sb=$(( db * 100 / (da + db + 1) ))
	share_line="$1 first, then $2: $1 ${da} ms (${sa}%), $2 ${db} ms (${sb}%) over 3 s together"
	[ "$sa" -ge 33 ] && [ "$sb" -ge 33 ]
}

# share_pairs TAG LOADER-ARGS -- PAIRS...: one load, then share_run for
# each "FIRST-SECOND" pair; adds to $bad and $lines.
share_pairs() {
	tag=$1; shift
	args=""
	while [ "$1" != -- ]; do args="$args $1"; shift; done
	shift
	if ! start_loader /tmp/l14.log $args; then bad="$bad $tag-load"; return; fi
	for pair in "$@"; do
		share_run ${pair%-*} ${pair#*-} || bad="$bad $tag:$pair"
		log "$tag: $share_line"
		lines="$lines; $tag: $share_line"
	done
	parkway sched status >/tmp/status.log 2>&1
	log "$tag: $(grep '^counters' /tmp/status.log)"
	loader_alive || bad="$bad $tag-ejected: $(grep -E 'reason|message' /tmp/l14.log | tr '\n' ' ')"
	stop_loader || bad="$bad $tag-loader-exit"
}

case14() {
	bad=""; lines=""
	share_pairs "penalty 0" --penalty-slices 0 -- spin-busy busy-spin search-spin
	share_pairs "default" -- spin-busy busy-spin
	if [ -z "$bad" ]; then result PASS "per-program shares after a task ran alone${lines}"
	else result FAIL "short share:$bad${lines}"; fi
}

# ---------------------------------------------------------------- case 15
# A busy worker that leaves the ext class while it waits in the queue
# (sched_setscheduler to SCHED_FIFO by another thread) is no longer counted
# as waiting: its searching sibling must stop yielding to it. The whole
# probe runs on CPU 0, so while its main thread makes the switch the
# spinning busy worker is queued, preempted (busy_promote).
case15() {
	if ! start_loader /tmp/l15.log; then result FAIL "load failed: $(tail -n 3 /tmp/l15.log)"; return; fi
	bad=""
	parkway sched status >/tmp/status.log 2>&1; p0=$(stat_of busy_promote)
	pw_linkprobe leave 3 >/tmp/leave.log 2>&1 & lvpid=$!
	wait_for 10 grep -q 'to SCHED_FIFO' /tmp/leave.log
	sleep 0.5
	parkway sched status >/tmp/status.log 2>&1; p1=$(stat_of busy_promote); y0=$(stat_of yield_to_busy)
	sleep 2
	parkway sched status >/tmp/status.log 2>&1; y1=$(stat_of yield_to_busy)
	wait $lvpid; lrc=$?
	log "probe $lvpid (exit $lrc): $(tr '\n' ' ' </tmp/leave.log); busy_promote ${p0}->${p1} before the switch, yield_to_busy ${y0}->${y1} in the 2 s after it"
	{ [ $lrc -eq 0 ] && grep -q 'to SCHED_FIFO: ok' /tmp/leave.log; } || bad="$bad probe-exit-$lrc"
	[ $(( ${p1:-0} - ${p0:-0} )) -gt 0 ] || bad="$bad busy-worker-never-queued-preempted"
	[ $(( ${y1:-0} - ${y0:-0} )) -eq 0 ] || bad="$bad searcher-yielded-$(( ${y1:-0} - ${y0:-0} ))-times-to-a-worker-gone-to-FIFO"
	loader_alive || bad="$bad scheduler-gone"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "busy worker moved to SCHED_FIFO while queued: no yield_to_busy in the 2 s after (${y0}->${y1})"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 16
# A busy worker whose CPU an RT task takes is not left behind it: the
# kernel puts the preempted task back on that CPU's own queue without
# ops.enqueue, so ops.cpu_release re-enqueues it (SCX_ENQ_REENQ): it is
# promoted, counted in busy_waiting, its searching sibling on the other CPU
# yields and it runs there. `pw_linkprobe rt 2`: one Busy and one Searching
# spinner; after 1 s the busy one wakes a SCHED_FIFO spinner pinned to its
# own CPU, which takes that CPU for 2 s. In the first 800 ms of those the
# busy worker must get at least half of what the two workers got on the
# other CPU, and `reenqueued` must move.
case16() {
	# The re-enqueue needs a deferred kfunc (bpf/parkway_compat.bpf.h):
	# without one the busy worker waits for the RT task, as documented.
	if ! grep -q -e ' scx_bpf_dsq_reenq$' -e ' scx_bpf_reenqueue_local___v2$' /proc/kallsyms; then
		result SKIP "this kernel ($(uname -r)) has neither scx_bpf_dsq_reenq (7.1) nor scx_bpf_reenqueue_local___v2 (6.19): no re-enqueue from ops.cpu_release"
		return
	fi
	if ! start_loader /tmp/l16.log; then result FAIL "load failed: $(tail -n 3 /tmp/l16.log)"; return; fi
	# In the first 800 ms the RT thread holds its CPU without a break (RT
	# throttling first lets other tasks run there 950 ms in), so the
	# workers run only on the other CPU; there the busy one must get the
	# larger part (seen: 72-99%), as it does without an RT task. Left on
	# the RT thread's CPU, it gets none of it (seen: 0%, every run). Shares,
	# not times: in this guest part of a CPU's time is not charged to its
	# tasks (its two vCPUs take turns on one host thread), and with the
	# host loaded one vCPU can get far fewer turns than the other: one run
	# in CI measured 30% (162 ms against the searcher's 361, `reenqueued`
	# +3). So a share under half is measured once more; a worker left
	# behind gets 0% in both.
	for try in 1 2; do
		bad=""
		parkway sched status >/tmp/status.log 2>&1
		p0=$(stat_of busy_promote); y0=$(stat_of yield_to_busy); r0=$(stat_of reenqueued)
		pw_linkprobe rt 2 >/tmp/rt.log 2>&1; rrc=$?
		parkway sched status >/tmp/status.log 2>&1
		p1=$(stat_of busy_promote); y1=$(stat_of yield_to_busy); r1=$(stat_of reenqueued)
		be=$(sed -n 's/.*early_busy_elsewhere_ms=\([0-9]*\).*/\1/p' /tmp/rt.log)
		se=$(sed -n 's/.*early_searching_elsewhere_ms=\([0-9]*\).*/\1/p' /tmp/rt.log)
		log "try $try: probe (exit $rrc): $(tr '\n' ' ' </tmp/rt.log); reenqueued ${r0:-?}->${r1:-?}, busy_promote ${p0:-?}->${p1:-?}, yield_to_busy ${y0:-?}->${y1:-?} over the run"
		[ $rrc -eq 0 ] && [ -n "$be" ] && [ -n "$se" ] || bad="$bad probe-exit-$rrc"
		[ $(( ${r1:-0} - ${r0:-0} )) -gt 0 ] || bad="$bad nothing-reenqueued"
		share=$(( ${be:-0} * 100 / (${be:-0} + ${se:-0} + 1) ))
		if [ "$share" -lt 50 ]; then
			bad="$bad busy-worker-got-${share}%-of-the-other-CPU-(${be:-?}-ms-against-${se:-?})"
			[ -z "${bad% busy-worker-got-*}" ] && [ $try = 1 ] && continue  # the share alone: once more
		fi
		break
	done
	loader_alive || bad="$bad scheduler-gone"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "beside an RT task the busy worker got ${share}% of the other CPU (${be} ms, searcher ${se} ms; try $try), reenqueued +$(( r1 - r0 )), busy_promote +$(( p1 - p0 )), yield_to_busy +$(( y1 - y0 ))"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 17
# A program's `runtime` entry goes when the program does, whether or not it
# has a `procs` record: one whose wakeups found an idle CPU is never queued
# and has none. `status` counts the entries of programs that have exited
# ("runtime: N programs, K of them exited"). After 20 short
# `pw_linkprobe bursts 20` (short bursts and sleeps: mostly direct to an
# idle CPU), a 4-thread and a 3-thread probe, and the shell's own
# commands, none may be left: K is 0, or the few listed are programs that
# had just exited (their threads not yet freed) and are gone from a
# snapshot taken 1 s before.
runtime_line() { parkway sched status >/tmp/status.log 2>&1; grep '^runtime:' /tmp/status.log; }
case17() {
	if ! start_loader /tmp/l17.log; then result FAIL "load failed: $(tail -n 3 /tmp/l17.log)"; return; fi
	bad=""
	i=0
	while [ $i -lt 20 ]; do pw_linkprobe bursts 20 >/dev/null 2>&1; i=$((i + 1)); done
	pw_linkprobe bws 2 2 1 >/tmp/bws17.log 2>&1
	pw_linkprobe 3 1 >/tmp/cyc17.log 2>&1
	sleep 1
	a=$(runtime_line)
	sleep 1
	b=$(runtime_line)
	log "1 s apart: [$a] then [$b]"
	n=$(echo "$b" | sed -n 's/^runtime: \([0-9]*\) programs.*/\1/p')
	k=$(echo "$b" | sed -n 's/^runtime: [0-9]* programs, \([0-9]*\) of them exited.*/\1/p')
	if [ -z "$k" ]; then
		bad="$bad no-runtime-line-in-status"
	elif [ "$k" -gt 2 ]; then
		bad="$bad ${k}-of-${n}-entries-of-exited-programs"
	elif [ "$k" -gt 0 ]; then
		for t in $(echo "$b" | sed -n 's/^runtime: .*): \(.*\)$/\1/p'); do
			echo "$a" | sed 's/.*)://' | grep -qw "$t" && bad="$bad entry-of-exited-$t-stays"
		done
	fi
	loader_alive || bad="$bad scheduler-gone"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "no entry of an exited program stays: [$b]"
	else result FAIL "$bad"; fi
}

# ---------------------------------------------------------------- case 18
# A tgid reused by a new program while the old one's workers were
# registered: a `pw_linkprobe 4` is killed with -9 while its 4 workers are
# registered, and a new `pw_linkprobe 4` is started with the same pid
# (ns_last_pid), 6 times over. Each time the record under that tgid must
# be the new program's alone: 4 workers (not the old 4 on top, nor fewer,
# counts made in an element the map had let go), no refusal, and its own
# CPU time only (about what its own clock says, not the old program's
# added); the old program's registrations are dropped (`slot_freed`), and
# the scheduler stays loaded. The new program's 4 threads register at once, so a record
# the scheduler must reset or make for it is reached by several CPUs.
reuse_start() {  # reuse_start PID LOG: start `pw_linkprobe 4 4` as PID if it can; sets $npid
	tries=0
	while [ $tries -lt 8 ]; do
		echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid
		pw_linkprobe 4 4 >"$2" 2>&1 &
		npid=$!
		[ "$npid" = "$1" ] && return 0
		kill -9 $npid 2>/dev/null; wait $npid 2>/dev/null
		tries=$((tries + 1))
	done
	return 1
}
case18() {
	if [ ! -w /proc/sys/kernel/ns_last_pid ]; then result FAIL "no /proc/sys/kernel/ns_last_pid"; return; fi
	if ! start_loader /tmp/l18.log; then result FAIL "load failed: $(tail -n 3 /tmp/l18.log)"; return; fi
	bad=""
	parkway sched status >/tmp/status.log 2>&1
	freed0=$(stat_of slot_freed)
	pw_linkprobe 4 30 >/tmp/reuse0.log 2>&1 &
	opid=$!
	sleep 1.5
	parkway sched status >/tmp/status.log 2>&1
	w=$(workers_of $opid)
	log "first program $opid: workers=${w:-none}"
	[ "$w" = 4 ] || bad="$bad first-program-workers-${w:-none}"
	round=1
	while [ $round -le 6 ]; do
		kill -9 $opid; wait $opid 2>/dev/null
		if ! reuse_start $opid /tmp/reuse$round.log; then
			bad="$bad pid-$opid-not-reused"; break
		fi
		sleep 1
		parkway sched status >/tmp/status.log 2>&1
		own=$(cpu_ms_of $npid)
		w=$(workers_of $npid)
		line=$(grep "^program $npid " /tmp/status.log)
		ms=$(echo "$line" | sed -n 's/.* cpu_ms=\([0-9]*\).*/\1/p')
		log "round $round: pid $npid again, ${own} ms of CPU by its own clock: ${line:-no record}"
		[ "$w" = 4 ] || bad="$bad round-$round-workers-${w:-none}"
		echo "$line" | grep -q refused && bad="$bad round-$round-refused"
		# Its CPU time is its own: about what its own clock says (read
		# after the status, in 10 ms ticks), not the old program's on top.
		[ "${ms:-0}" -le $(( own + own / 4 + 300 )) ] || bad="$bad round-$round-cpu_ms-${ms}-own-${own}"
		opid=$npid
		round=$((round + 1))
	done
	kill -9 $opid 2>/dev/null; wait $opid 2>/dev/null
	sleep 0.5
	parkway sched status >/tmp/status.log 2>&1
	freed1=$(stat_of slot_freed)
	log "slot_freed ${freed0:-?}->${freed1:-?}, proc_reset $(stat_of proc_reset); $(grep '^runtime:' /tmp/status.log)"
	[ $(( ${freed1:-0} - ${freed0:-0} )) -ge 28 ] || bad="$bad slot_freed-${freed0:-?}-${freed1:-?}"
	grep -q "^program $opid " /tmp/status.log && bad="$bad record-of-$opid-stays"
	loader_alive || bad="$bad scheduler-gone"
	stop_loader || bad="$bad loader-exit"
	if [ -z "$bad" ]; then result PASS "a reused tgid's record is the new program's alone (6 rounds, 4 workers each)"
	else result FAIL "$bad"; fi
}

for cur in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18; do
	case $cur in
	1) name="load-enable-unload" ;;
	2) name="workers-registered" ;;
	3) name="two-programs" ;;
	4) name="kill-9-loader" ;;
	5) name="watchdog-ejects" ;;
	6) name="clear-errors" ;;
	7) name="seccomp-hardened" ;;
	8) name="unprivileged-and-hostile" ;;
	9) name="loader-directory-and-lock" ;;
	10) name="wait-bound" ;;
	11) name="across-reload" ;;
	12) name="many-programs-bound" ;;
	13) name="trace-record-sched-ext" ;;
	14) name="kept-task-moves-the-clock" ;;
	15) name="busy-worker-leaves-ext" ;;
	16) name="rt-takes-a-busy-workers-cpu" ;;
	17) name="no-stale-runtime-entry" ;;
	18) name="reused-tgid" ;;
	esac
	if want $cur; then
		t0=$(cut -d' ' -f1 /proc/uptime)
		case$cur
		echo "VMTIME $cur $t0 $(cut -d' ' -f1 /proc/uptime)"
		# Every case must leave the default scheduler in place.
		if ! is_state disabled; then
			parkway sched unload >/dev/null 2>&1
			wait_for 10 is_state disabled
		fi
	else
		result SKIP "not selected (parkway_tests=$only)"
	fi
done
