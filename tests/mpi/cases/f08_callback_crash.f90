! attrcheck-test: np=2 modes=shadow,emulate
! expect: callback.crash
! expect-at: callback.crash f08_callback_crash.f90:24
! expect-at: callback.crash f08_callback_crash.f90:45
! clean
! exit: signal
! callback.crash through `use mpi_f08`: a Fortran delete callback writes through a null pointer
! (the attribute value, 0) during MPI_Comm_free, in shadow mode run by the library through
! attrcheck's Fortran trampoline. The report must name the callback and survive the crash (and
! gfortran's own SIGSEGV backtrace handler, which attrcheck hands the signal on to), with the
! stack from the faulting statement (line 24) to the MPI_Comm_free that ran the callback (45);
! the signal handler finds the modules in /proc/self/maps, so the report tool symbolizes it.
module f08_callback_crash_cbs
  use mpi_f08
  use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
  implicit none
contains
  subroutine crashing_delete(comm, comm_keyval, attribute_val, extra_state, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    integer, pointer :: p
    call c_f_pointer(transfer(attribute_val, p_type()), p)
    p = 1  ! BUG: attribute_val is 0
    ierror = MPI_SUCCESS
  end subroutine crashing_delete

  function p_type() result(r)
    type(c_ptr) :: r
    r = transfer(0_MPI_ADDRESS_KIND, r)
  end function p_type
end module f08_callback_crash_cbs

program f08_callback_crash
  use mpi_f08
  use f08_callback_crash_cbs
  implicit none
  integer :: key
  type(MPI_Comm) :: comm

  call MPI_Init()
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, crashing_delete, key, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(MPI_COMM_WORLD, comm)
  call MPI_Comm_set_attr(comm, key, 0_MPI_ADDRESS_KIND)
  call MPI_Comm_free(comm)
  print '(a)', 'f08_callback_crash: not reached'
  call MPI_Finalize()
end program f08_callback_crash
