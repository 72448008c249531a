/*
 * io_park.pml -- SPIN model of a worker that parks inside its io_uring
 * ring while it has I/O in flight (docs/design/io.md, "The in-ring park:
 * model and checks", has the table from step names to code; code:
 * Worker::park in userspace/worker.cpp, IoRing in userspace/io/ring.*,
 * ParkWord in userspace/parker.hpp). Checked by io_park.sh.
 *
 * What is modelled:
 *   - One worker W: its loop (reap the ring, run continuations and tasks)
 *     and its park [P0..P5] on its own ParkWord, which goes through the
 *     ring when IoRing::must_park_in_ring holds [R0]: the doorbell [D1],
 *     the ring recheck [R1], arming the ring's wait [R2] (IORING_OP_FUTEX_WAIT
 *     on the word, or a read of the doorbell eventfd in the fallback),
 *     the sleep in io_uring_enter [R3] and the reap [R4].
 *   - A producer P that makes NT tasks visible, each followed by the wake
 *     of parking.pml [N2, W2..W5], reduced to one worker: "W is listed
 *     idle" is one bit, taken by the waker or by W's own withdraw.
 *   - A canceller C on another thread: NC requests, each pushed on W's
 *     mailbox [M1] and followed by ParkWord::notify [M2].
 *   - The kernel: user operations in flight complete at any time [K1]
 *     (NRUN of them), except NSTUCK that complete only when cancelled (a
 *     read on a quiet socket). A completion is deferred work (DEFER_TASKRUN):
 *     queued on a list, and IORING_SQ_TASKRUN set in a second step if the
 *     list was empty [K1a, K1b]; the owner's entries run the list, posting
 *     the CQEs and clearing the flag; the flag can so be left set with
 *     nothing behind it, and [F1] clears it; FUTEX_WAKE wakes one waiter of the word,
 *     either one if there are two [K2]; a ring FUTEX_WAIT whose expected
 *     value differs from the word when it is submitted completes at once
 *     (-EAGAIN); an eventfd counter and the ring's read of it [K3];
 *     io_uring_enter(GETEVENTS, 1) sleeps until the CQ is non-empty.
 *   - Spurious wakes (SPURIOUS of them in the whole run): futex_wait
 *     returning early, io_uring_enter returning without a CQE (a signal,
 *     the 1 ms timed park), the ring's FUTEX_WAIT completing unasked.
 *     The kernel may also stop them for good at any moment, so that weak
 *     fairness cannot force a spurious wake that would hide a lost one.
 *     STRAY: a stale notify() of W's word (a CompletionWord id reused).
 *
 * Properties: the monitor's invariants in every state (below); at
 * quiescence nothing is left (no task, CQE, continuation or request);
 * the ltl claims nolost, nocqe, nocancel and settles at the end, checked
 * with weak fairness.
 *
 * Abstractions (io.md argues them):
 *   - SPIN's interleaving is sequentially consistent; every access to the
 *     word, the mailbox and the idle list is seq_cst in the code.
 *   - The idle list, the searcher count and the other workers are
 *     parking.pml's; here they are the bit `listed`, and the queues P's
 *     tasks go to are one counter `tq`.
 *   - The ring wait's and the ASYNC_CANCELs' completions are posted as
 *     CQEs at once (they too are deferred work, whose flag [K1a, K1b]
 *     model for the user operations). The reap takes every CQE present in
 *     one step.
 *   - An operation is in the kernel from the moment it is counted in
 *     ops_ (the code submits queued SQEs at its next enter: the model
 *     only allows earlier completions). SQEs that run out, and so the
 *     timed park without an armed wait, are not modelled.
 *   - A cancel request drained by W becomes an ASYNC_CANCEL whose own CQE
 *     the kernel posts while it submits it (the opcode completes inline),
 *     so the same poll() reaps it; its target, if still in flight,
 *     completes later with -ECANCELED [K1]. CANCEL_ASYNC=1 drops that
 *     assumption (below).
 *   - Shutdown (cancel_everything, ~IoRing) and multishot accepts are not
 *     modelled.
 *
 * Switches (spin -DNAME=value):
 *   EVENTFD   0 = IORING_OP_FUTEX_WAIT mode, 1 = eventfd fallback
 *   NT        tasks made visible by P (0..2)
 *   NC        cancel requests posted by C (0..2)
 *   NRUN      user operations in flight that complete by themselves
 *   NSTUCK    user operations that complete only when cancelled
 *   RESUBMIT  continuations that submit one more operation when they run
 *             (so W goes from a plain park back to a ring park)
 *   SPURIOUS  spurious wakes allowed (above)      STRAY  stale notifies
 *   MON       1 = the monitor: the invariants below in every state, and
 *             nothing left at quiescence; 0 = off (a seeded bug whose
 *             point is liveness is then reported by the claim, not as the
 *             broken invariant it implies)
 *   ARM_BEFORE_RECHECK  arm the ring's wait before [P0]:
 *             1 = with the expected value read from the word just before
 *                 (kAwake, or a token); harmless, must-pass checks (even
 *                 with NO_VALUE_CHECK: the wait is queued before [P0]);
 *             2 = with the code's constant kParked: the kernel answers
 *                 -EAGAIN every time, so while an operation stays in
 *                 flight W never sleeps (a busy loop; no lost wakeup)
 *   NO_RING_RECHECK  [R1] skipped; harmless, a must-pass check
 *   NO_VALUE_CHECK  the kernel queues the ring's FUTEX_WAIT whatever the
 *             word holds (no kernel does: shows that the value check at
 *             submission is what makes arming after [P0] safe)
 *   CANCEL_ASYNC  the ASYNC_CANCEL's own CQE is posted later by the kernel
 *             (not what the kernel does; shows what the inline completion
 *             buys: must_park_in_ring does not count cancels in flight)
 * Seeded bugs (each must be caught):
 *   NO_REARM           reaping the ring-wait CQE leaves `armed` set, so the
 *                      next ring park sleeps with no wait in the kernel
 *   PLAIN_WHILE_ARMED  must_park_in_ring without `|| armed`: a plain
 *                      futex_wait beside the armed ring FUTEX_WAIT (in
 *                      eventfd mode no task is lost, but the ring wait's
 *                      CQE is left unreaped while W sleeps)
 *   NOTIFY_BEFORE_PUSH C does [M2] before [M1]
 *   DOORBELL_LATE      (eventfd) the doorbell is published at [R2], after
 *                      the [P0] that wrote kParkedRing
 *   NO_SETTLE          [F1] left out: a stale TASKRUN flag makes W enter
 *                      and recheck for ever, never sleeping
 */

