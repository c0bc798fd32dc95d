// The cache engine. docs/engine.md is the contract; this file is organised as:
//   engine_storage.hpp  concurrency primitives and storage
//   engine_impl.hpp     Engine::Impl: state, helpers (validation, tables, callbacks)
//   keyvals.cpp, attributes.cpp, objects.cpp, finalize.cpp: the operations
//   engine.cpp          NativeInvoker, construction, the engine-wide counters and switches
//
// Concurrency design. All state that get_attr reads lives in memory that is never freed while
// the engine lives (slots and tables are pooled and reused, never returned to the allocator), and
// every field get_attr reads is an atomic. Writers hold `mu_` and bracket each change with the
// sequence counter `seq_` (odd while a change is in progress). get_attr reads optimistically and
// retries if the counter moved, falling back to the lock after a few tries. Nothing is written
// by a reader, so gets from many threads do not contend on a cache line.
#include "engine_impl.hpp"

namespace attrcheck {

// ---------------------------------------------------------------------------------------------
// NativeInvoker
// ---------------------------------------------------------------------------------------------

int NativeInvoker::copy(const CopyCall& call, std::uint64_t* value_out, int* flag) {
  auto fn = reinterpret_cast<NativeCopyFn>(call.fn);
  return fn(call.old_object, call.keyval, reinterpret_cast<void*>(call.extra_state),
            reinterpret_cast<void*>(static_cast<std::uintptr_t>(call.value_in)), value_out, flag);
}

std::size_t CallbackInvoker::copy_run(const CopyCall* calls, std::size_t n, CopyOutcome* out, bool* as_given) {
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) {
    CopyOutcome& o = out[i];
    o = CopyOutcome{};
    try {
      o.rc = copy(calls[i], &o.value, &o.flag);
    } catch (...) {
      o.threw = true;
    }
    if (o.threw || o.rc != 0) {
      *as_given = false;
      return i + 1;
    }
    same = same && o.flag == 1 && o.value == calls[i].value_in;
  }
  *as_given = same;
  return n;
}

void CallbackInvoker::del_run(const DeleteCall* first, DeleteNext next, void* ctx) {
  DeleteCall call = *first;
  for (;;) {
    int rc = 0;
    bool threw = false;
    try {
      rc = del(call);
    } catch (...) {
      threw = true;
    }
    const DeleteCall* c = next(ctx, rc, threw);
    if (!c) return;
    const DeleteCall one = *c;  // (its kind, object and cause the first's)
    call.keyval = one.keyval;
    call.lang = one.lang;
    call.fn = one.fn;
    call.extra_state = one.extra_state;
    call.value = one.value;
    call.repr = one.repr;
  }
}

int NativeInvoker::del(const DeleteCall& call) {
  auto fn = reinterpret_cast<NativeDeleteFn>(call.fn);
  return fn(call.object, call.keyval, reinterpret_cast<void*>(static_cast<std::uintptr_t>(call.value)),
            reinterpret_cast<void*>(call.extra_state));
}

Engine::Engine(const EngineConfig& config) : impl_(std::make_unique<Impl>(config)) {}
Engine::~Engine() = default;

bool Engine::finalized() const noexcept { return impl_->finalized_.load(std::memory_order_acquire); }
std::uint64_t Engine::version() const noexcept { return impl_->seq_.load(std::memory_order_acquire); }
std::uint64_t Engine::layout_version() const noexcept { return impl_->layout_.load(std::memory_order_acquire); }
void Engine::drop_locking() { impl_->mu_.disable(); }  // (a caller still inside finishes first)
void Engine::advance_layout() {
  Lock lk(impl_->mu_);
  WriteSection ws(impl_->seq_, &impl_->layout_);
}
const std::atomic<std::uint64_t>* Engine::version_counter() const noexcept { return &impl_->seq_; }
const std::atomic<std::uint64_t>* Engine::layout_counter() const noexcept { return &impl_->layout_; }

}  // namespace attrcheck
