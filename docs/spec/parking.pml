/*
 * parking.pml -- SPIN model of parkway's parking protocol.
 *
 * What is modelled (docs/design/parking.md has the step table that maps
 * every step below to one atomic operation in userspace/):
 *   - N workers running Worker::loop (main loop): next_local (its own
 *     deque [Q4], or on the kInjectEvery tick the injection queue [Q3]),
 *     found_work [S2] + baton recheck [S3] when the task was found while
 *     counted as a searcher, search with the searcher cap [S1], park
 *     [P0..P5] on the worker's own ParkWord, and the shutdown exit path.
 *   - Parking's state word (S = searching, I = idle), its mutex-protected
 *     LIFO idle list with positions (read lock-free by withdraw's fast
 *     path), wake_one [W1..W5].
 *   - ParkWord values and tokens; FUTEX_WAIT blocks only while the word
 *     still equals the expected value (checked atomically with the wake);
 *     FUTEX_WAKE with nobody waiting is a no-op; SPURIOUS spurious wakes.
 *   - One outside thread: submits NI tasks to the injection queue, each
 *     followed by notify_work [N2, W1..W5]; then waits for their
 *     CompletionWord on its own ParkWord [C1, C2, P0, P4]; then shuts the
 *     runtime down [X1..X3].
 *   - Task NI-1 (when SPAWN) spawns a child into its worker's deque (TaskGroup
 *     add + Worker::spawn + after_push). Every task ends with done() [C3]
 *     and the notify of the waiter [C4].
 *   - BLOCK: task 0 blocks until every other task has run (a task that
 *     waits for I/O, a lock or a latch fed by another task). Then "every
 *     task runs" needs the pool to be work-conserving: this is what the
 *     baton rule buys.
 *   - NOWAIT: the outside thread shuts the runtime down without waiting
 *     for the tasks (~Runtime with work in flight): 1 = as soon as task 0
 *     has started, 2 = right after the submits (tasks may still be in the
 *     injection queue). With NI = 1 and BLOCK, task 0 spawns the child and
 *     blocks until it has run: the shutdown exit [E1..E3] must not leave
 *     the child without a worker.
 *
 * Abstractions (argued in parking.md): SPIN's interleaving is sequentially
 * consistent; the C++ orderings that make the Dekker pairs sound are argued
 * separately, and the asymmetric [N1] (with the rule that skips its heavy
 * side) is checked under x86-TSO by park_fence.pml. Queue operations are single atomic steps (the deque and the
 * injection queue have their own tests and model); queues are sets of task
 * ids and takers take the lowest id. One search round (search_rounds only
 * repeats the same steps). The kInjectEvery tick is a free choice at every
 * next_local (any call may be the tick: this includes every real spacing
 * of ticks). Batch moves of several tasks, timed sleeps (sleep_for) and
 * run_until (waiting inside a task) are not modelled.
 *
 * Switches (spin -DNAME=value):
 *   N         workers (2 or 3)            NI       injected tasks (1..2)
 *   SPAWN     task NI-1 spawns a child      BLOCK    task 0 blocks (above)
 *   SPURIOUS  spurious futex wakes allowed in the whole run
 *   W2CAS     1 = [W2] is a CAS that requires S == 0 (the code)
 *             0 = [W2] fetch_add after the [W1] load (a recorded defect:
 *                 a wake while someone searches; cap exceeded): must be
 *                 caught
 *   POS_FIRST 1 = [W3] (pos_[w] = -1) before the [W2] RMW (a recorded
 *                 defect: the wakee's lock-free withdraw can see -1
 *                 before it is counted): must be caught. 0 = after it.
 *   WAKE_ASSERT 0 = drop the "S == 0 at [W2]" assertion (to isolate
 *             POS_FIRST from the W2CAS defect)
 *   TRUST_TOKEN 1 = [P5] trusts a kHandedOff token instead of asking the
 *             list (a recorded defect): must be caught
 *   START_PARKED  1 = every worker starts asleep on the idle list (skips
 *             the start-up races; used to keep N = 3 small)
 *   CAPSLACK  searchers allowed above ceil(N/2) by the cap assertion
 *   STRICT_WAKES  also assert "at most one hand-off per push" (false: a
 *             producer's late wake and a baton wake can serve one task)
 * Ablations (each must be caught):
 *   NO_RECHECK  park sleeps without the [P2] recheck of the queues
 *   NO_BATON    found_work does not wake the next worker ([S3] skipped)
 *   NO_TOKEN    wakers only FUTEX_WAKE, the word carries no token; the
 *               sleeper waits once and asks the idle list
 *   EARLY_EXIT  at shutdown a worker leaves as soon as it sees no work,
 *               without waiting for the others to go quiet (the code
 *               before [E2]/[E3]; with NOWAIT and BLOCK it strands the
 *               child)
 *   NO_EXIT_CAS [E3] leaves on the [E2] snapshot alone, without the CAS
 *               that checks nobody moved since
 *   NO_LOCAL_FOUND  a task next_local returns runs without found_work()
 *               when the worker is still counted as a searcher (a waker
 *               handed off to it and the tick took an injected task): it
 *               keeps S > 0 while it runs, so producers wake nobody
 */