#ifndef EVENTFD
#define EVENTFD 0
#endif
#ifndef NT
#define NT 1
#endif
#ifndef NC
#define NC 1
#endif
#ifndef NRUN
#define NRUN 1
#endif
#ifndef NSTUCK
#define NSTUCK 1
#endif
#ifndef RESUBMIT
#define RESUBMIT 0
#endif
#ifndef SPURIOUS
#define SPURIOUS 1
#endif
#ifndef STRAY
#define STRAY 0
#endif
#ifndef MON
#define MON 1
#endif
#ifndef ARM_BEFORE_RECHECK
#define ARM_BEFORE_RECHECK 0
#endif
#ifndef NO_RING_RECHECK
#define NO_RING_RECHECK 0
#endif
#ifndef CANCEL_ASYNC
#define CANCEL_ASYNC 0
#endif
#ifndef NO_VALUE_CHECK
#define NO_VALUE_CHECK 0
#endif
#ifndef NO_REARM
#define NO_REARM 0
#endif
#ifndef PLAIN_WHILE_ARMED
#define PLAIN_WHILE_ARMED 0
#endif
#ifndef NOTIFY_BEFORE_PUSH
#define NOTIFY_BEFORE_PUSH 0
#endif
#ifndef DOORBELL_LATE
#define DOORBELL_LATE 0
#endif
#ifndef NO_SETTLE
#define NO_SETTLE 0
#endif

/* ParkWord::word (parker.hpp) */
#define AWAKE      0
#define PARKED     1
#define NOTIFIED   2
#define HANDEDOFF  3
#define PARKEDRING 4

/* where W is blocked (ghost, for `settles`) */
#define RUNNING 0
#define PLAINW  1      /* in futex_wait on the word [P4] */
#define RINGW   2      /* in io_uring_enter, waiting for a CQE [R3] */

/* ---- shared state (the real program's) ---- */
byte pw;               /* ParkWord::word                                  */
bit  bell;             /* ParkWord::doorbell is published (>= 0)          */
bit  evc;              /* the doorbell eventfd's counter is > 0 (a read
                          returns and clears all of it, so its size does
                          not matter)                                     */
