/*
 * slot.pml -- SPIN model of TaskGroup's inline slot (docs/design/slot.md).
 * Checked by docs/spec/slot.sh (make spec-slot, part of make test).
 *
 * Processes:
 *   Owner  the thread that created the group (a worker: with HELP it runs
 *          tasks while it waits, as run_until does). ROUNDS times: spawn
 *          into the free slot [G1, G2, push], then join(): pop the task
 *          back and run it ([G3o]), or find it stolen and wait_slow():
 *          register ([G6], only while busy), [C1] on pending_, then the
 *          ParkWord loop [G5, P0, G5, P4/P5a] until finished().
 *   Thief  another worker: steals the slot task while it is queued, runs
 *          it, [G3] exchange 0, [G4] notifies the id [G3] returned.
 *   X      (X=1) a waiter that is not the owner: join() from another
 *          thread, polling with sleep_for (its timeout is always possible).
 *   CHILD  (CHILD=1) the slot task spawns one heap task H into its own
 *          group (pending_.add, pushed where any worker may take it); H
 *          ends with pending_.done() [C3, C4].
 *
 * Step table: every model step is one atomic operation of the code (or a
 * step with no shared atomic, marked "ghost"):
 *
 *   model step        file : function                     atomic operation
 *   [G1]              task_group.hpp : spawn              slot_.load(acquire), then pending_
 *                                                         load (is_zero): the whole group idle
 *   [G1f]             task_group.hpp : spawn              no step: the owner's first slot spawn in
 *                                                         the flow that constructed the group skips
 *                                                         [G1]'s loads (slot_known_unused, a
 *                                                         compile-time fact). Not modelled: here no
 *                                                         thread spawns before round 0, so [G1] can
 *                                                         only pass there; a heap task spawned
 *                                                         before it (slot.md) is left to the test
 *                                                         GroupSlot.FirstSpawnOfAPublishedGroup
 *   [G2]              task_group.hpp : spawn              slot_.store(kSlotBusy, relaxed)
 *   push              worker deque push / inject          the push's release store (one step:
 *                                                         the deque has its own tests)
 *   [Q4] pop          task_group.cpp : run_own_task,      deque take() (one step)
 *                     worker.cpp : next_local (HELP)
 *   [Q5] steal        worker.cpp : steal_round            deque steal() (one step)
 *   run, destroy      Body::run: fn(), ~Body()            ghost (no shared atomic)
 *   [G3o]             task_group.hpp : slot_done          slot_.store(0, release)
 *   [G3]              task_group.cpp : slot_done_remote   slot_.exchange(0, acq_rel)
 *   [G4]              task_group.cpp : slot_done_remote   -> completion.cpp : wake_waiter ->
 *                     parker.hpp : notify                 CAS to kNotified (the CAS loop has one
 *                                                         successful CAS), then FUTEX_WAKE if it
 *                                                         replaced kParked
 *   [G5]              task_group.hpp : finished           slot_.load(acquire), then
 *                                                         pending_ load (CHILD only; else 0)
 *   [G6] load         task_group.cpp : wait_check         slot_.load(acquire)
 *   [G6]              task_group.cpp : wait_check         slot_.compare_exchange_weak(acq_rel)
 *                                                         (SPURIOUS: may fail spuriously)
 *   [C1]              completion.cpp : register_waiter    pending_ load, then CAS (CHILD only;
 *                                                         with pending_ always 0 it returns
 *                                                         kDone and is left out)
 *   [C1] clear        task_group.cpp : wait_slow          pending_.fetch_and(kCountMask)
 *   add               task.hpp : CompletionWord::add      pending_.fetch_add(1) (CHILD)
 *   [C3]              task.hpp : CompletionWord::done     pending_.fetch_sub(1, acq_rel) (CHILD)
 *   [C4]              task.hpp : CompletionWord::done     notify, as [G4]
 *   [P0] announce     parker.hpp : announce               CAS kAwake->kParked; on failure the
 *                                                         exchange(kAwake) that takes the token
 *                                                         (merged: only the owner changes a token)
 *   [P3c] cancel      parker.hpp : cancel                 exchange(kAwake)
 *   [P4]              parker.hpp : sleep / sleep_for      load == kParked and FUTEX_WAIT merged
 *                                                         (the kernel compares atomically)
 *   [P5a]             parker.hpp : sleep / sleep_for      exchange(kAwake)
 *
 * SPIN's interleaving is sequentially consistent; the orderings that make
 * the pairs sound are argued in slot.md and parking.md. The owner's wait
 * is block_until's ParkWord loop ([C2] = [G5]); a worker owner's
 * run_until parks through parking.pml's [P0..P5] on the same ParkWord with
 * the same announce / recheck / sleep shape, and its recheck [P2] also
 * looks for visible work (modelled: the queued slot task and H). Heap
 * tasks other than H, the exception path and spawn's undo are not
 * modelled.
 *
 * Switches (spin -DNAME=value):
 *   ROUNDS    spawn+join rounds of the owner (1..3)
 *   HELP      1 = the owner is a worker: its wait loop pops/steals and runs
 *               tasks (run_until); 0 = an outside thread (block_until)
 *   SPURIOUS  budget of spurious events: FUTEX_WAIT returning without a
 *             wake, compare_exchange_weak failing although the value matched
 *   THIEF     0 = no thief: the owner runs every slot task ([G3o])
 *   X         1 = add the non-owner waiter X
 *   X_OLD     1 = a recorded bug, must be caught: X polls only if the
 *             slot is busy at wait_blocking's first load, else sleeps
 *             untimed for good. 2 = a recorded bug, must be caught with
 *             ROUNDS=3: wait_check
 *             decided from a slot load taken before its [C1], so the owner
 *             could reuse the slot in between. 0 = the code as it is:
 *             X's wait_check (every check, and the recheck after [P0])
 *             registers in pending_ ([C1]), then decides on one snapshot:
 *             X sleeps untimed only when the slot is free and pending_ is
 *             zero or carries X's id; a busy slot or another waiter's id
 *             turns the wait timed. (The owner's loop sleeps whenever
 *             finished() is false: the code's owner sleeps in a subset of
 *             those states, since it also looks again unless registered
 *             everywhere, so the model over-approximates its sleeps.)
 *   XPOLL     1 (with X_OLD) = X always polls
 *   CHILD     1 = the slot task spawns a heap task H into its own group
 *   FIX       1 (default, the code) = the owner's
 *             wait_check, at every check and at the recheck after [P0],
 *             registers ([G6] on the slot, [C1] on pending_) whenever it
 *             finds a busy word with no id, so it sleeps only registered.
 *             0 = registration once, before the loop: a recorded bug
 *             with CHILD, must be caught
 * Ablations (each must be caught):
 *   G6_STORE           [G6] is a plain store of (loaded value | id)
 *   REMOTE_G3O         the thief frees the slot with [G3o] (store, no [G4])
 *   X_REGISTERS        X registers with the [G6] CAS and sleeps untimed
 *                      (THIEF=0: the owner's [G3o] wipes its id; with a
 *                      thief X also takes the owner's place in the word)
 *   NO_G5_AFTER_G6     after [G6] the owner announces and sleeps without
 *                      any [G5] (neither the loop test nor the recheck)
 *   FREE_BEFORE_DESTROY the completer frees the slot ([G3]) before ~Body()
 *                      (caught as a use of the destroyed group, or with
 *                      KEEP_GROUP=1, the group kept, at the next [G2])
 * Claims (must pass):
 *   NO_POST_RECHECK    only the recheck after [P0] is dropped: the loop's
 *                      [G5] after [G6] and the persistent token suffice
 */

