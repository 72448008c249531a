/*
 * deque.pml -- SPIN model of the work-stealing deque's gate protocol
 * (userspace/deque.hpp: the owner's pop fences only while a thief may be
 * stealing) on x86-TSO, with an explicit store buffer for the owner.
 * Checked by docs/spec/deque.sh (make spec-deque, part of make test).
 *
 * The deque is Chase-Lev with the orderings of Lê et al. (PPoPP 2013).
 * Shared words: top (thieves and the owner's last-item CAS), bottom (the
 * owner's stores), the slots buf[i], and gate (on top's cache line):
 * gate = FENCED (bit 0, set and cleared only by the owner) + 2 * (number
 * of thieves inside a steal session). The owner keeps a private mirror
 * `fenced` of its FENCED bit.
 *
 * Processes:
 *   Owner   a script of pushes and pops (SCRIPT), each push followed by
 *           the pool-state hook ([D1]/[D2] or nothing: the pool's parking
 *           state is a free choice), then pops until a pop returns none.
 *   Thief   NTHIEF of them, each NSESS session attempts: a speculative
 *           look at top and bottom (looks empty: no session), [D7],
 *           [D8], 1..NSTEAL Lê steals (it may stop after any steal; it
 *           stops on empty), [D10].
 *   Drain   the owner's store buffer: moves its oldest entry to memory,
 *           at any moment.
 *
 * Invariant (checked): every pushed item is taken exactly once, by the
 * owner's pop or by one thief's CAS -- at each take assert(taken[x] == 0)
 * (no duplicate) and x != 0 (not an empty slot); when every thread has
 * finished, taken[x] == 1 for every item (none lost) and gate is back at
 * rest, gate == (fenced ? FENCED : 0). A thread stuck for ever shows as
 * an invalid end state (init waits for all of them).
 *
 * Why it holds. The danger is the classic one: the owner's pop stores
 * bottom = b [D3] and loads top [D6]; on TSO the store can still sit in
 * the store buffer when a thief loads bottom, so the thief sees the old
 * bottom and steals slot b, which the pop takes too (it saw top < b and
 * takes without a CAS). Lê's pop puts a full fence between [D3] and [D6];
 * here the pop loads gate [D4] after [D3] and fences [D5] only if gate is
 * non-zero. Take a pop that read gate == 0 at [D4] and so did not fence,
 * and a thief session (its [D7] .. [D10]) whose steals overlap the pop:
 *  - the session cannot have done [D7] before [D4] and [D10] after it,
 *    since [D4] would have seen its +2; so its [D7] comes after [D4] (a
 *    session that ended before [D4] is over);
 *  - if [D7] saw FENCED, the owner set it with [D1] after [D4] (at [D4]
 *    the bit was clear); [D1] is a locked RMW, which drains the owner's
 *    buffer, [D3] included, before it; [D7] comes after [D1] in the total
 *    order of locked RMWs, so the thief's loads see bottom <= b;
 *  - else the thief ran membarrier [D8], a full barrier on the owner at
 *    some point of its instruction stream. If that point is after [D3],
 *    the barrier drained [D3] and the thief sees bottom <= b. If it is
 *    before [D3], then [D4] (after [D3] in program order) executes after
 *    the barrier, hence after the thief's [D7], and sees gate != 0:
 *    contradiction, the pop fenced after all.
 * A pop that fenced is Lê's pop. A thief that skipped [D8] because it
 * saw FENCED stays covered while FENCED is cleared under it: its +2
 * keeps gate non-zero, so every pop fences until its [D10]. [D2]'s CAS
 * (which fails while a session is open) is therefore not what protects
 * it -- an atomic fetch_and clearing FENCED regardless also passes
 * (check clear-fetch-and); what breaks it is a [D2] that is not one
 * atomic RMW (a plain store, or load + store): it loses the thief's
 * count (abl-plain-clear, abl-store-zero). Order needed
 * inside the pop: [D3] before [D4] in program order (the compiler
 * barrier: the compiler must not hoist the gate load above the bottom
 * store, or the membarrier can land between them: abl-gate-first), and
 * [D4] before [D6] (abl-top-before-gate): x86 keeps loads in order, but
 * the compiler may swap two relaxed loads, and weaker hardware may too,
 * so the gate load wants acquire (the same mov on x86) or a compiler
 * barrier after it. Inside a session:
 * [D8] after [D7] (abl-membarrier-first), every steal before [D10]
 * (abl-early-d10).
 *
 * TSO, as modelled. Only the owner has a store buffer: a thief writes
 * the victim's words only with locked RMWs (its own deque's stores go to
 * other addresses and do not change what it reads here). The buffer is a
 * FIFO of SB (address, value) entries; a store appends (waiting for room
 * if full: the real buffer is larger, so this only delays); Drain moves
 * the oldest entry to memory at any time; the owner's loads take the
 * newest buffered entry for that address, else memory; other threads
 * read memory. A fence, and every locked RMW of the owner ([D1], [D2],
 * the last-item CAS), first waits for the buffer to be empty and then
 * acts on memory in one step -- the same as draining it itself, since
 * Drain steps interleave freely. Loads stay in program order, as on x86.
 * This is the standard operational x86-TSO model (Owens, Sarkar, Sewell,
 * TPHOLs 2009) restricted to one buffered thread.
 *
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), as modelled: one atomic
 * step of the thief that empties the owner's buffer. The kernel makes
 * every running thread of the process execute a full barrier at some
 * point between the call's start and its return; a thread that is not
 * running has passed a context switch, a full barrier, since its last
 * instruction. For the owner either is "its buffer is empty at some
 * point of its instruction stream inside the call's interval". The thief
 * does nothing else inside the call (its [D7] is before, its steals
 * after), so moving the whole call to that point changes no thief-visible
 * order: the one-step model is exact for the owner's side, and on TSO a
 * full barrier of another thread (a thief) has no effect that matters
 * here, as thieves have no buffered stores to the victim's words.
 *
 * Step table: model step -> code site (userspace/deque.hpp unless noted;
 * the labels are the code's, docs/design/deque.md):
 *
 *   push    Deque::try_push             slot = x (relaxed), then bottom =
 *                                       b + 1 (release); its capacity check
 *                                       (a cached limit, top read again in
 *                                       push_at_limit) is left out (no
 *                                       growth here)
 *   hook    worker.hpp:                 after a spawn's push; after a batch
 *           Worker::after_push,         from take_injected or steal_batch
 *           Worker::fence_if_needed     only [D1] (the model's hook may
 *                                       skip either: safety never needs it)
 *   [D1]    -> Deque::fence_on          someone idle or searching and
 *                                       !fenced(): gate_.fetch_or(FENCED)
 *   [D2]    -> Deque::try_fence_off     all busy and fence_clearable():
 *                                       CAS gate_ FENCED -> 0, success:
 *                                       unfenced (kModeOff)
 *   [D3]    Deque::pop_unless_last      bottom_.store(b) (release), then
 *                                       asm("" ::: "memory")
 *   [D4]    Deque::pop_unless_last      g = gate_.load() (acquire): gate_set(),
 *                                       on x86 an asm cmpq $0 with memory
 *   [D5]    Deque::pop_unless_last      g != 0: store_load_fence()
 *   [D6]    Deque::pop_unless_last      t = top_.load(), then Lê's tail:
 *           (t >= b: Deque::pop_last)   t > b: empty, bottom = b + 1;
 *                                       t == b: CAS top t -> t + 1, then
 *                                       bottom = b + 1; t < b: the slot,
 *                                       no CAS
 *   look    Deque::looks_nonempty       top, bottom (acquire): t >= b, no
 *                                       session (enter_session's wait for
 *                                       FENCED only delays [D7]: left out)
 *   [D7]    Deque::enter_session        old = gate_.fetch_add(2) (seq_cst)
 *   [D8]    Deque::enter_session        !(old & FENCED): heavy_fence()
 *                                       (asymmetric_fence.cpp: membarrier;
 *                                       if the call fails, the code leaves
 *                                       the session and steals nothing,
 *                                       which the model needs no step for)
 *   [D9]    Deque::steal_one            t = top; seq_cst fence (a no-op
 *                                       here: nothing buffered); b =
 *                                       bottom; t < b: x = slot t, CAS top
 *                                       t -> t + 1 (steal or steal_batch,
 *                                       1..NSTEAL of them per session)
 *   [D10]   Deque::leave_session        gate_.fetch_sub(2) (release)
 *
 * Switches (spin -DNAME=value):
 *   NTHIEF    thieves (1..3; 3 is about 10 s and 600 MB, not in the table)
 *   NSESS     session attempts per thief
 *   NSTEAL    at most this many steals per session
 *   SCRIPT    1: push push pop push pop (3 items); 2: push push push pop
 *             push pop (4 items); both then pop until none
 *   SB        store buffer entries (2..4)
 *   SYM       1 = the symmetric mode (no membarrier available): FENCED
 *             from the start, [D1]/[D2] never run, so every pop fences and
 *             no thief runs membarrier
 *   SC        1 = no store buffer: stores go straight to memory (a sanity
 *             model: with it even NO_GATE_CHECK must pass)
 *   START_FENCED 1 = the asymmetric mode starting fenced, as the code's
 *             deques do (gate_{kFenced}, kModeOn); 0 (default) starts
 *             unfenced, which lets thieves meet unfenced pops sooner
 *   GATE_END  0 = leave out the final gate assertion (so PLAIN_CLEAR is
 *             caught as a duplicate, not as a wrong gate)
 * Ablations (each must be caught; see deque.sh):
 *   NO_GATE_CHECK   the pop never loads gate and never fences ([D4], [D5]
 *                   gone; with SYM=1 this is Lê's pop without its fence)
 *   NO_MEMBARRIER   the thief skips [D8]
 *   PLAIN_CLEAR=1   [D2] is gate.store(gate.load() & ~FENCED), fenced = 0:
 *                   unconditional and not atomic; =3: gate.store(0). Both
 *                   lose (or, =1, resurrect) a session's count. (=2, an
 *                   atomic fetch_and that clears FENCED under open sessions
 *                   too, must pass: check clear-fetch-and)
 *   FENCED_BIT_ONLY [D5] fences only if g & FENCED (the count ignored)
 *   MEMBARRIER_FIRST the thief loads gate, runs membarrier if FENCED is
 *                   clear, and only then does the fetch_add of [D7]
 *   EARLY_D10       the thief leaves the session ([D10]) before stealing
 *   TOP_FIRST       the pop loads top before its bottom store ([D6]
 *                   first; wrong even without TSO: check sc-top-first)
 *   GATE_FIRST      the pop loads gate before its bottom store (what the
 *                   compiler barrier after [D3] forbids)
 *   TOP_BEFORE_GATE the pop loads top between [D3] and [D4] (what an
 *                   acquire gate load forbids)
 *
 * Not modelled: the buffer growth (buf_ republished with a release
 * store; the slot copy happens before it, in order on TSO), wrap-around of
 * the circular buffer (indices never wrap in these scripts, but slots are
 * reused after pops, so a stale slot read would show as a duplicate),
 * spurious CAS failures ([D2] failing is "stays fenced", already a case),
 * and non-TSO hardware (on a weaker machine [D4] needs acquire and the
 * argument needs the RMWs to be full barriers).
 */