bit  fw;               /* W is queued in a plain futex_wait on the word   */
bit  rw;               /* the ring's FUTEX_WAIT is queued on the word     */
bit  rd;               /* the ring's read of the doorbell is in the kernel */
byte cqw;              /* CQEs in the CQ: the ring's wait (kTagRingWait), */
byte cqi;              /*   user operations (kTagOp),                     */
byte cqc;              /*   ASYNC_CANCELs (kTagCancel)                    */
byte run_k = NRUN;     /* operations in the kernel, completing by themselves */
byte stuck = NSTUCK;   /* operations in the kernel, completing only if cancelled */
byte ccq;              /* ASYNC_CANCELs in the kernel (CANCEL_ASYNC only) */
byte dl;               /* user completions on the deferred-work list      */
bit  tf;               /* IORING_SQ_TASKRUN in the ring's sq_flags        */
bit  setf;             /* the kernel will set tf (its second step, [K1b]) */
byte mbox;             /* IoRing::mailbox_: requests posted, not drained  */
byte tq;               /* P's tasks visible, not yet taken                */
bit  listed;           /* W is on the idle list                           */
/* W's own (written by W only; global so the monitor and claims see them) */
bit  armd;             /* IoRing::armed_                                   */
byte ops = NRUN + NSTUCK;  /* IoRing::ops_                                 */
byte cont;             /* continuations pushed on W's deque, not yet run  */

/* ---- ghost state ---- */
byte spur = SPURIOUS;  /* spurious wakes left                             */
byte ran;              /* P's tasks run                                   */
byte released;         /* cancel requests done with (CQE reaped)          */
byte wsl;              /* RUNNING, PLAINW, RINGW                          */
byte resub = RESUBMIT; /* continuations that will submit again            */

#define CQ (cqw + cqi + cqc)

/* Invariants, checked in every state by the monitor:
 *  - never two waiters on the word: the ring's FUTEX_WAIT and a plain
 *    futex_wait (FUTEX_WAKE(1) would pick one of them);
 *  - `armed` is true exactly while the ring's wait is in the kernel or its
 *    CQE has not been reaped; there is at most one;
 *  - W's ops_ counts the operations in the kernel and their unreaped CQEs;
 *  - kParkedRing is written only once the doorbell is published. */
#define INV_WAITERS (!(rw && fw))
#define INV_ARMED   (armd == (rw || rd || cqw > 0) && cqw <= 1)
#define INV_OPS     (ops == run_k + stuck + dl + cqi)
#define INV_BELL    (pw != PARKEDRING || (bell && EVENTFD))
#define INV         (INV_WAITERS && INV_ARMED && INV_OPS && INV_BELL)

/* [K2] FUTEX_WAKE(word, 1): one waiter, either if there are two. A woken
 * ring FUTEX_WAIT posts its CQE (res 0). */
inline futex_wake() {
  atomic {
    if
    :: rw -> rw = 0; cqw++
    :: fw -> fw = 0
    :: else -> skip
    fi
  }
}

/* ParkWord::wake_sleeper after a token replaced `old` ([W5], and the same
 * for notify): FUTEX_WAKE a kParked word; write 1 to the doorbell of a
 * kParkedRing word, if its load shows one. */
inline wake_sleeper() {
  if
  :: old == PARKED -> futex_wake()
  :: old == PARKEDRING ->
     fd = bell;                                          /* doorbell.load */
     if :: fd -> atomic { evc = 1; fd = 0 } :: else -> skip fi   /* write */
  :: else -> skip
  fi;
  old = AWAKE
}

/* ParkWord::notify: leave kNotified unless a token is there, then wake.
 * A token is written back unchanged in the code (an RMW, for C++20's
 * ordering: parking.md, "Tokens persist"); under SPIN's interleaving
 * that write changes nothing, so the model only reads it. */
inline notify() {
  atomic {
    old = pw;
    if
    :: old == NOTIFIED || old == HANDEDOFF -> old = AWAKE
    :: else -> pw = NOTIFIED
    fi
  };
  wake_sleeper()
}

/* An io_uring_enter with GETEVENTS runs the deferred-work list if it is
 * not empty: the kernel clears the flag, then takes the list and posts
 * its CQEs. An empty list is not run, and the flag stays as it is. */
inline run_tw() {
  atomic { if :: dl > 0 -> tf = 0; cqi = cqi + dl; dl = 0 :: else -> skip fi }
}

/* IoRing::poll: drain_mailbox, enter (submits the ASYNC_CANCELs; runs the
 * deferred work) if there is something to submit or the flag is set,
 * [F1], reap. */