#ifndef N
#define N 2
#endif
#ifndef NI
#define NI 2
#endif
#ifndef SPAWN
#define SPAWN 1
#endif
#ifndef BLOCK
#define BLOCK 0
#endif
#ifndef SPURIOUS
#define SPURIOUS 1
#endif
#ifndef TRUST_TOKEN
#define TRUST_TOKEN 0
#endif
#ifndef POS_FIRST
#define POS_FIRST 0
#endif
#ifndef WAKE_ASSERT
#define WAKE_ASSERT 1
#endif
#ifndef W2CAS
#define W2CAS 1
#endif
#ifndef START_PARKED
#define START_PARKED 0
#endif
#ifndef CAPSLACK
#define CAPSLACK 0
#endif
#ifndef STRICT_WAKES
#define STRICT_WAKES 0
#endif
#ifndef NO_RECHECK
#define NO_RECHECK 0
#endif
#ifndef NO_BATON
#define NO_BATON 0
#endif
#ifndef NO_TOKEN
#define NO_TOKEN 0
#endif
#ifndef NOWAIT
#define NOWAIT 0
#endif
#ifndef EARLY_EXIT
#define EARLY_EXIT 0
#endif
#ifndef NO_EXIT_CAS
#define NO_EXIT_CAS 0
#endif
#ifndef NO_LOCAL_FOUND
#define NO_LOCAL_FOUND 0
#endif

#define EXT    N                 /* ParkWord index of the outside thread */
#define NONE   255
#define CAP    ((N + 1) / 2)     /* most searchers [S1] admits: ceil(N/2) */
#define CHILD  NI                /* task id of the spawned child */
#define SPAWNER (NI - 1)         /* the last injected task spawns it */
#if SPAWN
#define NT     (NI + 1)
#else
#define NT     NI
#endif
#define ALL    ((1 << NT) - 1)
#define BIT(t) (1 << (t))

/* ParkWord::word (parker.hpp) */
#define AWAKE     0
#define PARKED    1
#define NOTIFIED  2
#define HANDEDOFF 3

/* ---- shared state (the real program's) ---- */
byte S;                  /* Parking::state_ bits 0-15: searching       */
byte Q;                  /* Parking::state_ bits 16-31: quiet (idle in
                            the main loop, or left at shutdown)        */
byte I;                  /* Parking::state_ high half: idle            */
byte mu = NONE;          /* Parking::mu_ holder                        */
byte stk[N];             /* Parking::idle_ (LIFO), sp entries          */
byte sp;
byte pos[N];             /* Parking::pos_                              */
byte pw[N + 1];          /* ParkWord::word of each worker and EXT      */
bit  fw[N + 1];          /* a FUTEX_WAIT is blocked on pw[i]           */
byte inj;                /* injection queue: bit t = task t queued     */
byte dq[N];              /* each worker's deque                        */
bit  stop;               /* RuntimeImpl::stop                          */
byte cnt = NI;           /* CompletionWord: outstanding count ...      */
byte who;                /* ... and waiter id + 1 (0: none)            */

