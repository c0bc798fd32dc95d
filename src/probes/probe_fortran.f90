! attrcheck's library probe for the Fortran bindings (`use mpi`), run natively like
! probe_library.c and answering in its format: whether the library passes a Fortran delete
! callback the handle of the object whose attribute is deleted (the standard), for a communicator
! freed by MPI_COMM_FREE and a datatype freed by MPI_TYPE_FREE. The callbacks record what they got.
module probe_seen
  implicit none
  integer :: seen_comm = -1, seen_type = -1
end module probe_seen

subroutine comm_delete(comm, keyval, value, extra, ierror)
  use mpi
  use probe_seen
  implicit none
  integer :: comm, keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: value, extra
  seen_comm = comm
  ierror = MPI_SUCCESS
end subroutine comm_delete

subroutine type_delete(datatype, keyval, value, extra, ierror)
  use mpi
  use probe_seen
  implicit none
  integer :: datatype, keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: value, extra
  seen_type = datatype
  ierror = MPI_SUCCESS
end subroutine type_delete

program probe_fortran
  use mpi
  use probe_seen
  implicit none
  external :: comm_delete, type_delete
  integer :: ierr, rank, key, tkey, comm, datatype, comm_handle, type_handle
  integer(kind=MPI_ADDRESS_KIND) :: value, extra
  logical :: wrong
  value = 7
  extra = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, comm_delete, key, extra, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, comm, ierr)
  comm_handle = comm
  call MPI_COMM_SET_ATTR(comm, key, value, ierr)
  call MPI_COMM_FREE(comm, ierr)
  call MPI_COMM_FREE_KEYVAL(key, ierr)
  call MPI_TYPE_CREATE_KEYVAL(MPI_TYPE_NULL_COPY_FN, type_delete, tkey, extra, ierr)
  call MPI_TYPE_CONTIGUOUS(2, MPI_INTEGER, datatype, ierr)
  type_handle = datatype
  call MPI_TYPE_SET_ATTR(datatype, tkey, value, ierr)
  call MPI_TYPE_FREE(datatype, ierr)
  call MPI_TYPE_FREE_KEYVAL(tkey, ierr)
  wrong = seen_comm /= comm_handle .or. seen_type /= type_handle
  if (rank == 0) then
    if (seen_comm /= comm_handle) print '(a,i0,a,i0)', 'note communicator: handle ', comm_handle, ', callback got ', seen_comm
    if (seen_type /= type_handle) print '(a,i0,a,i0)', 'note datatype: handle ', type_handle, ', callback got ', seen_type
    if (wrong) then
      print '(a)', 'divergence fortran-delete-callback-wrong-handle yes'
    else
      print '(a)', 'divergence fortran-delete-callback-wrong-handle no'
    end if
  end if
  call MPI_FINALIZE(ierr)
end program probe_fortran