#ifndef NTHIEF
#define NTHIEF 1
#endif
#ifndef NSESS
#define NSESS 1
#endif
#ifndef NSTEAL
#define NSTEAL 2
#endif
#ifndef SCRIPT
#define SCRIPT 1
#endif
#ifndef SB
#define SB 3
#endif
#ifndef SC
#define SC 0
#endif
#ifndef SYM
#define SYM 0
#endif
#ifndef NO_GATE_CHECK
#define NO_GATE_CHECK 0
#endif
#ifndef NO_MEMBARRIER
#define NO_MEMBARRIER 0
#endif
#ifndef PLAIN_CLEAR
#define PLAIN_CLEAR 0
#endif
#ifndef FENCED_BIT_ONLY
#define FENCED_BIT_ONLY 0
#endif
#ifndef TOP_FIRST
#define TOP_FIRST 0
#endif
#ifndef GATE_FIRST
#define GATE_FIRST 0
#endif
#ifndef TOP_BEFORE_GATE
#define TOP_BEFORE_GATE 0
#endif
#ifndef EARLY_D10
#define EARLY_D10 0
#endif
#ifndef START_FENCED
#define START_FENCED 0
#endif
#ifndef GATE_END
#define GATE_END 1
#endif
#ifndef MEMBARRIER_FIRST
#define MEMBARRIER_FIRST 0
#endif

