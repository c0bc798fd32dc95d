! attrcheck-test: np=2 modes=shadow,emulate
! expect: keyval.leak
! expect-at: keyval.leak f08_keyval_leak.f90:29
! clean
! exit: 0
! native: same-stdout
! keyval.leak through `use mpi_f08`: a keyval created with MPI_Comm_create_keyval and never freed
! is reported at the Fortran line that created it. The rest is correct use of the f08 bindings
! (derived-type handles, ierror given and omitted, INTEGER(KIND=MPI_ADDRESS_KIND) values, LOGICAL
! flags): an attribute set, read back, copied by MPI_COMM_DUP_FN on MPI_Comm_dup, deleted, a
! second keyval freed properly, and MPI_Init / MPI_Finalize through mpi_f08 too.
program f08_keyval_leak
  use mpi_f08
  implicit none
  integer :: ierr, rank, leaked, freed
  integer(kind=MPI_ADDRESS_KIND) :: value, big
  logical :: flag
  type(MPI_Comm) :: dup

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)

  big = int(2, kind=MPI_ADDRESS_KIND)**40 + 7_MPI_ADDRESS_KIND
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, freed, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, freed, big, ierr)

  ! BUG: this keyval is never freed.
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &
                              leaked, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, leaked, 5_MPI_ADDRESS_KIND)

  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  value = 0
  call MPI_Comm_get_attr(dup, freed, value, flag, ierr)
  if (.not. flag .or. value /= big) print *, 'dup did not copy the attribute', flag, value
  call MPI_Comm_get_attr(dup, leaked, value, flag)
  if (flag) print *, 'MPI_COMM_NULL_COPY_FN copied'
  call MPI_Comm_free(dup)

  call MPI_Comm_get_attr(MPI_COMM_WORLD, leaked, value, flag, ierr)
  if (.not. flag .or. value /= 5) print *, 'lost the attribute', flag, value
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, leaked, ierr)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, freed)
  call MPI_Comm_free_keyval(freed, ierr)

  if (rank == 0) print '(a)', 'f08_keyval_leak: done'
  call MPI_Finalize()
end program f08_keyval_leak
