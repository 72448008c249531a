/*
 * priority_tags.pml -- SPIN model of parkway's transactional injection
 * queue (userspace/txn/inject_tree.hpp) under the priority-tag layer
 * (userspace/txn/tag.{hpp,cpp}). Design note: docs/design/priority-tags.md
 * (its table maps every step below to a code site; each code site names its
 * step in a comment).
 *
 * One child (head stack + the claimer's pending list) under the parent
 * summary word (nonempty, claimed, epoch). An empty head is OPEN (0) or
 * CLOSED (CLSD). Producers push, workers pop:
 *
 *   push:  P1r  h = head.load()
 *          P1g  gate(child tag)                      CanProceed/PreemptTag/wait
 *          P1   CAS head h -> item  | fail: h = head; TagAfterFail(child); P1g
 *               h was not CLOSED: commit
 *          P2r  s = summary.load()
 *          P2g  gate(parent tag)
 *          P2   CAS summary s -> s + nonempty, epoch + 1
 *               | fail: s = summary; TagAfterFail(parent); P2g
 *          commit: ClearMyTags
 *   pop:   W1r  s = summary.load(); nothing nonempty & unclaimed: commit
 *          W1g  gate(parent tag)
 *          W1   CAS summary s -> s + claimed  | fail: s = ..; TagAfterFail; W1g
 *          W2c  pending count = 1                    (only if pending is empty)
 *          W2g  gate(child tag)
 *          W2   exchange head -> OPEN (the stack, in the claimer's hands)
 *          W2p  the stack into pending, count = its length
 *          hand out one task from pending            (max = 1)
 *          W3cg gate(child tag)                      (only if none handed out)
 *          W3c  CAS head OPEN -> CLOSED (failure: a push got in; no retry)
 *          not closed:
 *          W3g  gate(parent tag)
 *          W3a  fetch_and summary: - claimed            (cannot fail)
 *          closed:
 *          W3r  s = summary.load()
 *          W3v  empty = head.load() == CLOSED            (re-validate)
 *          W3g  gate(parent tag)
 *          W3   CAS summary s -> s - claimed (- nonempty if empty)
 *               | fail: s = summary; TagAfterFail; W3v
 *          commit: ClearMyTags
 *
 * Abstractions (each one exact for the code, or noted):
 *  - head's value is the id of its newest task (0 = empty). Ids are unique
 *    while queued, so equal ids mean equal words (the count half is a
 *    function of the list); the CAS compares that value.
 *  - the summary CAS compares (nonempty, claimed) and "no epoch bump since
 *    my read" (efresh bit per thread): the 32-bit epoch does not wrap
 *    within one CAS window.
 *  - gate and CAS are separate steps, as in the code (a waiter can be
 *    overtaken between them by a thread that passed its gate earlier);
 *    so are a failed CAS (which reloads the word) and its TagAfterFail
 *    (p1fail, p2fail, w1fail, w3fail). GATE and TAGFAIL are each one
 *    atomic step; the code's load / stamp / validated-CAS sequence inside
 *    them, and why that is sound: priority-tags.md, section 3.
 *  - progress (np checks): a producer's commit (progress_push) or a
 *    worker's successful claim (progress_claim); an empty attempt is not.
 *  - stamps: only the relative order of live stamps matters, so they are
 *    kept as ranks (1 = oldest); a new stamp is the youngest. A stamp is
 *    taken at the first failed CAS or the first wait, as in Txn.
 *  - waiting (spin + futex) is a blocked guard; the patience bypass is
 *    off unless BYPASS=1, which allows it at ANY moment (over-approximates
 *    "after 1 ms").
 *  - the parking contract is a monitor process (contract) whose assertion
 *    SPIN evaluates in every reachable state
 *  - a worker with nothing to claim blocks until something is announced
 *    (the parking protocol, modelled in parking.pml); it exits when all
 *    producers are done and nothing is announced. So it drains the child
 *    to CLOSED, where the code may leave it announced, OPEN and empty with
 *    the workers asleep; the recheck process (RECHECK) checks the answer
 *    that lets them sleep.
 *
 * Switches (spin -DNAME=value):
 *   NPROD, NWORK, BUDGET  producers, workers, pushes per producer
 *   PRIVILEGE         1 = tags on, 0 = off (Options::priority_tags)
 *   INFINITE          1 = endless closed-loop workload (each producer
 *                     re-submits its task once it ran): starvation checks
 *   NO_PREEMPT        ablation: no PreemptTag
 *   BYPASS            1 = a waiter may take the tag regardless of age
 *   CRASH             1 = producer 0 may stop for ever right after a
 *                     failed CAS, i.e. while holding a tag
 *   BUG_NO_REVALIDATE mutation: a retried W3 keeps its stale "empty"
 *   BUG_NO_EPOCH      mutation: P2 does not bump the epoch (a plain OR)
 *   CONTRACT          add the parking-contract monitor (safety checks)
 *   BUG_ORDER         mutation: W3 re-validates the head before reading
 *                     the summary (W3v before W3r)
 *   RECHECK           add the recheck process: maybe_nonempty()'s three
 *                     loads against the claims (a larger state space:
 *                     its own checks, with smaller budgets)
 *   BUG_NO_PENDING_MARK  mutation: no W2c (the pending count is stored
 *                     only after the stack was moved)
 *   BUG_NEVER_CLAIM   mutation: a successful W1 claims nothing (the worker
 *                     retries for ever; only liveness checks can see it)
 */