#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef HELP
#define HELP 1
#endif
#ifndef SPURIOUS
#define SPURIOUS 0
#endif
#ifndef X
#define X 0
#endif
#ifndef XPOLL
#define XPOLL 0
#endif
#ifndef X_OLD
#define X_OLD 0
#endif
#ifndef CHILD
#define CHILD 0
#endif
#ifndef FIX
#define FIX 1
#endif
#ifndef G6_STORE
#define G6_STORE 0
#endif
#ifndef REMOTE_G3O
#define REMOTE_G3O 0
#endif
#ifndef X_REGISTERS
#define X_REGISTERS 0
#endif
#ifndef NO_G5_AFTER_G6
#define NO_G5_AFTER_G6 0
#endif
#ifndef FREE_BEFORE_DESTROY
#define FREE_BEFORE_DESTROY 0
#endif
#ifndef THIEF
#define THIEF 1
#endif
#ifndef KEEP_GROUP
#define KEEP_GROUP 0
#endif
#ifndef NO_POST_RECHECK
#define NO_POST_RECHECK 0
#endif

/* ParkWord::word (parker.hpp) */
#define AWAKE    0
#define PARKED   1
#define NOTIFIED 2

#define OW 0                      /* the owner's ParkWord id */
#define XW 1                      /* X's ParkWord id */