inline poll() {
  atomic { n = mbox; mbox = 0 };                         /* drain_mailbox */
  do
  :: n > 0 ->
     atomic {                                            /* ASYNC_CANCEL */
       if :: stuck > 0 -> stuck--; run_k++ :: else -> skip fi;   /* target: -ECANCELED later */
#if CANCEL_ASYNC
       ccq++;                                            /* ablation only */
#else
       cqc++;                                            /* its CQE, inline */
#endif
       ent = 1;
       n--
     }
  :: else -> break
  od;
  if
  :: ent || tf ->                                        /* enter */
     ent = 0;
     run_tw();
#if !NO_SETTLE
     if
     :: atomic { tf && CQ == 0 -> tf = 0 };              /* [F1] clear */
        run_tw()                                         /* [F1] enter again */
     :: else -> skip
     fi
#else
     skip
#endif
  :: else -> skip
  fi;
  atomic {                                               /* reap: every CQE */
    if
    :: cqw > 0 -> cqw = 0;
#if NO_REARM
       skip                                              /* bug only */
#else
       armd = 0                                          /* kTagRingWait */
#endif
    :: else -> skip
    fi;
    cont = cont + cqi; ops = ops - cqi; cqi = 0;         /* kTagOp: continuations */
    released = released + cqc; cqc = 0                   /* kTagCancel: release */
  }
}

/* [R2] arm the ring's wait (its SQE goes in with the enter of [R3]). */
inline arm() {
#if DOORBELL_LATE
  bell = 1;                                              /* bug only */
#endif
  atomic {
#if EVENTFD
    rd = 1;                                   /* read of the doorbell */
#else
#if NO_VALUE_CHECK
    rw = 1;                                   /* ablation only */
#else
    if
    :: pw == PARKED -> rw = 1                 /* queued on the word */
    :: else -> cqw++                          /* -EAGAIN: completes at once */
    fi;
#endif
#endif
    armd = 1
  }
}

active proctype Worker()
{
  bit ring, seen;
  byte tok, n, e;
  bit ent;               /* poll() has SQEs to submit: it enters */

top:
  /* Worker::loop: between_tasks / poll_io [L1], next_local, search */
  poll();                                                /* [L1] */
  if
  :: cont > 0 ->
     atomic {                                            /* [L2] continuation */
       cont--;
       if :: resub > 0 -> resub--; ops++; run_k++ :: else -> skip fi   /* IoRing::submit */
     };
     goto top
  :: else -> skip
  fi;
  atomic { if :: tq > 0 -> tq--; ran++; seen = 1 :: else -> seen = 0 fi };   /* [L2] take, run */
  if :: seen -> seen = 0; goto top :: else -> skip fi;

  /* Worker::park */
#if PLAIN_WHILE_ARMED
  ring = (ops != 0);                                     /* bug only */
#else
  ring = (ops != 0 || armd);                             /* [R0] */
#endif
#if EVENTFD && !DOORBELL_LATE
  if :: ring && !bell -> bell = 1 :: else -> skip fi;    /* [D1] */
#endif
#if ARM_BEFORE_RECHECK && EVENTFD
  if :: ring && !armd -> arm() :: else -> skip fi;       /* [R2] early */
#elif ARM_BEFORE_RECHECK
  if
  :: ring && !armd ->
#if ARM_BEFORE_RECHECK == 1
     e = pw;                                             /* expected: the word now */
#else
     e = PARKED;                                         /* ablation only */
#endif
     atomic {                                            /* [R2] early */
#if NO_VALUE_CHECK
       rw = 1;                                           /* ablation only */
#else
       if :: pw == e -> rw = 1 :: else -> cqw++ fi;
#endif
       armd = 1
     };
     e = 0
  :: else -> skip
  fi;
#endif
  atomic {                                               /* [P0] */
    if
    :: pw == AWAKE -> pw = (ring && EVENTFD -> PARKEDRING : PARKED); tok = AWAKE
    :: else -> tok = pw; pw = AWAKE
    fi
  };
  if :: tok != AWAKE -> tok = AWAKE; ring = 0; goto top :: else -> skip fi;
  listed = 1;                                            /* [P1] */
  seen = (tq > 0);                                       /* [P2] */
#if !NO_RING_RECHECK
  if :: ring && !seen -> seen = (CQ > 0 || tf) :: else -> skip fi;   /* [R1] CQ, flag */
  if :: ring && !seen -> seen = (mbox > 0) :: else -> skip fi;   /* [R1] mailbox */
#endif
  if
  :: seen ->
     seen = 0;
     listed = 0;                                         /* [P3a, P3b] */
     pw = AWAKE;                                         /* [P3c] */
     ring = 0;
     goto top
  :: else -> skip
  fi;
  if
  :: ring ->
     if :: !armd -> arm() :: else -> skip fi;            /* [R2] */
     wsl = RINGW;
end_r3:
     if                                                  /* [R3] */
     :: atomic { CQ > 0 || dl > 0 -> tf = 0; cqi = cqi + dl; dl = 0; wsl = RUNNING }   /* runs the list */
     :: atomic { spur > 0 -> spur--; wsl = RUNNING }     /* EINTR, timed park */
     fi;
     poll()                                              /* [R4] */
  :: else ->
     do
     :: atomic {
          if
          :: pw == PARKED -> fw = 1; wsl = PLAINW        /* [P4] */
          :: else -> break
          fi
        };
end_p4:
        if
        :: atomic { !fw -> wsl = RUNNING }
        :: atomic { spur > 0 && fw -> spur--; fw = 0; wsl = RUNNING }   /* spurious */
        fi
     od
  fi;
  atomic { tok = pw; pw = AWAKE };                       /* [P5a] */
  tok = AWAKE;
  listed = 0;                                            /* [P5b, P5c] */
  ring = 0;
  goto top
}