#if SCRIPT == 1
#define NPUSH 3
#else
#define NPUSH 4
#endif

#define FENCED 1

/* ---- memory: one array, so the store buffer holds (address, value) ---- */
#define TOP    0
#define BOTTOM 1
#define GATE   2
#define BUF    3                  /* buf[i] is mem[BUF + i]; no wrap-around */
#define NMEM   (BUF + NPUSH)

short mem[NMEM];                  /* what the other threads see */
#define top    mem[TOP]
#define bottom mem[BOTTOM]
#define gate   mem[GATE]

/* the owner's store buffer: FIFO, oldest entry at index 0 */
byte  sb_n;
byte  sb_a[SB];
short sb_v[SB];

/* ---- ghost state ---- */
byte taken[NPUSH + 1];            /* taken[x]: how often item x was taken */
bit  fenced;                      /* the owner's private mirror of FENCED */
byte done;                        /* threads that finished */

/* drain the oldest entry of the owner's buffer to memory */
#if SB == 2
#define SHIFT sb_a[0] = sb_a[1]; sb_v[0] = sb_v[1]
#elif SB == 3
#define SHIFT sb_a[0] = sb_a[1]; sb_v[0] = sb_v[1]; sb_a[1] = sb_a[2]; sb_v[1] = sb_v[2]
#elif SB == 4
#define SHIFT sb_a[0] = sb_a[1]; sb_v[0] = sb_v[1]; sb_a[1] = sb_a[2]; sb_v[1] = sb_v[2]; \
  sb_a[2] = sb_a[3]; sb_v[2] = sb_v[3]
