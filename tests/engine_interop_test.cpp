// engine_interop_test: language interoperability of attributes (the standard's
// "Language Interoperability: Attributes"): a value set in one binding read in every binding, and
// callbacks that receive and store values in their own language.
#include "engine_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_fixtures;

// ---- Language interoperability -------------------------------------------------------------

// An attribute read in all three bindings.
struct Reads {
  std::uint64_t c = 0;  // the void* word
  std::int64_t aint = 0;
  std::int32_t fint = 0;
  bool truncated = false;
};
Reads read_all(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) {
  Reads r;
  void* p = nullptr;
  int f1 = 0, f2 = 0, f3 = 0;
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::C, &p, &f1), kOk);
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::FortranAint, &r.aint, &f2), kOk);
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::FortranInt, &r.fint, &f3, &r.truncated), kOk);
  EXPECT_EQ(f1 + f2 + f3, 3);
  r.c = W(p);
  return r;
}

int some_int = 3;
const std::uint64_t kAddr = W(&some_int);
const std::int32_t kAddrLow = static_cast<std::int32_t>(static_cast<std::uint32_t>(kAddr));
const bool kAddrTruncates = static_cast<std::int64_t>(kAddrLow) != static_cast<std::int64_t>(kAddr);
constexpr std::uint64_t kMinus5 = ~std::uint64_t{4};  // -5 as a word

// One row of the interop table: the word set, and its low 32 bits as FortranInt reads them.
struct Row {
  std::uint64_t set;
  std::int32_t low;
  bool truncates;  // the low 32 bits do not sign-extend back to the word
};
const std::vector<Row>& rows() {
  static const std::vector<Row> r{{17, 17, false},          {kMinus5, -5, false},
                                  {1ull << 40, 0, true},     {kAddr, kAddrLow, kAddrTruncates},
                                  {0x7fffffff, 0x7fffffff, false}, {0x80000000, INT32_MIN, true}};
  return r;
}

TEST(Interop, SetFromCReadInEveryBinding) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.set);
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, row.set), kOk);
    Reads r = read_all(e, kComm, kA, k);
    EXPECT_EQ(r.c, row.set);                                 // the address
    EXPECT_EQ(r.aint, static_cast<std::int64_t>(row.set));  // the address as an integer
    EXPECT_EQ(r.fint, row.low);                              // low 32 bits
    EXPECT_EQ(r.truncated, row.truncates);
  }
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, kAddr), kOk);
  EXPECT_EQ(deref<int>(read_all(e, kComm, kA, k).c), 3);  // the C read gives back &some_int
}

TEST(Interop, SetFromFortranAintReadInEveryBinding) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.set);
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranAint, row.set), kOk);
    Reads r = read_all(e, kComm, kA, k);
    ASSERT_NE(r.c, 0u);
    EXPECT_EQ(deref<std::int64_t>(r.c), static_cast<std::int64_t>(row.set));  // -> stored int64
    EXPECT_EQ(r.aint, static_cast<std::int64_t>(row.set));                     // the value
    EXPECT_EQ(r.fint, row.low);                                                // low 32 bits
    EXPECT_EQ(r.truncated, row.truncates);
  }
}

TEST(Interop, SetFromFortranIntReadInEveryBinding) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  for (const Row& row : rows()) {  // MPI_ATTR_PUT sets only the low 32 bits, sign-extended
    SCOPED_TRACE(row.set);
    const std::int64_t extended = row.low;
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranInt, row.set), kOk);
    EXPECT_EQ(e.attributes(kComm, kA)[0].value, static_cast<std::uint64_t>(extended));
    Reads r = read_all(e, kComm, kA, k);
    ASSERT_NE(r.c, 0u);
    EXPECT_EQ(deref<std::int32_t>(r.c), row.low);  // pointer to the stored int32
    EXPECT_EQ(r.aint, extended);                   // the value, sign-extended
    EXPECT_EQ(r.fint, row.low);                    // the value
    EXPECT_FALSE(r.truncated);
  }
}

TEST(Interop, CReadPointerStaysValidAcrossUnrelatedSets) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec()), k2 = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranAint, 1ull << 40), kOk);
  ASSERT_EQ(e.set_attr(kComm, kA, k2, Binding::FortranInt, 7), kOk);
  const std::uint64_t p = get_c(e, kComm, kA, k), q = get_c(e, kComm, kA, k2);
  for (Handle h = 1; h <= 500; ++h) {  // many Fortran cells elsewhere, half of them freed
    const Handle obj = 0x100000 + h;
    create(e, kComm, {obj});
    ASSERT_EQ(e.set_attr(kComm, obj, k, Binding::FortranAint, h), kOk);
    ASSERT_EQ(e.set_attr(kComm, obj, k2, Binding::FortranInt, h), kOk);
    ASSERT_EQ(h % 2 ? e.free_object(kComm, obj) : kOk, kOk);
  }
  EXPECT_EQ(deref<std::int64_t>(p), std::int64_t{1} << 40);
  EXPECT_EQ(deref<std::int32_t>(q), 7);
}

