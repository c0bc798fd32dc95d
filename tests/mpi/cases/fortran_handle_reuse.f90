! attrcheck-test: np=2 modes=shadow,emulate
! clean
! exit: 0
! native: same-stdout
! Objects made by Fortran calls attrcheck does not wrap (Open MPI's Fortran MPI_TYPE_CONTIGUOUS,
! MPI_COMM_SPLIT, MPI_WIN_CREATE call the library's internals, never the C MPI_* symbols) and freed
! by calls it does wrap (MPI_TYPE_FREE, MPI_COMM_FREE, MPI_WIN_FREE). The library hands the next
! object the memory of the one just freed, so its C handle equals a handle the tool saw freed.
! Every call here is correct: each free must succeed, as it does natively.
program fortran_handle_reuse
  use mpi
  implicit none
  integer :: ierr, i, t, c, w, rank, failed
  integer :: buf(4)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  failed = 0
  do i = 1, 4
    call MPI_TYPE_CONTIGUOUS(4, MPI_INTEGER, t, ierr)
    call MPI_TYPE_COMMIT(t, ierr)
    call MPI_TYPE_FREE(t, ierr)
    if (ierr /= MPI_SUCCESS) failed = failed + 1
  end do
  do i = 1, 4
    call MPI_COMM_SPLIT(MPI_COMM_WORLD, 0, rank, c, ierr)
    call MPI_COMM_FREE(c, ierr)
    if (ierr /= MPI_SUCCESS) failed = failed + 1
  end do
  do i = 1, 4
    call MPI_WIN_CREATE(buf, int(16, MPI_ADDRESS_KIND), 4, MPI_INFO_NULL, MPI_COMM_WORLD, w, ierr)
    call MPI_WIN_FREE(w, ierr)
    if (ierr /= MPI_SUCCESS) failed = failed + 1
  end do
  if (rank == 0) print '(a,i0)', 'failed frees: ', failed
  call MPI_FINALIZE(ierr)
end program