/* slot_: 0 free, else kSlotBusy | (id + 1) << 32; here bit 0 | (id + 1) << 1 */
#define BUSY     1
#define WHO(v)   ((v) >> 1)
#define REG(id)  (((id) + 1) << 1)
/* pending_: count | (id + 1) << 32; here count in bits 0-1 | (id + 1) << 2 */
#define CNT(p)   ((p) & 3)
#define PWHO(p)  ((p) >> 2)
#define PREG(id) (((id) + 1) << 2)

/* ---- shared state (the program's) ---- */
byte slot;                        /* TaskGroup::slot_ */
byte pend;                        /* TaskGroup::pending_ */
byte pw[2];                       /* ParkWord::word of the owner and of X */
bit  fw[2];                       /* a FUTEX_WAIT is blocked on pw[i] */
bit  queued;                      /* the slot task sits in the owner's deque */
bit  hq;                          /* H sits in a queue any worker may take from */

/* ---- ghost state ---- */
bit  live;                        /* the slot task object exists */
bit  fnret;                       /* its fn() returned (this round) */
bit  hdone;                       /* H ran (CHILD) */
bit  gone;                        /* the owner destroyed the group */
bit  spawned;                     /* the owner's first [G2] happened */
bit  odone;                       /* the owner finished every round */
bit  xdone = (1 - X);             /* X's join returned */
byte spur = SPURIOUS;             /* spurious events left */

/* notify(x): ParkWord::notify, [G4] / [C4] */
inline notify(x) {
  atomic {
    old = pw[x];
    if :: old != NOTIFIED -> pw[x] = NOTIFIED :: else -> skip fi
  };
  if
  :: old == PARKED -> atomic { fw[x] = 0; old = 0 }          /* FUTEX_WAKE */
  :: else -> old = 0
  fi
}

/* announce on ParkWord x: tok = AWAKE if it announced, else the token */
inline announce(x) {
  atomic {                                                    /* [P0] */
    if
    :: pw[x] == AWAKE -> pw[x] = PARKED; tok = AWAKE
    :: else -> tok = pw[x]; pw[x] = AWAKE
    fi
  }
}

/* ParkWord::sleep (timed = 0) or sleep_for (timed = 1) on word x */
inline psleep(x, timed) {
  do
  :: atomic {                                                 /* [P4] */
       if
       :: pw[x] == PARKED -> fw[x] = 1
       :: else -> break
       fi
     };
     if
     :: !fw[x] -> skip                                        /* woken */
     :: atomic { spur > 0 && fw[x] -> spur--; fw[x] = 0 }     /* spurious */
     :: atomic { timed && fw[x] -> fw[x] = 0 }; break         /* timeout */
     fi;
     if :: timed -> break :: else -> skip fi
  od;
  atomic { pw[x] = AWAKE }                                    /* [P5a] */
}

/* finished(): res = 1 if the slot is free and pending_ is zero */
inline finished(res) {
  atomic { res = (slot == 0) };                               /* [G5] slot_ */
#if CHILD
  if :: res -> atomic { res = (CNT(pend) == 0) } :: else -> skip fi  /* [G5] pending_ */
#endif
}