/* ---- ghost state (for the checks only) ---- */
byte spur = SPURIOUS;    /* spurious wakes left                        */
byte pushed;             /* tasks made visible                         */
byte ran;                /* tasks run                                  */
byte credit;             /* pushes + baton rechecks that saw work
                            - hand-offs: each wake has its own cause   */
bit  role[N];            /* counted in S on behalf of worker w         */
#if STRICT_WAKES
byte pcred;              /* pushes - hand-offs                         */
#define PCRED_PUSH pcred++
#define PCRED_WAKE assert(pcred > 0); pcred--
#else
#define PCRED_PUSH skip
#define PCRED_WAKE skip
#endif
bit  wk[N];              /* role given by a hand-off, not yet ended    */
byte exited;             /* workers that left main_loop                */
bit  extdone;            /* outside thread finished shutdown           */

#define SUMROLE   (role[0] + role[1] + (N > 2 -> role[N - 1] : 0))
#define SUMWK     (wk[0] + wk[1] + (N > 2 -> wk[N - 1] : 0))

/* take the lowest task id out of queue q into t (one atomic step) */
#define TAKE(q) t = 0; do :: (q >> t) & 1 -> break :: else -> t++ od; q = q & ~BIT(t)

/* S counts exactly the searcher roles; I is the list's length whenever
 * mu_ is free; the cap; at most one unresolved wakee. Checked in every
 * state by the monitor below. */
#define INV_S    (S == SUMROLE)
#define INV_I    (mu != NONE || I == sp)
#define INV_CAP  (S <= CAP + CAPSLACK)
#define INV_WK   (SUMWK <= 1)
/* every park here is a main-loop park (run_until is not modelled) */
#define INV_Q    (mu != NONE || Q == I + exited)
#define INV      (INV_S && INV_I && INV_CAP && INV_WK && INV_Q)

/* any_work_visible() (worker.cpp): injection, then every deque, one load
 * each ([S3] / [P2]). Sets seen. */
inline visible() {
  atomic { if :: inj != 0 -> seen = 1 :: else -> skip fi; v = 0 };
  do
  :: seen || v == N -> break
  :: else -> atomic { if :: dq[v] != 0 -> seen = 1 :: else -> skip fi; v++ }
  od;
  v = 0
}

/* Parking::wake_one + ParkWord::hand_off. `me` is the caller. */
inline wake_one() {
  atomic {                                             /* [W1] */
    mu == NONE -> mu = me;
    if
    :: S != 0 || sp == 0 -> mu = NONE; v = NONE
    :: else -> v = stk[sp - 1]           /* idle_.back() */
    fi
  };
  if
  :: v == NONE -> v = 0
  :: else ->
#if POS_FIRST
     atomic { sp--; stk[sp] = 0; pos[v] = NONE };        /* [W3] before [W2] */
#endif
     atomic {                                             /* [W2] */
       if
       :: W2CAS && !POS_FIRST && S != 0 -> mu = NONE; v = NONE
       :: else ->
#if WAKE_ASSERT
          assert(S == 0);              /* wake only when nobody searches */
#endif
          assert(SUMWK == 0);          /* one unresolved wakee at a time  */
          I--; Q--; S++; assert(!role[v]); role[v] = 1; wk[v] = 1;
          assert(credit > 0); credit--;  /* one wake per cause */
          PCRED_WAKE;
#if POS_FIRST
          mu = NONE
#endif
       fi
     };
     if
     :: v == NONE -> v = 0
     :: else ->
#if !POS_FIRST
        atomic { sp--; stk[sp] = 0; pos[v] = NONE; mu = NONE };   /* [W3] */
#endif
#if NO_TOKEN
        atomic { old = pw[v] };
#else
        atomic { old = pw[v]; pw[v] = HANDEDOFF };       /* [W4] */
#endif
        if
        :: old == PARKED -> atomic { fw[v] = 0; old = AWAKE }   /* [W5] */
        :: else -> old = AWAKE
        fi;
        v = 0
     fi
  fi
}