#endif
#define DRAIN1 \
  mem[sb_a[0]] = sb_v[0]; SHIFT; \
  sb_n--; sb_a[sb_n] = 0; sb_v[sb_n] = 0

#if SC
/* no reordering: every store goes straight to memory */
#define ROOM     true
#define ST(a, v) mem[a] = (v)
#define EMPTYSB  true
#else
#define ROOM     (sb_n < SB)
#define ST(a, v) sb_a[sb_n] = (a); sb_v[sb_n] = (v); sb_n++
#define EMPTYSB  (sb_n == 0)
#endif

/* the owner's load: the newest own buffered store to a, else memory */
inline LD(a, v) {
  v = mem[a];
  i = sb_n;
  do
  :: i > 0 -> i--;
     if
     :: sb_a[i] == (a) -> v = sb_v[i]; break
     :: else -> skip
     fi
  :: else -> break
  od;
  i = 0
}

inline TAKE(x) {
  assert(x != 0);                 /* an item, not an empty slot */
  assert(taken[x] == 0);          /* no duplicate */
  taken[x]++
}

/* ---- owner ---- */

inline push() {
  d_step { ROOM; LD(BOTTOM, b); n++; ST(BUF + b, n) };        /* buf[b] = x */
  d_step { ROOM; ST(BOTTOM, b + 1); b = 0 }                   /* bottom = b + 1 (release) */
}

/* the hook after a push: the pool's parking state is a free choice; the
 * two combinations that change nothing (idle but already fenced, busy
 * but not fenced) are the skip */
inline after_push() {
#if SYM
  skip                                                          /* FENCED for good */
#else
  if
  :: !fenced ->                                                 /* someone idle/searching */
     d_step { EMPTYSB; gate = gate | FENCED; fenced = 1 }       /* [D1] */
  :: fenced ->                                                  /* all busy */
#if PLAIN_CLEAR == 1
     d_step { LD(GATE, g) };                                    /* ablation only */
     d_step { ROOM; ST(GATE, g & ~FENCED); fenced = 0; g = 0 }  /* ablation only */
#elif PLAIN_CLEAR == 2
     d_step { EMPTYSB; gate = gate & ~FENCED; fenced = 0 }      /* ablation only */
#elif PLAIN_CLEAR == 3
     d_step { ROOM; ST(GATE, 0); fenced = 0 }                   /* ablation only */
#else
     atomic {                                                   /* [D2] */
       EMPTYSB ->
       if
       :: gate == FENCED -> gate = 0; fenced = 0                /* CAS won */
       :: else -> skip                                          /* thieves in session */
       fi
     }
#endif
  :: skip                                                       /* nothing to change */
  fi
#endif
}

#if FENCED_BIT_ONLY
#define MUST_FENCE(g) ((g) & FENCED)
#else
#define MUST_FENCE(g) ((g) != 0)
#endif

