// attrcheck-test: np=1 modes=shadow
// clean
// exit: 0
// native: same-stdout
/* A key freed while the library still holds a copy of its attribute on an object the program never
 * made. MPI_File_open duplicates the communicator inside the library (Open MPI's ompio calls its
 * internal dup, which copies attributes without passing through any MPI_ call attrcheck hooks), so
 * the copy callback runs outside every hooked call and the model never learns of that copy. The
 * keyval is then freed and its attribute deleted from MPI_COMM_WORLD: the library still holds the
 * key for the hidden copy. A churn of creates and frees with the same kind of callbacks follows,
 * long past shadow mode's quarantine (4,096 frees), so held keys are handed out again
 * (docs/rules.md keyval.freed). MPI_File_close then frees the hidden communicator, and the library
 * must run the FIRST keyval's delete callback with its extra_state and the copied value: were the
 * held key handed to a churned keyval, the library would run that keyval's callback instead
 * (attrcheck's trampolines take the keyval's record from the extra_state the library keeps). The
 * output must be the native run's. Shadow mode only: in emulate mode the library holds no
 * attribute, so its internal dup copies none and no callback runs for it (the standard does not
 * make MPI_File_open copy attributes; the output then differs from the native run's, legitimately). */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

enum { CHURN = 4096 + 2 * 512 + 64 };

static int a_extra = 1, b_extra = 2;

static int copy_fn(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c, (void)k;
  printf("copy extra=%d value=%ld\n", *(int*)extra, (long)(size_t)in);
  *(void**)out = (void*)((size_t)in + 1);
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void* value, void* extra) {
  (void)c, (void)k;
  printf("delete extra=%d value=%ld\n", *(int*)extra, (long)(size_t)value);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  char path[64];
  snprintf(path, sizeof path, "/tmp/attrcheck-unseen-copy-%ld.dat", (long)getpid());

  int a;
  MPI_Comm_create_keyval(copy_fn, delete_fn, &a, &a_extra);
  MPI_Comm_set_attr(MPI_COMM_WORLD, a, (void*)(size_t)100);
  printf("open:\n");
  fflush(stdout);
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                    &fh) != MPI_SUCCESS) {
    printf("MPI_File_open failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  printf("delete and free the keyval:\n");
  MPI_Comm_delete_attr(MPI_COMM_WORLD, a);
  MPI_Comm_free_keyval(&a);
  fflush(stdout);

  for (int i = 0; i < CHURN; ++i) {  // no attribute: no callback runs
    int b;
    MPI_Comm_create_keyval(copy_fn, delete_fn, &b, &b_extra);
    MPI_Comm_free_keyval(&b);
  }
  printf("close:\n");
  MPI_File_close(&fh);
  printf("done\n");
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
