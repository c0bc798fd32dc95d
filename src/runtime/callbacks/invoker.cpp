// The engine's callback invoker: in emulate mode it runs the user's callbacks (one by one, or a
// dup's and a free's in one run under one frame); in shadow mode it answers them from the runs the
// library made (replay.cpp), so the engine never runs user code twice.
#include "runtime/callbacks/invoker.hpp"

#include "runtime/callbacks/replay.hpp"
#include "runtime/callbacks/run.hpp"
#include "runtime/callbacks/throw_site.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

namespace {

constexpr int kFlagUnset = 0x5eed;

class RuntimeInvoker final : public CallbackInvoker {
 public:
  int copy(const CopyCall& c, std::uint64_t* out, int* flag) override {
    if (Replay* r = t_state.ctx.replay) return replay_copy(*r, c, out, flag);
    *flag = kFlagUnset;
    int rc;
    if (__builtin_expect(c.lang == Binding::C, 1)) {
      // The common case, a C callback: run as run_copy runs it, the call made directly and the
      // report only looked for when something is off.
      CbFrame frame{c.fn, c.old_object, t_state.ctx.call, t_state.ctx.cb_top, c.keyval, c.kind, true, false};
      bool threw = false;
      rc = run_guarded(frame, c.keyval, &threw, [&] {
        return call_c_copy(c.kind, c.fn, c.old_object, c.keyval, c.extra_state, c.value_in, out, flag);
      });
      if (__builtin_expect(!threw && (rc != MPI_SUCCESS || (*flag != 0 && *flag != 1)), 0))
        report_copy_result(rc, *flag, c.keyval, c.fn, c.keyval);
    } else {
      rc = run_copy(c.kind, c.lang, c.fn, c.old_object, c.keyval, c.extra_state, c.value_in, out, flag, c.keyval);
    }
    flag_left_unset(c, rc, flag);
    return rc;
  }
  // A dup's copy callbacks: the C ones one after another under one frame, its function and keyval
  // set for each, each call checked as copy() checks it (a Fortran one goes through copy(), its
  // frame over this one), cheaper than a call of copy() / del() each. (*as_given accumulated
  // branch-free, as each outcome is checked: cheaper than the engine's own pass over the outcomes.)
  std::size_t copy_run(const CopyCall* calls, std::size_t n, CopyOutcome* out, bool* as_given) override {
    if (t_state.ctx.replay || n == 0) return CallbackInvoker::copy_run(calls, n, out, as_given);
    std::uint64_t differs = 0;
    CbFrame frame{calls[0].fn, calls[0].old_object, t_state.ctx.call, t_state.ctx.cb_top, calls[0].keyval, calls[0].kind, true, false};
    CbGuard guard(frame);
    // (Walked by pointer: with the accumulator, an index and the outcome's address no longer fit
    // in registers and were read back from the stack each time.)
    CopyOutcome* o_at = out;
    for (const CopyCall* c_at = calls; c_at != calls + n; ++c_at, ++o_at) {
      const CopyCall& c = *c_at;
      CopyOutcome& o = *o_at;
      o.value = 0;
      o.threw = false;
      int rc;
      if (__builtin_expect(c.lang == Binding::C, 1)) {
        frame.fn = c.fn;
        frame.keyval = c.keyval;
        std::atomic_signal_fence(std::memory_order_release);  // (what a signal handler reads of it)
        o.flag = kFlagUnset;
        throw_site_reset();
        bool threw = false;
        try {
          rc = call_c_copy(c.kind, c.fn, c.old_object, c.keyval, c.extra_state, c.value_in, &o.value, &o.flag);
        } catch (...) {
          report_exception(frame, c.keyval);
          threw = true;
          rc = MPI_ERR_OTHER;
        }
        if (__builtin_expect(!threw && (rc != MPI_SUCCESS || (o.flag != 0 && o.flag != 1)), 0))
          report_copy_result(rc, o.flag, c.keyval, c.fn, c.keyval);
        flag_left_unset(c, rc, &o.flag);
      } else {
        rc = copy(c, &o.value, &o.flag);
      }
      o.rc = rc;
      if (rc != MPI_SUCCESS) {
        *as_given = false;
        return static_cast<std::size_t>(c_at - calls) + 1;
      }
      differs |= (o.value ^ c.value_in) | static_cast<std::uint32_t>(o.flag ^ 1);
    }
    *as_given = differs == 0;
    return n;
  }
  int del(const DeleteCall& c) override {
    if (Replay* r = t_state.ctx.replay) return replay_delete(*r, c);
    // The common case, a C callback outside MPI_Finalize (a set's or a delete's, a free's): no
    // teardown test, and the call made as the trampolines make it, without call_delete's test of
    // the language.
    if (__builtin_expect(c.lang == Binding::C && c.cause != CallbackCause::Finalize, 1)) {
      CbFrame frame{c.fn, c.object, t_state.ctx.call, t_state.ctx.cb_top, c.keyval, c.kind, false, false};
      return run_delete_as(frame, c.keyval, [&] { return call_c_delete(c.kind, c.fn, c.object, c.keyval, c.value, c.extra_state); });
    }
    return run_engine_delete(c);
  }