active proctype Producer()
{
  byte i, old;
  bit wk, fd;
  do
  :: i < NT ->
     tq++;                                               /* [Q1] */
     atomic {                                            /* [N2], [W2, W3] */
       if :: listed -> listed = 0; wk = 1 :: else -> wk = 0 fi
     };
     if
     :: wk ->
        wk = 0;
        atomic { old = pw; pw = HANDEDOFF };             /* [W4] */
        wake_sleeper()                                   /* [W5] */
     :: else -> skip
     fi;
     i++
  :: else -> break
  od
}

/* C. Its loop also sends the STRAY stale notifies, which in the program
 * come from some other thread (a CompletionWord id reused): folded in
 * here because pan's weak fairness allows only so many processes. */
active proctype Canceller()
{
  byte i, j, old;
  bit fd;
  do
  :: i < NC ->
#if NOTIFY_BEFORE_PUSH
     notify();                                           /* bug only */
     mbox++;                                             /* bug only */
#else
     mbox++;                                             /* [M1] */
     notify();                                           /* [M2] */
#endif
     i++
  :: j < STRAY -> notify(); j++                          /* a stale notify */
  :: else -> break
  od
}

active proctype Kernel()
{
end:
  do
  :: atomic { run_k > 0 -> run_k--;                      /* [K1a] queued */
               if :: dl == 0 -> setf = 1 :: else -> skip fi; dl++ }
  :: atomic { setf -> setf = 0; tf = 1 }                 /* [K1b] the flag */
  :: atomic { rw && spur > 0 -> spur--; rw = 0; cqw++ }  /* spurious */
  :: spur > 0 -> spur = 0          /* no more spurious wakes: under weak
                                      fairness a spurious wake that stays
                                      possible is taken, and would hide a
                                      wakeup lost while W sleeps */
#if EVENTFD
  :: atomic { rd && evc > 0 -> rd = 0; evc = 0; cqw++ } /* [K3] */
#endif
#if CANCEL_ASYNC
  :: atomic { ccq > 0 -> ccq--; cqc++ }                  /* ablation only */
#endif
  od
}

/* The invariants in every state (MON); and when nothing can move any
 * more (W asleep, the kernel idle, P and C done): every task ran, every
 * CQE was reaped and its continuation run, every cancel request was
 * drained and its CQE reaped. A lost wakeup leaves W asleep beside one of
 * them. */
#if MON
active proctype monitor()
{
end:
  if
  :: atomic { !(INV) -> assert(INV_WAITERS); assert(INV_ARMED); assert(INV_OPS); assert(INV_BELL) }
  :: timeout ->
     assert(ran == NT);                          /* a task is left: lost wakeup */
     assert(CQ == 0 && dl == 0 && cont == 0);    /* lost completion */
     assert(mbox == 0 && released == NC)         /* lost cancel */
  fi
}
#endif

/* The claims. io_park.sh compiles each one only in the checks that select
 * it (-DLTL_name), so that spin-checks.sh's coverage sees one claim at a
 * time. */
#ifdef LTL_nolost
/* every task P made visible is run (no lost wakeup) */
ltl nolost   { <> (ran == NT) }
#endif
#ifdef LTL_nocqe
/* every CQE posted is reaped, and its continuation run (no lost completion) */
ltl nocqe    { [] ((CQ > 0 || dl > 0 || cont > 0) -> <> (CQ == 0 && dl == 0 && cont == 0)) }
#endif
#ifdef LTL_nocancel
/* every cancel request is drained and its ASYNC_CANCEL reaped */
ltl nocancel { <> (released == NC) }
#endif
#ifdef LTL_settles
/* W does not spin: from some point on it sleeps for good */
ltl settles  { <> [] (wsl != RUNNING) }
#endif