/* Parking::should_wake [N1 fence, N2 load] then wake_one: notify_work()
 * and Worker::after_push(). Under SPIN's interleaving the fence [N1] is a
 * no-op; its job (no load before the push) is argued in parking.md, also
 * for its asymmetric form on a worker's push (a compiler barrier there,
 * membarrier(2) before the [P2] and [S3] rechecks). */
inline notify_work() {
  if
  :: S == 0 && I > 0 -> wake_one()                      /* [N2] */
  :: else -> skip
  fi
}

/* ParkWord::notify() on word x: [C4]. A token is written back unchanged
 * in the code (an RMW, for C++20's ordering: parking.md, "Tokens
 * persist"); under SPIN's interleaving that changes nothing. */
inline notify(x) {
#if NO_TOKEN
  atomic { old = pw[x] };
#else
  atomic {
    old = pw[x];
    if
    :: old == NOTIFIED || old == HANDEDOFF -> old = AWAKE
    :: else -> pw[x] = NOTIFIED
    fi
  };
#endif
  if
  :: old == PARKED -> atomic { fw[x] = 0; old = AWAKE }     /* futex_wake */
  :: else -> old = AWAKE
  fi
}

/* ParkWord::sleep() on word x (the load and the FUTEX_WAIT are merged:
 * the kernel repeats the comparison atomically), then the exchange that
 * consumes the token [P5a]. Under NO_TOKEN: a single FUTEX_WAIT. */
inline sleep(x) {
  do
  :: atomic {
       if
       :: pw[x] == PARKED -> fw[x] = 1                  /* [P4] */
       :: else -> break
       fi
     };
     if
     :: !fw[x] -> skip
     :: atomic { spur > 0 && fw[x] -> spur--; fw[x] = 0 }  /* spurious */
     fi;
#if NO_TOKEN
     break
#endif
  od;
  atomic { tok = pw[x]; pw[x] = AWAKE }                 /* [P5a] */
}

/* Parking::withdraw for worker w: [P3a, P3b] / [P5b, P5c].
 * res = 1: a waker took w off the list (w is counted as a searcher). */
inline withdraw(res) {
  atomic {                                   /* lock-free: pos_[w] < 0 ? */
    if
    :: pos[w] == NONE -> res = 1; assert(role[w])
    :: else -> res = 0
    fi
  };
  if
  :: res == 0 ->
     atomic {                                /* under mu_ */
       mu == NONE ->
       if
       :: pos[w] == NONE -> res = 1; assert(role[w])
       :: else ->
          sp--; v = stk[sp]; stk[pos[w]] = v; pos[v] = pos[w]; stk[sp] = 0;
          pos[w] = NONE; I--; Q--; v = 0
       fi
     }
  :: else -> skip
  fi
}

/* Worker::found_work: [S2] then the baton [S3] */
inline found_work() {
  searching = 0;
  atomic {                                               /* [S2] */
    assert(role[w] && S > 0);
    last = (S == 1 && I > 0); S--; role[w] = 0; wk[w] = 0  /* no one idle: no baton */
  };
#if !NO_BATON
  if
  :: last -> last = 0; visible();                        /* [S3] */
     if :: seen -> seen = 0; credit++; wake_one() :: else -> skip fi
  :: else -> skip
  fi;
#endif
  last = 0
}