#ifndef NPROD
#define NPROD 2
#endif
#ifndef NWORK
#define NWORK 1
#endif
#ifndef BUDGET
#define BUDGET 2
#endif
#ifndef PRIVILEGE
#define PRIVILEGE 1
#endif
#ifndef INFINITE
#define INFINITE 0
#endif
#ifndef NO_PREEMPT
#define NO_PREEMPT 0
#endif
#ifndef BYPASS
#define BYPASS 0
#endif
#ifndef CRASH
#define CRASH 0
#endif
#ifndef RECHECK
#define RECHECK 0
#endif

#define NT      (NPROD + NWORK)
#define NOTAG   255
#define CLSD    15                        /* head value CLOSED (OPEN = 0) */
#define BIT(x)  (1 << (x))
#define IBIT(i) (1 << ((i) - 1))           /* task id i >= 1 -> its bit  */
#if INFINITE
#define ALL     ((1 << NPROD) - 1)
#else
#define ALL     ((1 << (NPROD * BUDGET)) - 1)
#endif

byte top = CLSD;     /* child head: id of the newest task, OPEN, or CLSD    */
byte hset;           /* tasks in the head stack                             */
byte pend;           /* tasks in the claimer's pending list                 */
bit  ne, cl;         /* parent summary: nonempty(0), claimed(0)             */
byte efresh;         /* bit t: no epoch bump since t's last summary read    */
byte tagC = NOTAG;   /* the child's tag slot (holder tid)                   */
byte tagP = NOTAG;   /* the parent's tag slot                               */
byte stamp[NT];      /* 0 = unstamped, else rank among live stamps (1 = oldest) */
byte nstamped;
byte delivered;      /* tasks handed to a worker                            */
byte pfin, wfin;     /* producers / workers finished                        */
byte lastc = NOTAG;  /* last thread to commit (INFINITE runs)               */
byte inflight;       /* pushes between a P1 onto CLOSED and their P2        */
bit  crashed;
bit  pcnt;           /* pending count != 0 (pending_[i].count)             */
byte retd;           /* tasks whose push returned (the recheck's contract) */

#define STAMP(t) \
  if :: stamp[t] == 0 -> nstamped++; stamp[t] = nstamped :: else -> skip fi
#define UNSTAMP(t) \
  if \
  :: stamp[t] != 0 -> \
       _u = 0; \
       do :: _u < NT -> if :: stamp[_u] > stamp[t] -> stamp[_u]-- :: else -> skip fi; _u++ \
          :: else -> break od; \
       stamp[t] = 0; nstamped--; _u = 0 \
  :: else -> skip \
  fi
/* older(a, b): a has a stamp and b has none or a younger one */
#define OLDER(a, b) (stamp[a] != 0 && (stamp[b] == 0 || stamp[a] < stamp[b]))

#if PRIVILEGE
#define CANPROCEED(t, tg)  (tg == NOTAG || tg == (t))
#if NO_PREEMPT
#define PREEMPTABLE(t, tg) false
#else
#define PREEMPTABLE(t, tg) (tg != NOTAG && tg != (t) && OLDER(t, tg))
#endif
#if BYPASS
#define MAYBYPASS          true
#else
#define MAYBYPASS          false
#endif
/* gate(): CanProceed; else stamp, then PreemptTag or wait (blocked guard).
 * Waking from the wait re-evaluates like gate_slow's loop.                */
#define GATE(t, tg) \
  atomic { \
    if \
    :: CANPROCEED(t, tg) -> skip \
    :: else -> \
         STAMP(t); \
         (CANPROCEED(t, tg) || PREEMPTABLE(t, tg) || MAYBYPASS); \
         if \
         :: CANPROCEED(t, tg) -> skip \
         :: PREEMPTABLE(t, tg) -> tg = t \
         :: else -> tg = t           /* the patience bypass (BYPASS only) */ \
         fi \
    fi \
  }
/* TagAfterFail: empty -> mine; mine -> keep; younger holder -> mine */
#define TAGFAIL(t, tg) \
  STAMP(t); \
  if :: (tg == NOTAG || tg == (t) || OLDER(t, tg)) -> tg = t :: else -> skip fi