/* [G6]: v holds the value of the [G6] load; register the owner while
 * the slot is busy and nobody is registered */
inline g6() {
#if G6_STORE
  if
  :: v != 0 && WHO(v) == 0 -> atomic { slot = v | REG(OW) }   /* ablation only */
  :: else -> skip
  fi
#else
  do
  :: v != 0 && WHO(v) == 0 ->
     atomic {                                                 /* [G6] CAS */
       if
       :: slot == v -> slot = v | REG(OW); ok = 1
       :: slot != v -> v = slot
       :: slot == v && spur > 0 -> spur--                     /* weak: spurious failure */
       fi
     };
     if :: ok -> ok = 0; break :: else -> skip fi
  :: else -> break
  od
#endif
  ; v = 0
}

/* register_waiter(pending_, me) [C1]: creg = 1 if registered, cocc = 1 if
 * another waiter is (then the caller polls) */
inline c1(me) {
  atomic { p = pend };                                        /* [C1] load */
  do
  :: CNT(p) == 0 -> break                                     /* kDone */
  :: CNT(p) != 0 && PWHO(p) == me + 1 -> creg = 1; break
  :: CNT(p) != 0 && PWHO(p) != 0 && PWHO(p) != me + 1 -> cocc = 1; break
  :: CNT(p) != 0 && PWHO(p) == 0 ->
     atomic {                                                 /* [C1] CAS */
       if
       :: pend == p -> pend = p | PREG(me); creg = 1
       :: else -> p = pend
       fi
     };
     if :: creg -> break :: else -> skip fi
  od;
  p = 0
}

/* The slot task's body and ~Body() (ghost), on any thread. With CHILD
 * its fn() spawns H: a heap task (on the owner thread too: the slot is
 * busy with this very task). */
inline run_slot() {
  atomic { assert(live && !fnret && !gone); fnret = 1 }      /* fn() */
#if CHILD
  if
  :: !hdone && !hq && CNT(pend) == 0 ->                       /* at most one H */
     atomic { pend = pend + 1 };                              /* add */
     atomic { hq = 1 }                                        /* push */
  :: else -> skip
  fi;
#endif
#if !FREE_BEFORE_DESTROY
  atomic { assert(!gone); live = 0 }                          /* ~Body() */
#endif
}

/* H's body and pending_.done() */
inline run_h() {
  atomic { assert(!hdone && !gone); hdone = 1 };              /* fn(), delete */
  atomic { old = pend; pend = pend - 1 };                     /* [C3] */
  if
  :: CNT(old) == 1 && PWHO(old) != 0 -> tgt = PWHO(old) - 1; notify(tgt); tgt = 0   /* [C4] */
  :: else -> old = 0
  fi
}

