/*
 * park_fence.pml -- SPIN model of the asymmetric [N1] barrier of parking
 * under x86-TSO, and of the rule that lets the [P2] and [S3] rechecks skip
 * its heavy side (docs/design/parking.md, "When the heavy side can be
 * skipped"; code: Worker::park, Worker::found_work, Parking::announce_idle,
 * Parking::stop_searching).
 *
 * parking.pml checks the protocol under sequential consistency, where the
 * fences do nothing. This model keeps only what the fences are about and
 * gives the producing worker a store buffer:
 *
 *   worker 0 (P)  busy: pushes the task t onto its own deque (a store that
 *                 sits in P's store buffer until it drains), then [N1] and
 *                 [N2] loads state_: S == 0 && I > 0 -> wake_one. [N1] is
 *                 a compiler barrier while P's deque is unfenced and a
 *                 full fence while it is fenced (its steal gate shows
 *                 kFenced, in memory: `gate`; P's own copy `pm`; either
 *                 at the start). After [N2], P switches the gate as the
 *                 code does: off [D2] when everyone was busy, on [D1]
 *                 when someone was idle or searching (both locked RMWs,
 *                 which drain its buffer). Then either its task blocks until t has run
 *                 (a lock or a latch fed by t: the case where somebody else
 *                 must run t) or, with PIDLE=1, it may also run t itself
 *                 and park.
 *   worker 1 (X)  SCEN=1: a searcher that finds nothing and parks:
 *                 its own gate on [D1] (as every parker), [P1]
 *                 (RMW: I += 1, S -= 1), the heavy fence unless the skip
 *                 rule says otherwise, the [P2] recheck of P's deque.
 *                 SCEN=2: a searcher that found other work b: [S2] (RMW:
 *                 S -= 1), and if it was the last searcher with someone
 *                 idle, the heavy fence unless skipped and the [S3]
 *                 recheck, waking one if t is visible; then it runs b,
 *                 which blocks until t has run.
 *   worker 2 (Y)  (N=3) idle and asleep from the start (its gate is on:
 *                 parking turned it on); with YBUSY=1 it starts busy,
 *                 its task ends, and it searches [S1], finds nothing and
 *                 parks as X does in SCEN=1.
 *
 * x86-TSO as modelled: P's push is one buffered store; a locked RMW of
 * state_ drains the issuing thread's buffer first ([P1], [S2], [W2]);
 * membarrier(2) drains every buffer; a thread's own loads see its
 * buffered store; a buffer drains at any moment (the drainer process) and
 * before a thread blocks in the kernel. Loads and RMWs of state_ are
 * atomic steps on memory.
 *
 * Switches: N workers (2 or 3), SCEN (1 park, 2 baton), PIDLE (1: P may
 * run t itself and park, so that every worker can be idle and the skip is
 * taken), XBUSY (1: X starts busy and becomes a searcher, [S1], so that an
 * earlier push of P may see everyone busy and turn P's gate off [D2]
 * while X searches), YBUSY (1, N=3: Y starts busy and parks, so that
 * with XBUSY=1 an earlier push of P may see everyone busy and turn P's
 * gate off [D2] around the baton's [S2], while Y is idle by the time of
 * the [S3]: the third case of parking.md's argument for the gates), SC
 * and REACH (below), RULE:
 *
 * Rules for skipping the heavy fence (RULE):
 *   0  never skip (the symmetric rule: a membarrier before every recheck)
 *   1  the count alone: [P2] skips iff [P1] made every worker idle (I == N
 *      after it); [S3] skips iff [S2] read I == N - 1 (every other worker
 *      idle)
 *   5  the code: the count, or every other worker's gate read kFenced
 *      after the RMW (Worker::others_push_fenced)
 * Ablations (each must be caught: t never runs, every worker asleep or
 * blocked):
 *   2  skip whenever some other worker is idle
 *   3  always skip (no membarrier at all)
 *   4  [P2] uses the [S3] count: skip iff I >= N - 1 after [P1]
 *   6  rule 5, but a push on a fenced deque keeps the compiler barrier
 *      at [N1] (the gate then says nothing about the push)
 *   7  rule 5, but the gates are read before the RMW ([P2] and [S3])
 *   8  rule 5, but the [S3] alone reads the gates before its [S2] (the
 *      parkers keep rule 5, so only the baton can lose t)
 *
 * Sanity: SC=1 puts P's push straight into memory; then even RULE=3
 * must pass, which shows that the ablations fail because of the store
 * buffer and not because the model is wrong elsewhere.
 *
 * Reachability: REACH=1 asserts that P's [D2] never clears a kFenced that
 * the baton's [S3] read to skip its membarrier. The check expects that
 * assertion to fail: the case the gate rule must handle happens in the
 * scenario, so a passing check there means something.
 *
 * Not modelled: producers outside the pool (they fence fully, so their
 * side is sequentially consistent and parking.pml covers it), more than
 * one task, the idle list's order and the ParkWord tokens (parking.pml),
 * the deque's own steal gate (deque.pml).
 */