TEST(Interop, WorkedExamplesOfTheStandard) {
  Engine e;
  create(e, kComm, {kWorld}, kWorldFlags);
  // Example 1: set in C a pointer to int, a pointer to struct, and the integer 17.
  int set_val = 3;
  struct Foo { double a, b; } set_struct{1, 2};
  KeyvalId k1 = make_key(e, plain_spec()), k2 = make_key(e, plain_spec()), k3 = make_key(e, plain_spec());
  set_all(e, kComm, kWorld, {{k1, W(&set_val)}, {k2, W(&set_struct)}, {k3, 17}});
  Reads r1 = read_all(e, kComm, kWorld, k1), r2 = read_all(e, kComm, kWorld, k2),
        r3 = read_all(e, kComm, kWorld, k3);
  EXPECT_EQ(r1.c, W(&set_val));  // B: C reads
  EXPECT_EQ(deref<int>(r1.c), 3);
  EXPECT_EQ(r2.c, W(&set_struct));
  EXPECT_EQ(r3.c, 17u);
  EXPECT_EQ(r1.fint, static_cast<std::int32_t>(W(&set_val)));  // C: MPI_ATTR_GET, possibly truncated
  EXPECT_EQ(r2.fint, static_cast<std::int32_t>(W(&set_struct)));
  EXPECT_EQ(r3.fint, 17);
  EXPECT_EQ(r1.aint, static_cast<std::int64_t>(W(&set_val)));  // D: MPI_COMM_GET_ATTR
  EXPECT_EQ(r2.aint, static_cast<std::int64_t>(W(&set_struct)));
  EXPECT_EQ(r3.aint, 17);
  // Example 2: MPI_ATTR_PUT(VAL = 7).
  KeyvalId k = make_key(e, plain_spec());
  ASSERT_EQ(e.set_attr(kComm, kWorld, k, Binding::FortranInt, 7), kOk);
  Reads r = read_all(e, kComm, kWorld, k);
  EXPECT_EQ(deref<int>(r.c), 7);
  EXPECT_EQ(r.fint, 7);
  EXPECT_EQ(r.aint, 7);
  // Example 3: MPI_COMM_SET_ATTR(42) and (2**40).
  KeyvalId ka = make_key(e, plain_spec()), kb = make_key(e, plain_spec());
  ASSERT_EQ(e.set_attr(kComm, kWorld, ka, Binding::FortranAint, 42), kOk);
  ASSERT_EQ(e.set_attr(kComm, kWorld, kb, Binding::FortranAint, 1ull << 40), kOk);
  Reads ra = read_all(e, kComm, kWorld, ka), rb = read_all(e, kComm, kWorld, kb);
  EXPECT_EQ(deref<std::int64_t>(ra.c), 42);
  EXPECT_EQ(deref<std::int64_t>(rb.c), std::int64_t{1} << 40);
  EXPECT_EQ(ra.fint, 42);
  EXPECT_FALSE(ra.truncated);
  EXPECT_EQ(rb.fint, 0);  // "or 0 if truncation needed"
  EXPECT_TRUE(rb.truncated);
  EXPECT_EQ(ra.aint, 42);
  EXPECT_EQ(rb.aint, std::int64_t{1} << 40);
  // Predefined: MPI_TAG_UB is integer valued (as if by MPI_ATTR_PUT), MPI_WIN_BASE address valued.
  ASSERT_EQ(e.register_predefined_keyval(kComm, 0, "MPI_TAG_UB"), kOk);
  ASSERT_EQ(e.install_predefined(kComm, kWorld, 0, Binding::FortranInt, 8388607), kOk);
  Reads tag = read_all(e, kComm, kWorld, 0);
  EXPECT_EQ(deref<int>(tag.c), 8388607);
  EXPECT_EQ(tag.aint, 8388607);
  ASSERT_EQ(e.register_predefined_keyval(kWin, 100, "MPI_WIN_BASE"), kOk);
  create(e, kWin, {kA});
  static char window[64];
  ASSERT_EQ(e.install_predefined(kWin, kA, 100, Binding::C, W(window)), kOk);
  Reads base = read_all(e, kWin, kA, 100);
  EXPECT_EQ(base.c, W(window));
  EXPECT_EQ(base.aint, static_cast<std::int64_t>(W(window)));
}