proctype Owner()
{
  byte v, p, tok, old, tgt, r;
  bit t, ok, res, creg, cocc;

  do
  :: r == ROUNDS -> break
  :: else ->
     /* spawn(): the owner, the slot free */
     atomic { v = slot };                                     /* [G1] slot_ */
     assert(v == 0);      /* the owner spawns only after its join returned */
     atomic { assert(CNT(pend) == 0) };                       /* [G1] pending_: the group idle */
     atomic {                                                 /* [G2] */
       assert(slot == 0 && !live);   /* no second slot task while one is busy */
       slot = BUSY; live = 1; fnret = 0; spawned = 1
     };
     atomic { queued = 1 };                                   /* push */

     /* join() */
     do
     :: finished(res);                                        /* [G5] */
        if :: res -> break :: else -> skip fi;
#if HELP
        atomic { t = queued; queued = 0 };                    /* [Q4] run_own_task */
#endif
        if
        :: t -> t = 0; run_slot(); atomic { slot = 0 }        /* [G3o] slot_done */
        :: else ->
           /* join: the deque is empty; wait_slow(): */
           atomic { v = slot };                               /* [G6] load */
           g6();
#if CHILD
           c1(OW);
#endif
           /* block_until (timed iff cocc) */
#if NO_G5_AFTER_G6
           goto announce_first;                               /* ablation only */
#endif
           do
           ::
#if FIX
              atomic { v = slot };                            /* wait_check: [G6] load */
              g6();
              if :: creg == 0 && cocc == 0 -> c1(OW) :: else -> skip fi;
#endif
              finished(res);                                  /* [C2] = [G5] */
              if :: res -> break :: else -> skip fi;
#if HELP
              /* run_until: next_local, then search */
              atomic { t = queued; queued = 0 };              /* [Q4] */
              if
              :: t -> t = 0; run_slot(); atomic { slot = 0 }; goto waitnext   /* [G3o] */
              :: else -> skip
              fi;
#if CHILD
              atomic { t = hq; hq = 0 };                      /* [Q5] */
              if :: t -> t = 0; run_h(); goto waitnext :: else -> skip fi;
#endif
#endif
announce_first:
              announce(OW);                                   /* [P0] */
              if
              :: tok != AWAKE -> tok = AWAKE
              :: else ->
#if FIX
                 atomic { v = slot };                         /* [G6] load */
                 g6();
                 if :: creg == 0 && cocc == 0 -> c1(OW) :: else -> skip fi;
#endif
#if !NO_POST_RECHECK && !NO_G5_AFTER_G6
                 finished(res);                               /* [G5] recheck */
#if HELP
                 if :: !res && (queued || hq) -> res = 1 :: else -> skip fi   /* [P2] work visible */
#endif
                 if
                 :: res -> res = 0; atomic { pw[OW] = AWAKE }; goto waitnext   /* [P3c] */
                 :: else -> skip
                 fi;
#endif
                 psleep(OW, cocc)                             /* [P4], [P5a] */
              fi;
waitnext:     skip
           od;
           res = 0;
#if CHILD
           if :: creg -> creg = 0; atomic { pend = CNT(pend) } :: else -> skip fi;  /* [C1] clear */
           cocc = 0;
#endif
           break                                              /* join returns */
        fi
     od;
     res = 0;
     /* join returned: the task finished */
     assert(fnret && (!CHILD || hdone));
     r++
  od;
  atomic { assert(slot == 0); gone = !KEEP_GROUP; odone = 1 }  /* ~TaskGroup */
}

proctype Thief()
{
  byte old, tgt, p;
  bit t;
end:
  do
  :: atomic { queued -> queued = 0 };                         /* [Q5] steal */
     run_slot();
#if REMOTE_G3O
     atomic { assert(!gone); slot = 0 }                       /* ablation only */
#else
     atomic { assert(!gone); old = slot; slot = 0 };          /* [G3] */
#if FREE_BEFORE_DESTROY
     atomic { assert(!gone); live = 0 };                      /* ablation only */
#endif
     if
     :: WHO(old) != 0 -> tgt = WHO(old) - 1; notify(tgt); tgt = 0   /* [G4] */
     :: else -> old = 0
     fi
#endif
#if CHILD
  :: atomic { hq -> hq = 0 };                                 /* [Q5] steal H */
     run_h()
#endif
  od
}

#if X
/* TaskGroup::wait_check for X (not the owner): [C1] unless registered,
 * then one snapshot of both words (slot first, as finished()). Finished:
 * res = 1. Else sleep (res = 0, again = 0) only if timed or every
 * non-zero word carries X's id; else "look again" (again = 1), turning
 * timed when X cannot register (busy slot, another waiter's id in
 * pending_), re-registering when pending_ has no id (the count rose). */
inline xcheck() {
  if :: !creg -> c1(XW); cocc = 0 :: else -> skip fi;         /* [C1] */
  atomic { v = slot };                                        /* [G5] slot_ */
  atomic { p = pend };                                        /* [G5] pending_ */
  if
  :: v == 0 && CNT(p) == 0 -> res = 1
  :: else ->
     res = 0;
     if
     :: timed -> skip
     :: !timed && v != 0 -> again = 1; timed = 1              /* cannot register: timed */
     :: !timed && v == 0 && CNT(p) != 0 && PWHO(p) != XW + 1 ->
        again = 1;
        if :: PWHO(p) != 0 -> timed = 1 :: else -> creg = 0 fi
     :: !timed && v == 0 && (CNT(p) == 0 || PWHO(p) == XW + 1) -> skip
     fi
  fi;
  v = 0; p = 0
}

