// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* The PETSc pattern: a user ("outer") communicator and the library's private duplicate ("inner")
 * point at each other through attributes. When the outer attribute goes (the user frees the outer
 * communicator, or the library deletes the attribute), its delete callback deletes the inner's
 * back-pointer attribute and frees the inner communicator. The callback never modifies the
 * communicator it runs for, only the other one: that is legal. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int inner_key;   /* on the outer communicator: the inner one */
static int outer_key;   /* on the inner communicator: the outer one */
static int counter_key; /* on the inner communicator: the library's reference count */

static char log_buf[512];
static void note(const char* what) {
  strncat(log_buf, what, sizeof log_buf - strlen(log_buf) - 1);
  strncat(log_buf, " ", sizeof log_buf - strlen(log_buf) - 1);
}

struct link {
  MPI_Comm other;
};
struct counter {
  int refs;
};

static int errors = 0;

static int outer_link_delete(MPI_Comm inner, int keyval, void* value, void* extra) {
  (void)keyval; (void)extra;
  struct link* l = value;
  /* runs for the inner communicator: only reads */
  int result;
  MPI_Comm_compare(l->other, inner, &result);
  if (result != MPI_CONGRUENT) ++errors; /* the outer one, a congruent communicator */
  free(l);
  note("outer-link-deleted");
  return MPI_SUCCESS;
}

static int counter_delete(MPI_Comm inner, int keyval, void* value, void* extra) {
  (void)inner; (void)keyval; (void)extra;
  struct counter* c = value;
  note(c->refs == 0 ? "counter-deleted(refs=0)" : "counter-deleted(refs>0)");
  free(c);
  return MPI_SUCCESS;
}

static int inner_link_delete(MPI_Comm outer, int keyval, void* value, void* extra) {
  (void)keyval; (void)extra;
  struct link* l = value;
  MPI_Comm inner = l->other;
  note("inner-link-delete-begin");
  /* Reading either communicator is fine. */
  struct link* back = NULL;
  int flag = 0;
  MPI_Comm_get_attr(inner, outer_key, &back, &flag);
  int result;
  MPI_Comm_compare(back->other, outer, &result);
  if (!flag || result != MPI_IDENT) ++errors;
  /* Modifying the OTHER communicator is fine: drop its back-pointer, then free it. */
  if (MPI_Comm_delete_attr(inner, outer_key) != MPI_SUCCESS) ++errors;
  if (MPI_Comm_free(&inner) != MPI_SUCCESS) ++errors;
  if (inner != MPI_COMM_NULL) ++errors;
  free(l);
  note("inner-link-delete-end");
  return MPI_SUCCESS;
}

/* PetscCommDuplicate: returns the inner communicator of `outer`, creating it on first use. */
static MPI_Comm library_get_comm(MPI_Comm outer) {
  struct link* l = NULL;
  int flag = 0;
  MPI_Comm_get_attr(outer, inner_key, &l, &flag);
  if (flag) {
    struct counter* c = NULL;
    MPI_Comm_get_attr(l->other, counter_key, &c, &flag);
    ++c->refs;
    note("reuse");
    return l->other;
  }
  MPI_Comm inner;
  MPI_Comm_dup(outer, &inner);
  struct link* fwd = malloc(sizeof *fwd);
  fwd->other = inner;
  struct link* back = malloc(sizeof *back);
  back->other = outer;
  struct counter* c = malloc(sizeof *c);
  c->refs = 1;
  MPI_Comm_set_attr(inner, counter_key, c);
  MPI_Comm_set_attr(inner, outer_key, back);
  MPI_Comm_set_attr(outer, inner_key, fwd);
  note("created");
  return inner;
}

/* PetscCommDestroy: drops one reference; the last one deletes the outer's attribute, whose
 * delete callback frees the inner communicator. */
static void library_release_comm(MPI_Comm outer) {
  struct link* l = NULL;
  int flag = 0;
  MPI_Comm_get_attr(outer, inner_key, &l, &flag);
  if (!flag) {
    ++errors;
    return;
  }
  struct counter* c = NULL;
  MPI_Comm_get_attr(l->other, counter_key, &c, &flag);
  if (--c->refs == 0) MPI_Comm_delete_attr(outer, inner_key);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, inner_link_delete, &inner_key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, outer_link_delete, &outer_key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, counter_delete, &counter_key, NULL);

  /* Round 1: the library releases its communicator (delete_attr on the outer one). */
  MPI_Comm user;
  MPI_Comm_dup(MPI_COMM_WORLD, &user);
  MPI_Comm a = library_get_comm(user);
  MPI_Comm b = library_get_comm(user);
  int same;
  MPI_Comm_compare(a, b, &same);
  int sum = 0, one = 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, a);
  library_release_comm(user);
  library_release_comm(user);
  struct link* l = NULL;
  int flag = 1;
  MPI_Comm_get_attr(user, inner_key, &l, &flag);
  if (rank == 0) printf("petsc_pattern: round 1: %s| same inner %d, allreduce %d, outer attribute gone %d\n", log_buf,
                        same == MPI_IDENT, sum, !flag);
  log_buf[0] = '\0';

  /* Round 2: the user frees the outer communicator while the library still holds it. */
  library_get_comm(user);
  MPI_Comm_free(&user);
  if (rank == 0) printf("petsc_pattern: round 2: %s| user comm freed %d\n", log_buf, user == MPI_COMM_NULL);

  MPI_Comm_free_keyval(&inner_key);
  MPI_Comm_free_keyval(&outer_key);
  MPI_Comm_free_keyval(&counter_key);
  if (rank == 0) printf("petsc_pattern: errors %d\n", errors);
  MPI_Finalize();
  return 0;
}
