// attrcheck-test: np=1 modes=shadow,emulate
// divergence: replacing-set-attr-keeps-old-value
// expect-portable-on mpich/shadow: portability.replacing-set-attr-keeps-old-value openmpi-4.1 openmpi-5.0 openmpi-6.0
// clean
// exit: 0
/* A correct program that MPICH (4.0.2, 4.2.1) runs differently from the standard: setting a
 * datatype's or window's attribute again must run its delete callback on the old value first, but
 * MPICH keeps those attributes in a list meant to be sorted by keyval handle and puts a new one
 * after the first entry of a greater handle; the next set of that key then finds the greater one
 * first and inserts again, with no delete callback, and the object holds both values: MPI_Type_dup
 * copies both, the free deletes both, and deleting the attribute leaves the old one. Which order
 * triggers it depends on the library's keyval handles, which the program cannot know (under
 * attrcheck they are not the ones it sees), so it sets two keys in both orders, one object each:
 * one of the two objects meets it. Shadow mode notes it (library.divergence) and whatever follows
 * from the kept value, never at the program's call; emulate mode serves the attributes itself,
 * as the standard says (checked below). The same with keyvals that have no delete function, where
 * the kept value first shows when MPI_Type_dup copies it. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_deletes, copies, free_deletes, deleting_sets;

static int type_copy(MPI_Datatype t, int key, void* extra, void* in, void* out, int* flag) {
  (void)t; (void)key; (void)extra;
  ++copies;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int type_delete(MPI_Datatype t, int key, void* v, void* extra) {
  (void)t; (void)key; (void)v; (void)extra;
  if (deleting_sets) ++set_deletes; else ++free_deletes;
  return MPI_SUCCESS;
}

static int win_delete(MPI_Win w, int key, void* v, void* extra) {
  (void)w; (void)key; (void)v; (void)extra;
  if (deleting_sets) ++set_deletes; else ++free_deletes;
  return MPI_SUCCESS;
}

#define V(n) ((void*)(intptr_t)(n))

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = getenv("ATTRCHECK_MODE");
  const int emulate = mode && !strcmp(mode, "emulate");
  int failures = 0;

  /* Datatypes: t[0] gets a, b, b again; t[1] b, a, a again. */
  int a, b;
  MPI_Type_create_keyval(type_copy, type_delete, &a, NULL);
  MPI_Type_create_keyval(type_copy, type_delete, &b, NULL);
  MPI_Datatype t[2], d[2];
  for (int i = 0; i < 2; ++i) {
    const int first = i ? b : a, twice = i ? a : b;
    MPI_Type_contiguous(2 + i, MPI_INT, &t[i]);
    MPI_Type_set_attr(t[i], first, V(100 + i));
    MPI_Type_set_attr(t[i], twice, V(200 + i));
    deleting_sets = 1;
    MPI_Type_set_attr(t[i], twice, V(300 + i));
    deleting_sets = 0;
    void* v = NULL;
    int flag = 0;
    MPI_Type_get_attr(t[i], twice, &v, &flag);
    if (!flag || v != V(300 + i)) ++failures;  /* the newest value, in every library */
  }
  const int type_set_deletes = set_deletes;
  for (int i = 0; i < 2; ++i) MPI_Type_dup(t[i], &d[i]);
  const int type_copies = copies;
  for (int i = 0; i < 2; ++i) {  /* the dups' attributes go with the dups */
    MPI_Type_free(&d[i]);
  }
  for (int i = 0; i < 2; ++i) {
    const int twice = i ? a : b;
    MPI_Type_delete_attr(t[i], twice);
    void* v = NULL;
    int flag = 0;
    MPI_Type_get_attr(t[i], twice, &v, &flag);
    if (emulate && flag) ++failures;  /* (the library may still hold the value a set kept) */
    MPI_Type_free(&t[i]);
  }
  const int type_free_deletes = free_deletes;
  MPI_Type_free_keyval(&a);
  MPI_Type_free_keyval(&b);

  /* Windows: the same, with no dup. */
  set_deletes = free_deletes = 0;
  MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_delete, &a, NULL);
  MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_delete, &b, NULL);
  MPI_Win w[2];
  for (int i = 0; i < 2; ++i) {
    const int first = i ? b : a, twice = i ? a : b;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_SELF, &w[i]);
    MPI_Win_set_attr(w[i], first, V(100 + i));
    MPI_Win_set_attr(w[i], twice, V(200 + i));
    deleting_sets = 1;
    MPI_Win_set_attr(w[i], twice, V(300 + i));
    deleting_sets = 0;
    void* v = NULL;
    int flag = 0;
    MPI_Win_get_attr(w[i], twice, &v, &flag);
    if (!flag || v != V(300 + i)) ++failures;
  }
  const int win_set_deletes = set_deletes;
  for (int i = 0; i < 2; ++i) {
    const int twice = i ? a : b;
    MPI_Win_delete_attr(w[i], twice);
    void* v = NULL;
    int flag = 0;
    MPI_Win_get_attr(w[i], twice, &v, &flag);
    if (emulate && flag) ++failures;
    MPI_Win_free(&w[i]);
  }
  const int win_free_deletes = free_deletes;
  MPI_Win_free_keyval(&a);
  MPI_Win_free_keyval(&b);

  /* Datatypes whose keyvals have no delete function: the set that keeps the old value has no
   * callback to miss, and the kept value first shows at the dup, copied beside the new one. */
  copies = 0;
  MPI_Type_create_keyval(type_copy, MPI_TYPE_NULL_DELETE_FN, &a, NULL);
  MPI_Type_create_keyval(type_copy, MPI_TYPE_NULL_DELETE_FN, &b, NULL);
  for (int i = 0; i < 2; ++i) {
    const int first = i ? b : a, twice = i ? a : b;
    MPI_Type_contiguous(4 + i, MPI_INT, &t[i]);
    MPI_Type_set_attr(t[i], first, V(400 + i));
    MPI_Type_set_attr(t[i], twice, V(500 + i));
    MPI_Type_set_attr(t[i], twice, V(600 + i));
    MPI_Type_dup(t[i], &d[i]);
    MPI_Type_free(&d[i]);
    MPI_Type_free(&t[i]);
  }
  const int null_delete_copies = copies;
  MPI_Type_free_keyval(&a);
  MPI_Type_free_keyval(&b);
  if (emulate && null_delete_copies != 4) ++failures;

  printf("replacing_set_keeps_old_value: datatypes: %d delete callbacks in 2 replacing sets, %d copies in 2 dups, "
         "%d deletes after; windows: %d in 2 replacing sets, %d after\n",
         type_set_deletes, type_copies, type_free_deletes, win_set_deletes, win_free_deletes);
  /* The standard: each replacing set deletes the old value; each dup copies the 2 attributes; the
   * dups' frees delete 2 each, the deletes 1 and the frees 1 per object. */
  if (emulate && (type_set_deletes != 2 || type_copies != 4 || type_free_deletes != 8 || win_set_deletes != 2 ||
                  win_free_deletes != 4))
    ++failures;
  MPI_Finalize();
  if (failures) fprintf(stderr, "replacing_set_keeps_old_value: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