proctype Worker(byte w)
{
  bit searching;        /* Worker::searching_ */
  bit seen, last, allq;
  byte sS, sI, sQ;      /* the [E2] snapshot */
  byte t = NONE, v, tok, old;
  byte me = w;

#if START_PARKED
  goto asleep;
#endif
top:
  /* Worker::loop; done(ctx) is `never` for main_loop. next_local: */
  atomic {
    if
    :: inj != 0 -> TAKE(inj)                               /* the tick: [Q3] */
    :: dq[w] != 0 -> TAKE(dq[w])                           /* [Q4] */
    :: dq[w] == 0 -> skip                                  /* not the tick, empty */
    fi;
    sS = 0; sI = 0; sQ = 0
  };
  if
  :: t != NONE ->
#if NO_LOCAL_FOUND
     skip;                                                 /* ablation only */
#else
     if :: searching -> found_work() :: else -> skip fi;   /* found while counted */
#endif
     goto exec
  :: else -> skip
  fi;

  /* search() */
  if
  :: !searching ->
     atomic {                                              /* [S1] */
       if
       :: 2 * S >= N && S > 0 -> skip
       :: else -> assert(!role[w]); S++; role[w] = 1; searching = 1
       fi
     }
  :: else -> skip
  fi;
  atomic { if :: inj != 0 -> TAKE(inj) :: else -> skip fi };        /* [Q3] */
  if
  :: t != NONE -> if :: searching -> found_work() :: else -> skip fi; goto exec
  :: t == NONE && !searching -> goto nowork         /* over the cap */
  :: else -> skip
  fi;
  v = 0;                                   /* steal_round */
  do
  :: t != NONE || v == N -> break
  :: else -> atomic { if :: v != w && dq[v] != 0 -> TAKE(dq[v]) :: else -> skip fi; v++ }  /* [Q5] */
  od;
  v = 0;
  if
  :: t != NONE -> found_work(); goto exec
  :: else -> skip
  fi;

nowork:
  if
  :: stop ->                                               /* [E1] */
     if :: searching -> found_work() :: else -> skip fi;
     atomic { sS = S; sI = I; sQ = Q };                     /* [E2] */
     atomic { if :: inj != 0 -> TAKE(inj) :: else -> skip fi };
     v = 0;
     do
     :: t != NONE || v == N -> break
     :: else -> atomic { if :: v != w && dq[v] != 0 -> TAKE(dq[v]) :: else -> skip fi; v++ }
     od;
     v = 0;
     if :: t != NONE -> goto exec :: else -> skip fi;
     visible();
     if :: seen -> seen = 0; goto top :: else -> skip fi;
#if EARLY_EXIT
     atomic { Q++; exited++ };
     goto leave;
#else
     atomic {                                              /* [E3] */
       if
       :: sQ + 1 == N && (NO_EXIT_CAS || (S == sS && I == sI && Q == sQ)) ->
          Q++; exited++; last = 1
       :: else -> last = 0
       fi;
       sS = 0; sI = 0; sQ = 0                  /* the snapshot is dead */
     };
     if
     :: last -> last = 0; credit++; wake_one(); goto leave  /* hand the exit on */
     :: else -> skip                                         /* someone runs: park */
     fi
#endif
  :: else -> skip
  fi;

  /* park() */
  atomic {                                                 /* [P0] */
    if
    :: pw[w] == AWAKE -> pw[w] = PARKED; tok = AWAKE
    :: else -> tok = pw[w]; pw[w] = AWAKE
    fi
  };
  if :: tok != AWAKE -> tok = AWAKE; goto top :: else -> skip fi;
  atomic {                                                 /* [P1] */
    mu == NONE ->
    assert(pos[w] == NONE && searching == role[w]);
    pos[w] = sp; stk[sp] = w; sp++; I++; Q++; allq = (Q == N);
    if :: searching -> S--; role[w] = 0; wk[w] = 0 :: else -> skip fi;
    searching = 0
  };
#if EARLY_EXIT
  allq = 1;
#endif
  atomic { if :: stop && allq -> seen = 1 :: else -> skip fi };    /* [P2] */
  allq = 0;
#if !NO_RECHECK
  if :: !seen -> visible() :: else -> skip fi;             /* [P2] */
#endif
  if
  :: seen ->
     seen = 0;
     withdraw(searching);                                  /* [P3a, P3b] */
     atomic { pw[w] = AWAKE };                             /* [P3c] cancel */
     goto top
  :: else -> skip
  fi;
asleep:
  sleep(w);                                                /* [P4], [P5a] */
  if
  :: tok == HANDEDOFF && TRUST_TOKEN ->                    /* trusted */
     searching = 1; assert(role[w] && pos[w] == NONE)      /* ablation only */
  :: else -> withdraw(searching)                           /* [P5b, P5c] */
  fi;
  tok = AWAKE;
  goto top;

exec:
  atomic {                                                 /* execute */
    assert(pos[w] == NONE);          /* a listed worker never runs a task */
    assert((pushed & BIT(t)) && !(ran & BIT(t)));   /* exactly once */
    ran = ran | BIT(t)
  };
progress_run:
#if SPAWN
  if
  :: t == SPAWNER ->
     atomic { cnt++ };                                     /* TaskGroup add */
     atomic { dq[w] = dq[w] | BIT(CHILD); pushed = pushed | BIT(CHILD); credit++; PCRED_PUSH };  /* [Q2] */
     notify_work()                                          /* after_push */
  :: else -> skip
  fi;
#endif
#if BLOCK
  if :: t == 0 -> (ran == ALL) :: else -> skip fi;         /* blocks */
#endif
  atomic { last = (cnt == 1 && who != 0); cnt-- };          /* [C3] done() */
  if :: last -> last = 0; notify(EXT) :: else -> skip fi;   /* [C4] */
  t = NONE;
  goto top;

leave:
  assert(!searching && !role[w] && pos[w] == NONE)
}