#ifndef N
#define N 3
#endif
#ifndef SCEN
#define SCEN 1
#endif
#ifndef RULE
#define RULE 1
#endif
#ifndef PIDLE
#define PIDLE 0
#endif
#ifndef SC
#define SC 0
#endif
#ifndef XBUSY
#define XBUSY 0
#endif
#ifndef YBUSY
#define YBUSY 0
#endif
#ifndef REACH
#define REACH 0
#endif

#if XBUSY
byte S = 0;          /* X starts busy and becomes a searcher [S1] */
#else
byte S = 1;          /* searching: X starts as a searcher */
#endif
#if YBUSY
byte I = 0;          /* Y starts busy */
#else
byte I = N - 2;      /* idle: Y (when N == 3) */
#endif
bit idle[N];         /* on the idle list */
bit woken[N];        /* handed off by a waker ([W4]) */
bit sbuf;            /* P's store buffer holds the push of t */
bit dq;              /* memory: P's deque holds t */
bit taken;           /* t has been taken (it runs) */
bit skipped;         /* ghost: some recheck skipped the heavy fence */
bit gskip;           /* ghost: skipped on the gates, not the count */
bit bskip;           /* ghost: the baton's [S3] skipped on the gates */
bit gate;            /* memory: P's steal gate shows kFenced */
bit pm;              /* P's own copy of it (Deque::fence_mode_) */
bit xgate;           /* memory: X's gate (X pushes nothing) */
bit ygate;           /* memory: Y's gate (Y pushes nothing) */

/* every other worker's gate shows kFenced */
#if N == 3
#define OTHERS_FENCED(me) ((me) == 0 -> (xgate && ygate) : \
                           ((me) == 1 -> (gate && ygate) : (gate && xgate)))
#else
#define OTHERS_FENCED(me) ((me) == 0 -> xgate : gate)
#endif

/* t can be taken by `me`: from memory, or P from its own buffer */
#define VISIBLE(me) (!taken && (dq || ((me) == 0 && sbuf)))
#define TAKE        taken = 1; dq = 0; sbuf = 0

inline DRAIN() {
  if
  :: sbuf -> dq = 1; sbuf = 0
  :: else -> skip
  fi
}

/* [W1..W4]: only while nobody searches ([W2] is a CAS requiring S == 0);
 * the wakee leaves the idle list and counts as a searcher */
inline WAKE_ONE(me) {
  atomic {
    if
    :: me == 0 -> DRAIN()                  /* [W2] is a locked RMW */
    :: else -> skip
    fi;
    if
    :: S == 0 && I > 0 ->
       if
       :: idle[0] -> idle[0] = 0; woken[0] = 1
       :: idle[1] -> idle[1] = 0; woken[1] = 1
#if N == 3
       :: idle[2] -> idle[2] = 0; woken[2] = 1
#endif
       fi;
       I--; S++
    :: else -> skip
    fi
  }
}

/* a thief takes t: only from memory; P also sees its own buffer */
inline TRY_TAKE(me) {
  atomic {
    if
    :: VISIBLE(me) -> TAKE
    :: else -> skip
    fi
  }
}

/* a woken worker searches until t is taken (by it or by another) */
inline AFTER_WAKE(me) {
  do
  :: taken -> break
  :: atomic { VISIBLE(me) -> TAKE }; break
  od
}

/* Worker::park from [D1] on, for worker `me` (searching: X) */
inline PARK(me, searching) {
  atomic {                                               /* [D1]: own gate on */
    if
    :: me == 0 && !pm -> DRAIN(); gate = 1; pm = 1       /* locked RMW */
    :: me == 0 && pm -> skip                             /* already on */
    :: me == 1 -> xgate = 1
    :: me == 2 -> ygate = 1
    fi
  };
#if RULE == 7
  early = OTHERS_FENCED(me);                             /* ablation only */
#endif
  atomic {                                               /* [P1] */
    if
    :: me == 0 -> DRAIN()                                /* locked RMW */
    :: else -> skip
    fi;
    idle[me] = 1; I++;
    if
    :: searching -> S--
    :: else -> skip
    fi;
#if RULE == 0
    skip_it = 0
#elif RULE == 1
    skip_it = (I == N)
#elif RULE == 2
    skip_it = (I >= 2)                                   /* ablation only */
#elif RULE == 3
    skip_it = 1                                          /* ablation only */
#elif RULE == 4
    skip_it = (I >= N - 1)                               /* ablation only */
#else
    skip_it = (I == N)
#endif
  };
#if RULE >= 5
  if                                                     /* others_push_fenced */
  :: !skip_it ->
#if RULE == 7
     skip_it = early;
#else
     skip_it = OTHERS_FENCED(me);
#endif
     gskip = skip_it
  :: else -> skip
  fi;
#endif
  if
  :: skip_it -> skipped = 1                              /* heavy fence skipped */
  :: else -> atomic { DRAIN() }                          /* membarrier(2) */
  fi;
  /* [P2] recheck of P's deque */
  if
  :: atomic { VISIBLE(me) ->                             /* work seen: withdraw [P3] */
       if
       :: idle[me] -> idle[me] = 0; I--
       :: else -> S--                                    /* woken meanwhile: a searcher */
       fi;
       TAKE }
  :: else ->
end_sleep:                                               /* [P4] */
     woken[me];
     AFTER_WAKE(me)
  fi
}

