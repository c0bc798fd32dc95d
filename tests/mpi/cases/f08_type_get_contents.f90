! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! native: same-stdout
! `use mpi_f08` MPI_Type_get_contents returns the datatypes a
! derived type was built from (MPICH: the inner type's own handle with its reference count raised,
! as from C: type_get_contents.c; Open MPI's Fortran binding: another handle): freeing what it
! returned is legal, even after the inner type was freed, and the inner type's attribute survives
! the free of the extra reference. The program checks the values itself and fails otherwise.
module f08_type_get_contents_cbs
  use mpi_f08
  implicit none
  integer :: deletes = 0
  logical :: all_ok = .true.
contains
  subroutine check(rank, what, ok)
    integer :: rank
    character(len=*) :: what
    logical :: ok
    if (rank == 0) print '(a,a,l2)', 'f08_type_get_contents: ', what, ok
    all_ok = all_ok .and. ok
  end subroutine check

  subroutine type_count(datatype, type_keyval, attribute_val, extra_state, ierror)
    type(MPI_Datatype) :: datatype
    integer :: type_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    deletes = deletes + 1
    ierror = MPI_SUCCESS
  end subroutine type_count
end module f08_type_get_contents_cbs

program f08_type_get_contents
  use mpi_f08
  use f08_type_get_contents_cbs
  implicit none
  integer :: rank, tkey, ierr, ints(4), ni, na, nd, combiner, failures, i
  integer(kind=MPI_ADDRESS_KIND) :: addrs(4), v
  logical :: flag
  type(MPI_Datatype) :: inner, outer, got(2)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_count, tkey, 0_MPI_ADDRESS_KIND)

  ! MPI_Type_get_contents: the inner type freed first, then the outer one unwrapped and what it
  ! returns freed, three times (PETSc's MPIPetsc_Type_unwrap does this).
  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, inner)
  call MPI_Type_contiguous(2, inner, outer)
  call MPI_Type_free(inner)
  failures = 0
  do i = 1, 3
    call MPI_Type_get_envelope(outer, ni, na, nd, combiner)
    call MPI_Type_get_contents(outer, ni, na, nd, ints, addrs, got)
    call MPI_Type_free(got(1), ierr)
    if (ierr /= MPI_SUCCESS) failures = failures + 1
  end do
  call MPI_Type_free(outer)
  call check(rank, 'every free of what get_contents returned worked', failures == 0)

  ! The inner type still held, with an attribute: it survives the free of the extra reference.
  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, inner)
  call MPI_Type_set_attr(inner, tkey, 5_MPI_ADDRESS_KIND)
  call MPI_Type_contiguous(2, inner, outer)
  call MPI_Type_get_envelope(outer, ni, na, nd, combiner)
  call MPI_Type_get_contents(outer, ni, na, nd, ints, addrs, got)
  call MPI_Type_free(got(1), ierr)
  call check(rank, 'freeing the extra reference worked', ierr == MPI_SUCCESS)
  call MPI_Type_get_attr(inner, tkey, v, flag)
  call check(rank, 'the attribute survived it', flag .and. v == 5)
  call MPI_Type_free(outer)
  call MPI_Type_free(inner)
  call check(rank, 'the delete callback ran once', deletes == 1)

  call MPI_Type_free_keyval(tkey)
  call MPI_Finalize()
  if (.not. all_ok) error stop 1
end program f08_type_get_contents
