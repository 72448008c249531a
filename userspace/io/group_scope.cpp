// group_scope.cpp -- the I/O of coroutines that belong to a TaskGroup:
// one OpScope per group with operations in flight, so that cancelling the
// group, or a group it was made under, cancels them (their awaiters
// resume with ECANCELED, and the coroutine's next co_await throws
// parkway::Cancelled). docs/design/cancellation.md, "I/O".
//
// A registry maps a group to its scope. An entry exists only while an
// operation of that group is in flight: the first one makes it, the last
// one to complete (its reaper, group_scope_remove) erases it, and a
// cancel erases it after cancelling its operations (so a reused group
// starts with a fresh scope). Every entry's group is alive: one of its
// coroutines is suspended in an operation, and a group outlives the
// coroutines its tasks started (TaskGroup's nesting rule). So a cancel may
// walk each entry's chain of enclosing groups.
//
// Lock order: the registry's mutex, then a scope's lock. Links into a
// group scope change only under the registry's mutex.
#include <mutex>
#include <unordered_map>

#include "chaos.hpp"
#include "io/op_state.hpp"
#include "parkway/task_group.hpp"

namespace parkway::io::detail {

namespace {
// Never destroyed: a worker that shutdown(deadline) left running, and
// ~Runtime detached, may drop a task (and so cancel its group's I/O here)
// while exit() runs the static destructors (a data race on the map under
// ThreadSanitizer, and a freed map without it).
std::mutex& scopes_mu() noexcept {
  static std::mutex* m = new std::mutex;
  return *m;
}
// Under scopes_mu().
std::unordered_map<const TaskGroup*, OpScope*>& scopes() noexcept {
  static auto* m = new std::unordered_map<const TaskGroup*, OpScope*>;
  return *m;
}
}  // namespace

bool group_scope_add(const TaskGroup* g, OpState* st) noexcept {
  if (g->is_cancelled()) return false;
  PW_CHAOS();  // a cancel may run here, before the entry exists
  std::lock_guard<std::mutex> l(scopes_mu());
  // Again under the mutex: a cancel that ran between the look above and
  // the lock found no entry for this operation to cancel. cancel() marks
  // the group before it takes the mutex to walk the entries, so either
  // this look sees the mark or that walk sees the entry made below.
  if (g->is_cancelled()) return false;
  OpScope* s;
  try {
    OpScope*& slot = scopes()[g];
    if (!slot) {
      slot = new OpScope();
      slot->group = g;
    }
    s = slot;
  } catch (...) {  // no memory for the entry: the operation runs without the group's cancel
    scopes().erase(g);
    return true;
  }
  if (!scope_add(s, st, 2)) return false;
  st->in_group.store(true, std::memory_order_relaxed);
  return true;
}

// By the operation's reaper after its last CQE; for an accept taker's
// guard also by the taker that cancels it (accept_stream.cpp), which must
// not leave it in the group's entry once the group may be gone: whichever
// of the two comes second finds it out already.
void group_scope_remove(OpState* st) noexcept {
  if (!st->in_group.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> l(scopes_mu());
  if (!st->in_group.load(std::memory_order_relaxed)) return;
  st->in_group.store(false, std::memory_order_relaxed);
  OpScope* s = st->links[2].scope.load(std::memory_order_relaxed);
  // The group is read first: once a cancel has taken the scope out of the
  // registry (cancel_group_io), the operations held its only references,
  // and this one's, dropped next, may be the last.
  const TaskGroup* g = s->group;
  scope_remove(st, 2);
  auto it = scopes().find(g);
  // Found: the entry's reference keeps s alive.
  if (it != scopes().end() && it->second == s && s->head == nullptr) {
    scopes().erase(it);
    release_scope(s);
  }
}

}  // namespace parkway::io::detail

namespace parkway::detail {

// Held across fork() (runtime.cpp's handlers): every cancellation takes
// scopes_mu() (cancel_group_io), so a child forked while another thread held it
// would block on its first cancel or first exception in a TaskGroup.
void lock_group_scopes_for_fork() noexcept { ::parkway::io::detail::scopes_mu().lock(); }
void unlock_group_scopes_after_fork() noexcept { ::parkway::io::detail::scopes_mu().unlock(); }

void cancel_group_io(const TaskGroup* g) noexcept {
  using namespace ::parkway::io::detail;
  std::lock_guard<std::mutex> l(scopes_mu());
  // A cancel() that overlapped the group's wait() may come here after the
  // wait cleared the mark and the group went on to a new round: that
  // round's operations are not cancelled (their group_scope_add, under
  // this lock, came after the clearing, which this load then sees).
  if (!g->is_cancelled()) return;
  for (auto it = scopes().begin(); it != scopes().end();) {
    if (group_within(it->first, g)) {
      cancel_scope(it->second);
      release_scope(it->second);
      it = scopes().erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace parkway::detail
