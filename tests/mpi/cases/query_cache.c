// attrcheck-test: np=2 modes=shadow,emulate
// clean
// native: same-stdout
/* The runtime answers repeated gets from a per-thread cache of checked queries. A correct
 * program that gets the same attributes over and over while everything a cached answer depends
 * on changes under it: values replaced and deleted, objects freed and their handles handed out
 * again, keyvals freed and their numbers reused, datatypes as well as communicators. Every answer
 * is printed (rank 0's), so emulate mode (which answers from the cache) must print what Open MPI prints, and
 * shadow mode must find no divergence. */
#include <mpi.h>
#include <stdio.h>

static int deletes = 0;

static int copy_plus_one(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  *(long*)out = (long)in + 1;
  *flag = 1;
  return MPI_SUCCESS;
}

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

static long get(MPI_Comm comm, int key) {  /* the value, or -1 when not set */
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(comm, key, &v, &flag);
  return flag ? (long)v : -1;
}

static long get_type(MPI_Datatype type, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Type_get_attr(type, key, &v, &flag);
  return flag ? (long)v : -1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int k1, k2;
  MPI_Comm_create_keyval(copy_plus_one, count_delete, &k1, NULL);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k2, NULL);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);

  /* Values replaced and deleted between gets of the same query. */
  long sum = 0;
  for (long i = 0; i < 100; ++i) {
    MPI_Comm_set_attr(c, k1, (void*)(i * 10));
    sum += get(c, k1) + get(c, k1) + get(c, k2);
    if (i % 7 == 0) {
      MPI_Comm_delete_attr(c, k1);
      sum += get(c, k1);
    }
    if (i % 11 == 0) MPI_Comm_set_attr(c, k2, (void*)i);
  }
  if (rank == 0) printf("rank %d values: %ld\n", rank, sum);

  /* Objects freed and handles handed out again: each dup must show its own copy. */
  for (long i = 0; i < 20; ++i) {
    MPI_Comm_set_attr(c, k1, (void*)(i * 100));
    MPI_Comm d;
    MPI_Comm_dup(c, &d);
    const long a = get(d, k1), b = get(d, k1), e = get(d, k2);
    if (rank == 0 && (i < 3 || i == 19)) printf("rank %d dup %ld: %ld %ld %ld\n", rank, i, a, b, e);
    MPI_Comm_free(&d);
  }

  /* A keyval freed and a new one created (the library may hand out the same number). */
  MPI_Comm_delete_attr(c, k1);
  MPI_Comm_free_keyval(&k1);
  int k3;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k3, NULL);
  if (rank == 0) printf("rank %d new keyval before set: %ld\n", rank, get(c, k3));
  MPI_Comm_set_attr(c, k3, (void*)7);
  if (rank == 0) printf("rank %d new keyval: %ld %ld\n", rank, get(c, k3), get(c, k3));

  /* Datatypes: the same, with a datatype keyval. */
  int tk;
  MPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, &tk, NULL);
  long tsum = 0;
  for (long i = 0; i < 20; ++i) {
    MPI_Datatype t, t2;
    MPI_Type_contiguous(2, MPI_INT, &t);
    tsum += get_type(t, tk);
    MPI_Type_set_attr(t, tk, (void*)(i + 1));
    tsum += get_type(t, tk) + get_type(t, tk);
    MPI_Type_dup(t, &t2);
    tsum += get_type(t2, tk);
    MPI_Type_free(&t2);
    MPI_Type_free(&t);
  }
  if (rank == 0) printf("rank %d datatypes: %ld\n", rank, tsum);
  MPI_Type_free_keyval(&tk);

  MPI_Comm_free(&c);
  MPI_Comm_free_keyval(&k2);
  MPI_Comm_free_keyval(&k3);
  if (rank == 0) printf("rank %d deletes: %d\n", rank, deletes);
  MPI_Finalize();
  return 0;
}
