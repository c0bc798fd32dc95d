! attrcheck-test: np=2 modes=shadow,emulate
! expect: keyval.double-free keyval.freed keyval.kind-mismatch keyval.invalid keyval.predefined
! expect: object.invalid attr.delete-absent attr.leak keyval.leak
! expect-at: keyval.double-free f08_errors.f90:37
! expect-at: keyval.freed f08_errors.f90:42
! expect-at: keyval.kind-mismatch f08_errors.f90:47
! expect-at: keyval.invalid f08_errors.f90:51
! expect-at: keyval.predefined f08_errors.f90:54
! expect-at: object.invalid f08_errors.f90:57
! expect-at: attr.delete-absent f08_errors.f90:59
! clean
! exit: 0
! One seeded bug per attribute rule that applies to `use mpi_f08` code, each reported at its
! Fortran line, with MPI_ERRORS_RETURN so that every erroneous call returns: a keyval freed twice
! through a saved copy, a set through a freed keyval's saved copy, a datatype keyval on a
! communicator get, MPI_KEYVAL_INVALID, a set of the predefined MPI_TAG_UB, a set on
! MPI_COMM_NULL, a delete of an attribute that is not set, and at the end an attribute with a delete
! callback on a communicator never freed (attr.leak) under a keyval never freed (keyval.leak).
! The erroneous calls leave ierror out: gfortran 12 gives a call that passes the OPTIONAL ierror
! the PROGRAM statement's line in its line table (docs/fortran.md), so the finding could not name
! the call's line. What each library returns natively differs: no native comparison.
program f08_errors
  use mpi_f08
  implicit none
  integer :: rank, key, saved, tkey, ckey, leaked
  integer(kind=MPI_ADDRESS_KIND) :: val
  logical :: flag
  type(MPI_Comm) :: kept

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, key, 0_MPI_ADDRESS_KIND)
  saved = key
  call MPI_Comm_free_keyval(key)
  call MPI_Comm_free_keyval(saved)  ! BUG: keyval.double-free

  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, key, 0_MPI_ADDRESS_KIND)
  saved = key
  call MPI_Comm_free_keyval(key)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, saved, 1_MPI_ADDRESS_KIND)  ! BUG: keyval.freed

  call MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, tkey, 0_MPI_ADDRESS_KIND)
  val = -1
  flag = .true.
  call MPI_Comm_get_attr(MPI_COMM_WORLD, tkey, val, flag)  ! BUG: keyval.kind-mismatch
  call MPI_Type_free_keyval(tkey)

  ckey = MPI_KEYVAL_INVALID
  call MPI_Comm_get_attr(MPI_COMM_WORLD, ckey, val, flag)  ! BUG: keyval.invalid

  val = 5
  call MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, val)  ! BUG: keyval.predefined

  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, ckey, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_set_attr(MPI_COMM_NULL, ckey, val)  ! BUG: object.invalid

  call MPI_Comm_delete_attr(MPI_COMM_SELF, ckey)  ! BUG: attr.delete-absent
  call MPI_Comm_free_keyval(ckey)

  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, leaked, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(MPI_COMM_WORLD, kept)
  call MPI_Comm_set_attr(kept, leaked, 9_MPI_ADDRESS_KIND)  ! BUG: kept is never freed, leaked never freed

  if (rank == 0) print '(a)', 'f08_errors: done'
  call MPI_Finalize()

contains

  subroutine count_delete(comm, comm_keyval, attribute_val, extra_state, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    ierror = MPI_SUCCESS
  end subroutine count_delete

end program f08_errors