/* ClearMyTags */
#define CLEARTAGS(t) \
  if :: tagC == (t) -> tagC = NOTAG :: else -> skip fi; \
  if :: tagP == (t) -> tagP = NOTAG :: else -> skip fi; \
  UNSTAMP(t)
#else
#define GATE(t, tg)      skip
#define TAGFAIL(t, tg)   skip
#define CLEARTAGS(t)     skip
#endif

#if CRASH
#define MAYCRASH(t) \
  if :: (t) == 0 -> crashed = 1; goto crashpt :: true -> skip fi
#else
#define MAYCRASH(t) skip
#endif

#define READ_SUMMARY(t) sne = ne; scl = cl; efresh = efresh | BIT(t)
#define SUMMARY_SAME(t) (ne == sne && cl == scl && (efresh & BIT(t)))

proctype Producer(byte t)
{
  byte j, it, h, sne, scl, _u;

next:
#if INFINITE
  it = t + 1;
#else
  if :: j == BUDGET -> goto done :: else -> skip fi;
  it = t * BUDGET + j + 1;
#endif
  h = top;                                              /* P1r */
p1g:
  GATE(t, tagC);                                        /* P1g */
  atomic {                                              /* P1  */
    if
    :: top == h ->
         assert(h != 0 || ne);     /* lemma: OPEN implies nonempty is set */
         top = it; hset = hset | IBIT(it);
         if :: h != CLSD -> goto commit :: else -> inflight++ fi
    :: else -> h = top; goto p1fail           /* failed CAS: h reloaded */
    fi
  };
  atomic { READ_SUMMARY(t) };                           /* P2r */
p2g:
  GATE(t, tagP);                                        /* P2g */
  atomic {                                              /* P2  */
    if
    :: SUMMARY_SAME(t) ->
         ne = 1; inflight--;
#ifndef BUG_NO_EPOCH
         efresh = 0                                     /* epoch + 1 */
#endif
    :: else -> READ_SUMMARY(t); goto p2fail   /* failed CAS: s reloaded */
    fi
  };
commit:
  atomic {
    CLEARTAGS(t);
    lastc = t;
#if RECHECK
    retd = retd | IBIT(it);                   /* push() has returned */
#endif
    h = 0; sne = 0; scl = 0                   /* dead locals: keep the state small */
  };
progress_push:
#if INFINITE
  (delivered & IBIT(it));     /* closed loop: wait until my task ran ... */
  delivered = delivered & ~IBIT(it);   /* ... then submit it again       */
  goto next;
#else
  j++;
  goto next;
done:
  pfin++;
  goto out;
#endif
/* TagAfterFail: a step of its own after the failed CAS, as in the code */
p1fail:
  atomic { TAGFAIL(t, tagC); MAYCRASH(t) };
  goto p1g;
p2fail:
  atomic { TAGFAIL(t, tagP) };
  goto p2g;
crashpt:
end_crashed:
  (false);
out:
  skip
}