proctype producer() {
  bit skip_it;
  bit early;
  bit allbusy;
  bit wake;
  /* an earlier push: its [N2], and [D2] if it read everyone busy */
  allbusy = (S == 0 && I == 0);
  if
  :: pm && allbusy -> atomic { assert(!(REACH && bskip)); DRAIN(); gate = 0 }; pm = 0
  :: else -> skip
  fi;
#if SC
  dq = 1;                                                /* sanity only: no store buffer */
#else
  sbuf = 1;                                              /* push t (buffered store) */
#endif
#if RULE != 6
  if
  :: pm -> atomic { DRAIN() }                            /* [N1] fenced deque: full fence */
  :: else -> skip                                        /* [N1] a compiler barrier */
  fi;
#endif
  atomic {                                               /* [N2] */
    allbusy = (S == 0 && I == 0);
    wake = (S == 0 && I > 0)
  };
  if
  :: pm && allbusy -> atomic { DRAIN(); gate = 0 }; pm = 0   /* [D2] fence off (CAS) */
  :: !pm && !allbusy -> atomic { DRAIN(); gate = 1 }; pm = 1 /* [D1] fence on */
  :: else -> skip
  fi;
  if
  :: wake -> WAKE_ONE(0)
  :: else -> skip
  fi;
#if PIDLE
  if
  :: true ->
#endif
     atomic { DRAIN() };                                 /* blocking is a system call */
end_blocked:
     taken
#if PIDLE
  :: true ->                                             /* runs t itself, then parks */
     TRY_TAKE(0);
     PARK(0, 0)
  fi
#endif
}

proctype x() {
  bit skip_it;
  bit early;
  bit last;
#if XBUSY
  S++;                                                   /* [S1]: its task ended, it searches */
#endif
#if SCEN == 1
  PARK(1, 1)
#else
#if RULE == 7 || RULE == 8
  early = OTHERS_FENCED(1);                              /* ablation only */
#endif
  atomic {                                               /* [S2] */
    last = (S == 1 && I > 0);
#if RULE == 0
    skip_it = 0;
#elif RULE == 1
    skip_it = (I == N - 1);
#elif RULE == 2
    skip_it = (I >= 1);                                  /* ablation only */
#elif RULE == 3
    skip_it = 1;                                         /* ablation only */
#else
    skip_it = (I == N - 1);                              /* ablation only (4), the count (5-8) */
#endif
    S--
  };
#if RULE >= 5
  if                                                     /* others_push_fenced */
  :: last && !skip_it ->
#if RULE == 7 || RULE == 8
     skip_it = early;
#else
     skip_it = OTHERS_FENCED(1);
#endif
     gskip = skip_it; bskip = skip_it
  :: else -> skip
  fi;
#endif
  if
  :: last ->
     if
     :: skip_it -> skipped = 1                           /* heavy fence skipped */
     :: else -> atomic { DRAIN() }                       /* membarrier(2) */
     fi;
     if
     :: dq -> WAKE_ONE(1)                                /* [S3] saw t: wake one */
     :: else -> skip
     fi
  :: else -> skip
  fi;
end_blocked:
  taken                                                  /* runs b, which waits for t */
#endif
}

#if N == 3
proctype y() {
#if YBUSY
  bit skip_it;
  bit early;
  S++;                                                   /* [S1]: its task ended, it searches */
  PARK(2, 1)                                             /* finds nothing and parks */
#else
end_sleep:
  woken[2];
  AFTER_WAKE(2)
#endif
}
#endif

/* P's buffer drains at any moment */
proctype drainer() {
end:
  do
  :: atomic { sbuf -> dq = 1; sbuf = 0 }
  od
}

/* when nothing can move, t must have run: else a wakeup was lost */
proctype monitor() {
  timeout -> assert(taken == 1)
}

init {
  atomic {
    if                                                   /* P's and X's gates at the start */
    :: gate = 1; pm = 1
    :: skip
    fi;
    if
    :: xgate = 1
    :: skip
    fi;
#if N == 3
#if YBUSY
    if                                                   /* Y's gate at the start */
    :: ygate = 1
    :: skip
    fi;
#else
    idle[2] = 1; ygate = 1;
#endif
    run y();
#endif
    run producer();
    run x();
    run drainer();
    run monitor()
  }
}
