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
		pw_vmprog --workers 2 --idle 6 --seconds 1 >/tmp/idle.log 2>&1 &
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

# mix_run: `pw_linkprobe bws 1 1 4` and a plain spinner side by side; sets
# mix_share (the spinner's % of both), mix_busy (busy % inside the probe).
mix_run() {
	sh -c 'while :; do :; done' & qpid=$!
	q0=$(cpu_ms_of $qpid)
	pw_linkprobe bws 1 1 4 >/tmp/mix.log 2>&1
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
	pw_vmprog --workers 2 --seconds 4 >/tmp/a.log 2>&1 & apid=$!
	pw_vmprog --workers 1 --seconds 4 >/tmp/b.log 2>&1 & bpid=$!
	up_then_status /tmp/a.log /tmp/b.log
	wa=$(workers_of $apid)
	wb=$(workers_of $bpid)
	[ "$wa" = 2 ] && [ "$wb" = 1 ] || log "status while both ran: $(tr '\n' '|' </tmp/status.log)"
	wait $apid; arc=$?
	wait $bpid; brc=$?
	parkway sched status >/tmp/status.log 2>&1
	bad=""
	# 3b: a program with 1 busy + 1 searching spinner against a plain
	# spinning process. Per program, each should get about one CPU (per
	# thread, the plain one would get a third), and inside the first the
	# busy thread should get most.
	mix_run
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
	pw_vmprog --workers 2 --seconds 4 >/tmp/a0.log 2>&1 & apid=$!
	pw_vmprog --workers 1 --seconds 4 >/tmp/b0.log 2>&1 & bpid=$!
	wait $apid; wait $bpid
	mix_run
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
	if ! start_loader /tmp/l5.log --debug-stall-comm busybox-stall; then
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

for cur in 1 2 3 4 5 6; do
	case $cur in
	1) name="load-enable-unload" ;;
	2) name="workers-registered" ;;
	3) name="two-programs" ;;
	4) name="kill-9-loader" ;;
	5) name="watchdog-ejects" ;;
	6) name="clear-errors" ;;
	esac
	if want $cur; then
		case$cur
		# Every case must leave the default scheduler in place.
		if ! is_state disabled; then
			parkway sched unload >/dev/null 2>&1
			wait_for 10 is_state disabled
		fi
	else
		result SKIP "not selected (parkway_tests=$only)"
	fi
done