/* invariants in every state */
active proctype monitor()
{
end:
  atomic { !(INV) -> assert(INV_S); assert(INV_I); assert(INV_CAP); assert(INV_WK); assert(INV_Q) }
}

init {
  byte i, t, v, tok, old;
  bit seen;
  byte me = EXT;
  atomic {
    i = 0;
    do :: i < N -> pos[i] = NONE; i++ :: else -> break od;
#if START_PARKED
    i = 0;
    do :: i < N -> stk[i] = i; pos[i] = i; pw[i] = PARKED; i++ :: else -> break od;
    sp = N; I = N; Q = N;
#endif
    i = 0;
    do :: i < N -> run Worker(i); i++ :: else -> break od;
    i = 0
  };
  /* submit NI tasks: RuntimeImpl::inject */
  do
  :: i < NI ->
     atomic { inj = inj | BIT(i); pushed = pushed | BIT(i); credit++; PCRED_PUSH };   /* [Q1] */
     notify_work();
     i++
  :: else -> break
  od;
#if NOWAIT
#if NOWAIT == 1
  (ran & 1) != 0;       /* task 0 has started: shut down with it running */
#endif
  goto shut;            /* NOWAIT 2: right after the submits, tasks queued */
#endif
  /* CompletionWord::wait on the outside thread's ParkWord */
  atomic {                                                 /* [C1] */
    if :: cnt == 0 -> t = 0 :: else -> who = EXT + 1; t = 1 fi
  };
  if
  :: t == 1 ->
     do
     :: cnt == 0 -> break                                  /* [C2] */
     :: else ->
        atomic {                                           /* [P0] */
          if
          :: pw[EXT] == AWAKE -> pw[EXT] = PARKED; tok = AWAKE
          :: else -> tok = pw[EXT]; pw[EXT] = AWAKE
          fi
        };
        if
        :: tok != AWAKE -> tok = AWAKE
        :: else ->
           if
           :: cnt == 0 -> atomic { pw[EXT] = AWAKE }; break     /* [C2], cancel */
           :: else -> sleep(EXT); tok = AWAKE
           fi
        fi
     od;
     who = 0
  :: else -> skip
  fi;
  t = 0;
  assert(ran == ALL);
shut:
  /* RuntimeImpl::shutdown ([X1], [X2] in stop_workers) */
  stop = 1;                                                /* [X1] */
  i = 0;
  credit++; wake_one();                                    /* [X2] wake one quiet worker; the exit chain [E3] does the rest */
  (exited == N);                                           /* [X3] join */
  assert(S == 0 && I == 0 && sp == 0 && inj == 0 && Q == N);
  assert(ran == ALL);                 /* nothing accepted was dropped */
  extdone = 1
}

/* every pushed task is eventually run (no lost wakeup) */
ltl nolost {
  [] ((((pushed & 1) != 0) -> <> ((ran & 1) != 0)) &&
      (((pushed & 2) != 0) -> <> ((ran & 2) != 0)) &&
      (((pushed & 4) != 0) -> <> ((ran & 4) != 0)))
}
/* and the runtime shuts down */
ltl alldone { <> extdone }