TEST(Interop, CallbacksReceiveTheValueInTheirOwnLanguage) {
  RecordingInvoker inv;
  inv.flag = 0;
  Engine e(invoked_by(&inv));
  create(e, kComm, {kA});
  const std::uint64_t set[] = {0x123456789Aull, kMinus5, 0x80000000};  // as C, FortranAint, FortranInt
  for (Binding lang : {Binding::C, Binding::FortranAint, Binding::FortranInt}) {
    KeyvalSpec s = user_spec(nullptr);
    s.lang = lang;
    s.extra_state = 0xE57A7E;
    KeyvalId k = make_key(e, s);
    for (int from = 0; from < 3; ++from) {
      const Binding repr = static_cast<Binding>(from);
      SCOPED_TRACE(std::string(to_string(lang)) + " callback, set as " + to_string(repr));
      ASSERT_EQ(e.set_attr(kComm, kA, k, repr, set[from]), kOk);
      const std::uint64_t cptr = get_c(e, kComm, kA, k);  // valid until the delete below
      ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
      ASSERT_EQ(inv.copies.size(), 1u);
      const CopyCall cc = inv.copies[0];
      EXPECT_EQ(std::make_tuple(cc.kind, cc.old_object, cc.keyval, cc.lang, cc.fn, cc.extra_state),
                std::make_tuple(kComm, kA, k, lang, copy_fn(), std::uint64_t{0xE57A7E}));
      const std::uint64_t v = cc.value_in;
      if (lang == Binding::C) {  // C-set: the address; Fortran-set: a pointer to the integer
        EXPECT_EQ(v, repr == Binding::C ? set[0] : cptr);
        if (repr == Binding::FortranAint) {
          EXPECT_EQ(deref<std::int64_t>(v), -5);
        } else if (repr == Binding::FortranInt) {
          EXPECT_EQ(deref<std::int32_t>(v), INT32_MIN);
        }
      } else if (lang == Binding::FortranAint) {  // the integer (sign-extended from INTEGER)
        const std::uint64_t want[] = {set[0], kMinus5, 0xFFFFFFFF80000000ull};
        EXPECT_EQ(v, want[from]);
      } else {  // the low 32 bits
        const std::int32_t want[] = {0x3456789A, -5, INT32_MIN};
        EXPECT_EQ(static_cast<std::int32_t>(v), want[from]);
      }
      ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
      ASSERT_EQ(inv.dels.size(), 1u);
      const DeleteCall dc = inv.dels[0];  // delete callbacks get the same conversion
      EXPECT_EQ(std::make_tuple(dc.kind, dc.object, dc.keyval, dc.lang, dc.fn, dc.extra_state),
                std::make_tuple(kComm, kA, k, lang, del_fn(), std::uint64_t{0xE57A7E}));
      EXPECT_EQ(dc.cause, CallbackCause::Delete);
      EXPECT_EQ(dc.value, v);
      ASSERT_EQ(e.free_object(kComm, kB), kOk);
      inv.copies.clear();
      inv.dels.clear();
    }
  }
}

TEST(Interop, CopyCallbackValueOutIsStoredInTheCallbacksLanguage) {
  RecordingInvoker inv;
  Engine e(invoked_by(&inv));
  create(e, kComm, {kA});
  struct Case {
    Binding lang;
    std::uint64_t out, stored;
  } cases[] = {{Binding::C, kAddr, kAddr},
               {Binding::FortranAint, 1ull << 40, 1ull << 40},
               {Binding::FortranInt, 0xFFFFFFFF, ~std::uint64_t{0}}};
  Handle dup = 0x9000;
  for (const Case& c : cases) {
    SCOPED_TRACE(to_string(c.lang));
    KeyvalSpec s = user_spec(nullptr);
    s.lang = c.lang;
    KeyvalId k = make_key(e, s);
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
    inv.out = c.out;
    ASSERT_EQ(e.dup_object(kComm, kA, ++dup), kOk);
    std::vector<AttributeInfo> a = e.attributes(kComm, dup);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].keyval, k);
    EXPECT_EQ(a[0].repr, c.lang);
    EXPECT_EQ(a[0].value, c.stored);
    const std::uint64_t cread = get_c(e, kComm, dup, k);  // what a C read of the copy sees
    const std::int64_t pointee = c.lang == Binding::C             ? deref<int>(cread)
                                 : c.lang == Binding::FortranAint ? deref<std::int64_t>(cread)
                                                                  : deref<std::int32_t>(cread);
    EXPECT_EQ(pointee, c.lang == Binding::C ? 3 : static_cast<std::int64_t>(c.stored));
    ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
  }
}

}  // namespace