  // A free's delete callbacks: the C ones one after another under one frame, its function and
  // keyval set for each, each call checked as del() checks it (a Fortran one goes through del(),
  // its frame over this one). (With copy_run: see there.)
  void del_run(const DeleteCall* first, DeleteNext next, void* ctx) override {
    if (t_state.ctx.replay || first->cause == CallbackCause::Finalize) return CallbackInvoker::del_run(first, next, ctx);
    const ObjectKind kind = first->kind;
    const Handle object = first->object;
    CbFrame frame{first->fn, object, t_state.ctx.call, t_state.ctx.cb_top, first->keyval, kind, false, false};
    CbGuard guard(frame);
    for (const DeleteCall* call = first;;) {
      const DeleteCall& c = *call;
      int rc;
      if (__builtin_expect(c.lang == Binding::C, 1)) {
        // (The function and key in locals: the signal fence would make the call read them again.)
        void* const fn = c.fn;
        const int key = c.keyval;
        frame.fn = fn;
        frame.keyval = key;
        std::atomic_signal_fence(std::memory_order_release);  // (what a signal handler reads of it)
        throw_site_reset();
        bool threw = false;
        try {
          rc = call_c_delete(kind, fn, object, key, c.value, c.extra_state);
        } catch (...) {
          report_exception(frame, key);
          threw = true;
          rc = MPI_ERR_OTHER;
        }
        if (__builtin_expect(rc != MPI_SUCCESS && !threw, 0))
          report_callback_value(Rule::CallbackError, "delete callback", key, " returned ", rc, fn, key);
      } else {
        rc = del_of(*first, c);
      }
      call = next(ctx, rc, false);
      if (!call) return;
    }
  }
  // A Fortran callback of a free's run: the call with the run's kind, object and cause.
  [[gnu::noinline]] int del_of(const DeleteCall& first, const DeleteCall& c) {
    DeleteCall full = c;
    full.kind = first.kind;
    full.object = first.object;
    full.cause = first.cause;
    return del(full);
  }

 private:
  // A copy callback that returned without setting *flag: reported (unless it failed), and not copied.
  static void flag_left_unset(const CopyCall& c, int rc, int* flag) {
    if (__builtin_expect(*flag != kFlagUnset, 1)) return;
    if (rc == MPI_SUCCESS)
      report_callback(Rule::CallbackBadFlag, "copy callback", c.keyval,
                      " returned without setting *flag (treated as 0: not copied)", c.fn, c.keyval);
    *flag = 0;
  }
};

}  // namespace

CallbackInvoker* new_invoker() { return new RuntimeInvoker; }

}  // namespace attrcheck::rt