/* The recorded bug X_OLD=2: the "poll?" decision
 * from a slot load taken before [C1], finished() from later loads */
inline xcheck_old() {
  atomic { v = slot };                                        /* wait_check: slot_ load */
  if :: v != 0 && !timed -> again = 1; timed = 1 :: else -> skip fi;  /* bug only */
  v = 0;
  if
  :: !again && !creg ->                                       /* bug only */
     c1(XW);                                                  /* bug only */
     if :: cocc && !timed -> again = 1; timed = 1 :: else -> skip fi;  /* bug only */
     cocc = 0                                                 /* bug only */
  :: else -> skip                                             /* bug only */
  fi;
  if :: !again -> finished(res) :: else -> res = 0 fi         /* bug only */
}

proctype Xwaiter()
{
  byte v, tok, p;
  bit res, timed, again, creg, cocc;
  (spawned);                       /* X waits for a group in use */
  /* join(): X is a thread outside the pool (run_own_task: nothing) */
  finished(res);                                              /* [G5] */
  if
  :: res -> goto xret
  :: else -> skip
  fi;
  /* wait_slow() */
  atomic { v = slot };                                        /* [G6] load */
#if X_REGISTERS
  if
  :: v != 0 ->                                                /* ablation only */
     do
     :: v != 0 && WHO(v) == 0 ->
        atomic { if :: slot == v -> slot = v | REG(XW); v = 0 :: else -> v = slot fi }
     :: else -> break
     od
  :: else -> skip
  fi;
  timed = 0;
#elif X_OLD == 1
  if
  :: v != 0 || XPOLL -> timed = 1                             /* not the owner: poll */
  :: else -> timed = 0                           /* bug only: bug-x-untimed */
  fi;
#else
  timed = 0;                       /* wait_check decides (xcheck below) */
#endif
  v = 0;
#if X_REGISTERS || X_OLD == 1
  do
  :: finished(res);                                           /* [C2] = [G5] */
     if :: res -> break :: else -> skip fi;
     announce(XW);                                            /* [P0] */
     if
     :: tok != AWAKE -> tok = AWAKE
     :: else ->
        finished(res);                                        /* [G5] recheck */
        if
        :: res -> atomic { pw[XW] = AWAKE }; break            /* [P3c] */
        :: else -> psleep(XW, timed)                          /* [P4], [P5a] */
        fi
     fi
  od;
#else
  do
  ::
#if X_OLD == 2
     xcheck_old();                                            /* bug only */
#else
     xcheck();                                                /* wait_check */
#endif
     if
     :: res -> break
     :: again -> again = 0                       /* block_until returns; wait_slow loops */
     :: else ->
        announce(XW);                                         /* [P0] */
        if
        :: tok != AWAKE -> tok = AWAKE
        :: else ->
#if X_OLD == 2
           xcheck_old();                                      /* bug only */
#else
           xcheck();                                          /* recheck = wait_check */
#endif
           if
           :: res -> atomic { pw[XW] = AWAKE }; break         /* [P3c] */
           :: again -> again = 0; atomic { pw[XW] = AWAKE }   /* [P3c] */
           :: else -> psleep(XW, timed)                       /* [P4], [P5a] */
           fi
        fi
     fi
  od;
  if :: creg -> creg = 0; atomic { pend = CNT(pend) } :: else -> skip fi;  /* [C1] clear */
#endif
xret:
  xdone = 1
}
#endif

init {
  atomic {
    run Owner();
#if THIEF
    run Thief();
#endif
#if X
    run Xwaiter()
#endif
  }
}

/* every round of the owner completes, and X's join returns */
ltl alldone { <> (odone && xdone) }
