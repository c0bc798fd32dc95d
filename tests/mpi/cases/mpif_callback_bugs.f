! attrcheck-test: np=2 modes=shadow,emulate
! expect: callback.error callback.bad-flag callback.reentrant
! expect: deprecated.call deprecated.constant
! expect-at: callback.bad-flag mpif_callback_bugs.f:26-41
! expect-at: callback.error mpif_callback_bugs.f:43-52
! expect-at: callback.reentrant mpif_callback_bugs.f:54-67
! divergence: fortran-delete-callback-wrong-handle
! clean
! exit: 0
! Fixed-form Fortran with include 'mpif.h': callbacks with one seeded
! bug each, reported at their Fortran source in both modes. A copy
! callback leaves 7 in its LOGICAL flag (callback.bad-flag); a delete
! callback of an MPI-1 keyval (MPI_KEYVAL_CREATE, default-INTEGER
! values, MPI_NULL_COPY_FN: deprecated.call and deprecated.constant)
! returns MPI_ERR_OTHER the first time it runs (callback.error); a
! copy callback sets an attribute on the communicator being copied
! (callback.reentrant, refused).
      subroutine store_seven(l)
      use, intrinsic :: iso_c_binding, only: c_f_pointer, c_loc
      logical, target :: l
      integer, pointer :: raw
      call c_f_pointer(c_loc(l), raw)
      raw = 7
      end

      subroutine garbage_copy(oldcomm, key, extra, valin, valout,
     &                        flag, ierror)
      include 'mpif.h'
      integer oldcomm, key, ierror
      integer(kind=MPI_ADDRESS_KIND) extra, valin, valout
      logical flag
      interface
        subroutine store_seven(l)
        logical, target :: l
        end subroutine
      end interface
      valout = valin
!     BUG: neither .TRUE. nor .FALSE.
      call store_seven(flag)
      ierror = MPI_SUCCESS
      end

      subroutine failing_delete(comm, key, val, extra, ierror)
      include 'mpif.h'
      integer comm, key, val, extra, ierror
      integer deletes, refused, other
      common /bugs/ deletes, refused, other
      deletes = deletes + 1
      ierror = MPI_SUCCESS
!     BUG the first time
      if (deletes .eq. 1) ierror = MPI_ERR_OTHER
      end

      subroutine reentrant_copy(oldcomm, key, extra, valin, valout,
     &                          flag, ierror)
      include 'mpif.h'
      integer oldcomm, key, ierror, rc
      integer(kind=MPI_ADDRESS_KIND) extra, valin, valout
      logical flag
      integer deletes, refused, other
      common /bugs/ deletes, refused, other
!     BUG: the object being copied
      call MPI_COMM_SET_ATTR(oldcomm, other, 1_MPI_ADDRESS_KIND, rc)
      if (rc .ne. MPI_SUCCESS) refused = refused + 1
      flag = .false.
      ierror = MPI_SUCCESS
      end

      program mpif_callback_bugs
      include 'mpif.h'
      integer ierr, rank, kflag, kdel, kre, comm, dup, first
      integer deletes, refused, other
      common /bugs/ deletes, refused, other
      external garbage_copy, failing_delete, reentrant_copy
      deletes = 0
      refused = 0
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN,
     &                             ierr)
      call MPI_COMM_CREATE_KEYVAL(garbage_copy,
     &     MPI_COMM_NULL_DELETE_FN, kflag, 0_MPI_ADDRESS_KIND, ierr)
      call MPI_KEYVAL_CREATE(MPI_NULL_COPY_FN, failing_delete, kdel,
     &     0, ierr)
      call MPI_COMM_CREATE_KEYVAL(reentrant_copy,
     &     MPI_COMM_NULL_DELETE_FN, kre, 0_MPI_ADDRESS_KIND, ierr)
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN,
     &     MPI_COMM_NULL_DELETE_FN, other, 0_MPI_ADDRESS_KIND, ierr)

      call MPI_COMM_DUP(MPI_COMM_WORLD, comm, ierr)
      call MPI_COMM_SET_ERRHANDLER(comm, MPI_ERRORS_RETURN, ierr)
      call MPI_COMM_SET_ATTR(comm, kflag, 5_MPI_ADDRESS_KIND, ierr)
      call MPI_COMM_SET_ATTR(comm, kre, 6_MPI_ADDRESS_KIND, ierr)
      call MPI_COMM_DUP(comm, dup, ierr)
      call MPI_COMM_FREE(dup, ierr)
      call MPI_COMM_DELETE_ATTR(comm, kflag, ierr)
      call MPI_COMM_DELETE_ATTR(comm, kre, ierr)

      call MPI_ATTR_PUT(comm, kdel, 1, ierr)
      call MPI_ATTR_DELETE(comm, kdel, first)
      call MPI_ATTR_PUT(comm, kdel, 2, ierr)
      call MPI_ATTR_DELETE(comm, kdel, ierr)
      call MPI_COMM_FREE(comm, ierr)
      call MPI_COMM_FREE_KEYVAL(kflag, ierr)
      call MPI_KEYVAL_FREE(kdel, ierr)
      call MPI_COMM_FREE_KEYVAL(kre, ierr)
      call MPI_COMM_FREE_KEYVAL(other, ierr)
      if (rank .eq. 0) print '(a,l2,a,i0)',
     &   'mpif_callback_bugs: failing delete failed',
     &   first .ne. MPI_SUCCESS, ', reentrant sets refused ', refused
      call MPI_FINALIZE(ierr)
      end