proctype Worker(byte t)
{
  byte sne, scl, got, _u, taken;
  bit isempty, took, closed;

idle:
  if
#if !INFINITE
  :: atomic { pfin == NPROD && !ne -> wfin++; goto out }
#endif
  :: (ne && !cl) -> skip           /* woken: something may be claimable */
  fi;
  atomic {                                              /* W1r */
    READ_SUMMARY(t);
    if :: !(sne && !scl) -> goto commit :: else -> skip fi
  };
w1g:
  GATE(t, tagP);                                        /* W1g */
  atomic {                                              /* W1  */
    if
    :: SUMMARY_SAME(t) ->
#ifdef BUG_NEVER_CLAIM
         goto commit                    /* mutation: never claims, retries for ever */
#else
         cl = 1
#endif
    :: else -> READ_SUMMARY(t); goto w1fail   /* failed CAS: s reloaded */
    fi
  };
progress_claim:                         /* a claim: what np counts for workers */
  if
  :: pend == 0 ->
#ifndef BUG_NO_PENDING_MARK
       pcnt = 1;                                        /* W2c */
#endif
       GATE(t, tagC);                                   /* W2g */
       atomic { taken = hset; hset = 0; top = 0 };      /* W2  */
       atomic { pend = taken; taken = 0; pcnt = (pend != 0) }  /* W2p */
  :: else -> skip
  fi;
  d_step {                                              /* hand out one */
    if
    :: pend != 0 ->
         got = 1;
         do :: (pend & got) -> break :: else -> got = got << 1 od;
         assert((delivered & got) == 0);                /* no duplicate */
         delivered = delivered | got;
         pend = pend & ~got; pcnt = (pend != 0);
         got = 0; took = 1
    :: else -> skip
    fi
  };
  if
  :: !took ->
       GATE(t, tagC);                                   /* W3cg */
       atomic {                                         /* W3c */
         if :: top == 0 -> top = CLSD; closed = 1 :: else -> skip fi
       }
  :: else -> skip
  fi;
  if
  :: !closed ->
       GATE(t, tagP);                                   /* W3g */
       atomic { cl = 0 };                               /* W3a: fetch_and */
       goto commit
  :: else -> skip
  fi;
#ifndef BUG_ORDER
  atomic { READ_SUMMARY(t) };                           /* W3r */
w3v:
  isempty = (top == CLSD);                              /* W3v */
#else
w3v:
  isempty = (top == CLSD);                              /* W3v, too early */
  atomic { READ_SUMMARY(t) };                           /* W3r */
#endif
w3g:
  GATE(t, tagP);                                        /* W3g */
  atomic {                                              /* W3  */
    if
    :: SUMMARY_SAME(t) ->
         cl = 0;
         if :: isempty -> ne = 0 :: else -> skip fi
    :: else -> READ_SUMMARY(t); goto w3fail   /* failed CAS: s reloaded */
    fi
  };
commit:
  atomic {
    CLEARTAGS(t);
    lastc = t;
    sne = 0; scl = 0; isempty = 0; took = 0; closed = 0
  };
  goto idle;
/* TagAfterFail: a step of its own after the failed CAS, as in the code */
w1fail:
  atomic {
    TAGFAIL(t, tagP);
    if :: sne && !scl -> goto w1g :: else -> goto commit fi
  };
w3fail:
  atomic { TAGFAIL(t, tagP) };
#ifdef BUG_NO_REVALIDATE
  goto w3g;
#else
  goto w3v;
#endif
out:
  skip
}

/* The parking contract (injection_queue.hpp): a task in the head is
 * announced, or an announcing push is still in flight; a task in pending
 * keeps its child announced. Checked in every reachable state: the
 * monitor may run its one assertion at any point.                        */
#ifdef CONTRACT
active proctype contract()
{
  assert((hset == 0 || ne || inflight > 0) && (pend == 0 || ne))
}

#endif

#if RECHECK
/* The same contract as the code checks it: maybe_nonempty() (the parking
 * recheck) makes three separate loads, the summary, the head, the pending
 * count, while claims run. If it answers "empty", every task whose push
 * had returned when it began has been handed out when it ends, unless an
 * announcing push (between P1 onto CLOSED and P2) was in flight meanwhile:
 * that push wakes a sleeper itself. BUG_NO_PENDING_MARK shows why W2c is
 * there: a recheck that reads the head after W2 and the count before W2p
 * sees neither.                                                          */
active proctype recheck()
{
  byte must;
  bit rne, seen, infl;
end_recheck:
  do
  :: atomic {                                   /* summary load */
       must = retd & ~delivered; infl = (inflight > 0);
       rne = ne; seen = (ne && cl)              /* a claimer is at work */
     };
     if
     :: rne && !seen -> atomic { seen = (top != 0 && top != CLSD); infl = infl || inflight > 0 }  /* head  */
     :: else -> skip
     fi;
     if
     :: rne && !seen -> atomic { seen = pcnt; infl = infl || inflight > 0 }                     /* count */
     :: else -> skip
     fi;
     atomic {
       assert(seen || infl || inflight > 0 || (must & ~delivered) == 0);
       must = 0; rne = 0; seen = 0; infl = 0
     }
  od
}
#endif

init {
  atomic {
    byte i = 0;
    do :: i < NPROD -> run Producer(i); i++ :: else -> break od;
    do :: i < NT -> run Worker(i); i++ :: else -> break od
  };
#if !INFINITE && !CRASH
  (pfin == NPROD && wfin == NWORK);
  assert(delivered == ALL);                 /* no lost task            */
  assert(hset == 0 && pend == 0 && top == CLSD);
  assert(tagC == NOTAG && tagP == NOTAG);   /* no tag left behind      */
  assert(nstamped == 0)
#endif
}

/* every producer and worker finishes (finite budget) */
ltl alldone { <> (pfin == NPROD && wfin == NWORK) }

/* CRASH runs: once producer 0 has stopped, the other producers finish */
ltl survive { [] (crashed -> <> (pfin == NPROD - 1)) }

/* INFINITE runs: every thread commits again and again */
#if NT == 2
ltl nostarve { []<> (lastc == 0) && []<> (lastc == 1) }
#elif NT == 3
ltl nostarve { []<> (lastc == 0) && []<> (lastc == 1) && []<> (lastc == 2) }
#else
ltl nostarve { []<> (lastc == 0) && []<> (lastc == 1) && []<> (lastc == 2) && []<> (lastc == 3) }
#endif