/* x = the item popped, 0 if none */
inline pop() {
#if TOP_FIRST
  d_step { LD(TOP, t) };                                      /* ablation only */
#endif
#if GATE_FIRST
  d_step { LD(GATE, g) };                                     /* ablation only */
#endif
  d_step { ROOM; LD(BOTTOM, b); b = b - 1; ST(BOTTOM, b) };   /* [D3] + compiler barrier */
#if TOP_BEFORE_GATE
  d_step { LD(TOP, t) };                                      /* ablation only */
#endif
#if !NO_GATE_CHECK
#if !GATE_FIRST
  d_step { LD(GATE, g) };                                     /* [D4] (acquire) */
#endif
  if
  :: MUST_FENCE(g) -> EMPTYSB                                 /* [D5] */
  :: else -> skip
  fi;
  g = 0;
#endif
#if !TOP_FIRST && !TOP_BEFORE_GATE
  d_step { LD(TOP, t) };                                      /* [D6] */
#endif
  if
  :: t > b ->                                                 /* empty */
     d_step { ROOM; ST(BOTTOM, b + 1); x = 0 }
  :: t == b ->                                                /* the last item: race */
     atomic {                                                 /* CAS(top, t, t + 1) */
       EMPTYSB -> x = mem[BUF + b];                           /* (the buffer is empty) */
       if
       :: top == t -> top = t + 1; TAKE(x)                    /* the owner won it */
       :: else -> x = 0                                       /* a thief won it */
       fi
     };
     d_step { ROOM; ST(BOTTOM, b + 1) }
  :: t < b ->
     d_step { LD(BUF + b, x); TAKE(x) }
  fi;
  t = 0; b = 0
}

proctype Owner()
{
  short b, t;
  short g;
  byte x, i, n;
#if SCRIPT == 1
  push(); after_push();
  push(); after_push();
  pop();
  push(); after_push();
  pop();
#else
  push(); after_push();
  push(); after_push();
  push(); after_push();
  pop();
  push(); after_push();
  pop();
#endif
  /* then pop until empty, as a worker does before it steals */
  do
  :: pop();
     if
     :: x == 0 -> break
     :: else -> x = 0
     fi
  od;
  done++
}

#if !SC
/* the owner's store buffer drains whenever it likes */
active proctype Drain()
{
end:
  do
  :: d_step { sb_n > 0 -> DRAIN1 }
  od
}
#endif

/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): every other thread's
 * buffer drains in this one step */
inline membarrier() {
  atomic {
    do
    :: sb_n > 0 -> DRAIN1                                     /* a full barrier on the owner */
    :: else -> break
    od
  }
}

/* ---- thieves ---- */
proctype Thief()
{
  short t, b;
  short old;
  byte x, s, k;
  do
  :: s < NSESS ->
     s++;
     t = top;                                                 /* speculative */
     b = bottom;
     if
     :: t >= b -> t = 0; b = 0; goto next                     /* looks empty: no session */
     :: else -> t = 0; b = 0
     fi;
#if MEMBARRIER_FIRST
     old = gate;                                              /* ablation only */
     if :: !(old & FENCED) -> membarrier() :: else -> skip fi;  /* ablation only */
     gate = gate + 2;                                         /* ablation only */
#else
     d_step { old = gate; gate = gate + 2 };                  /* [D7] */
#if !NO_MEMBARRIER
     if
     :: !(old & FENCED) -> membarrier()                        /* [D8] */
     :: else -> skip
     fi;
#endif
#endif
     old = 0;
#if EARLY_D10
     gate = gate - 2;                                         /* ablation only */
#endif
     k = 0;
     do                                                       /* Lê steals */
     :: k < NSTEAL ->
        k++;
        t = top;                                              /* [D9] */
        b = bottom;
        if
        :: t < b ->
           x = mem[BUF + t];
           atomic {                                           /* CAS(top, t, t + 1) */
             if
             :: top == t -> top = t + 1; TAKE(x)              /* taken */
             :: else -> skip                                  /* lost */
             fi;
             x = 0; t = 0; b = 0
           }
        :: else -> t = 0; b = 0; break                        /* empty */
        fi
     :: k > 0 -> break                                        /* took enough */
     od;
     k = 0;
#if !EARLY_D10
     gate = gate - 2;                                         /* [D10] */
#endif
next:
     skip
  :: else -> break
  od;
  done++
}

init {
  byte i;
  atomic {
#if SYM || START_FENCED
    gate = FENCED; fenced = 1;
#endif
    run Owner();
    i = 0;
    do
    :: i < NTHIEF -> run Thief(); i++
    :: else -> break
    od;
    i = 0
  };
  done == NTHIEF + 1 && sb_n == 0;
  d_step {
    i = 1;
    do
    :: i <= NPUSH -> assert(taken[i] == 1); i++              /* none lost */
    :: else -> break
    od;
    i = 0;
#if GATE_END
    assert(gate == (fenced -> FENCED : 0))                    /* gate back to rest */
#endif
  }
}
