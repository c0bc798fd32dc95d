! attrcheck-test: np=2 modes=shadow,emulate
! divergence: fortran-delete-callback-wrong-handle
! clean
! expect-intercepted: keyval.fortran>=1 attribute.fortran>=1 object.fortran>=1 callback.fortran>=1 keyval.c=0 attribute.c=0 object.c=0 attribute.f08=0
! exit: 0
! native: same-stdout
! A correct fixed-form program (include 'mpif.h'): nothing may be
! reported but the library's known divergence. MPI_COMM_DUP_FN copies
! an address-sized value (2**40 + 3) exactly; a Fortran copy callback
! adds its extra_state; datatype attributes on a duplicate of
! MPI_INTEGER and on a derived type (MPI_TYPE_CONTIGUOUS) with
! MPI_TYPE_DUP_FN and a Fortran delete callback; a window attribute
! with a Fortran delete callback run by MPI_WIN_FREE; MPI_WIN_SIZE.
      subroutine plus_extra(old, key, extra, valin, valout, flag, ierr)
      include 'mpif.h'
      integer old, key, ierr
      integer(kind=MPI_ADDRESS_KIND) extra, valin, valout
      logical flag
      integer copies, deletes
      integer(kind=MPI_ADDRESS_KIND) dsum
      common /counts/ dsum, copies, deletes
      copies = copies + 1
      valout = valin + extra
      flag = .true.
      ierr = MPI_SUCCESS
      end

      subroutine count_delete(obj, key, val, extra, ierr)
      include 'mpif.h'
!     obj is not looked at: Open MPI 4.1.4 passes a wrong handle
      integer obj, key, ierr
      integer(kind=MPI_ADDRESS_KIND) val, extra
      integer copies, deletes
      integer(kind=MPI_ADDRESS_KIND) dsum
      common /counts/ dsum, copies, deletes
      deletes = deletes + 1
      dsum = dsum + val
      ierr = MPI_SUCCESS
      end

      program mpif_correct
      include 'mpif.h'
      integer ierr, rank, dupkey, pkey, tkey, wkey, buf(4)
      integer c1, c2, tint, tvec, tdup, win
      integer(kind=MPI_ADDRESS_KIND) big, v, wsize, zero, one
      logical flag
      integer copies, deletes
      integer(kind=MPI_ADDRESS_KIND) dsum
      common /counts/ dsum, copies, deletes
      external plus_extra, count_delete
      copies = 0
      deletes = 0
      dsum = 0
      zero = 0
      one = 1
      big = int(2, kind=MPI_ADDRESS_KIND)**40 + 3
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)

      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_DUP_FN,
     &     MPI_COMM_NULL_DELETE_FN, dupkey, zero, ierr)
      call MPI_COMM_CREATE_KEYVAL(plus_extra, count_delete, pkey,
     &     one, ierr)
      call MPI_COMM_DUP(MPI_COMM_WORLD, c1, ierr)
      call MPI_COMM_SET_ATTR(c1, dupkey, big, ierr)
      v = 10
      call MPI_COMM_SET_ATTR(c1, pkey, v, ierr)
      call MPI_COMM_DUP(c1, c2, ierr)
      call MPI_COMM_GET_ATTR(c2, dupkey, v, flag, ierr)
      if (rank .eq. 0) print '(a,l2)',
     &   'mpif_correct: MPI_COMM_DUP_FN copied', flag .and. v .eq. big
      call MPI_COMM_GET_ATTR(c2, pkey, v, flag, ierr)
      if (rank .eq. 0) print '(a,l2)',
     &   'mpif_correct: copy callback gave 11', flag .and. v .eq. 11
      call MPI_COMM_FREE(c2, ierr)
      call MPI_COMM_FREE(c1, ierr)

      call MPI_TYPE_CREATE_KEYVAL(MPI_TYPE_DUP_FN, count_delete,
     &     tkey, zero, ierr)
      call MPI_TYPE_DUP(MPI_INTEGER, tint, ierr)
      call MPI_TYPE_CONTIGUOUS(4, MPI_INTEGER, tvec, ierr)
      call MPI_TYPE_COMMIT(tvec, ierr)
      v = 100
      call MPI_TYPE_SET_ATTR(tint, tkey, v, ierr)
      call MPI_TYPE_SET_ATTR(tvec, tkey, big, ierr)
      call MPI_TYPE_DUP(tvec, tdup, ierr)
      call MPI_TYPE_GET_ATTR(tdup, tkey, v, flag, ierr)
      if (rank .eq. 0) print '(a,l2)',
     &   'mpif_correct: derived type attribute', flag .and. v .eq. big
      call MPI_TYPE_GET_ATTR(tint, tkey, v, flag, ierr)
      if (rank .eq. 0) print '(a,l2)',
     &   'mpif_correct: MPI_INTEGER dup attribute', flag .and.
     &   v .eq. 100
      call MPI_TYPE_FREE(tdup, ierr)
      call MPI_TYPE_FREE(tvec, ierr)
      call MPI_TYPE_FREE(tint, ierr)

      call MPI_WIN_CREATE_KEYVAL(MPI_WIN_NULL_COPY_FN, count_delete,
     &     wkey, zero, ierr)
      wsize = 16
      call MPI_WIN_CREATE(buf, wsize, 4, MPI_INFO_NULL,
     &     MPI_COMM_WORLD, win, ierr)
      v = 7
      call MPI_WIN_SET_ATTR(win, wkey, v, ierr)
      call MPI_WIN_GET_ATTR(win, wkey, v, flag, ierr)
      if (rank .eq. 0) print '(a,l2)',
     &   'mpif_correct: window attribute', flag .and. v .eq. 7
      call MPI_WIN_GET_ATTR(win, MPI_WIN_SIZE, v, flag, ierr)
      if (rank .eq. 0) print '(a,l2)',
     &   'mpif_correct: MPI_WIN_SIZE', flag .and. v .eq. 16
      call MPI_WIN_FREE(win, ierr)

      call MPI_COMM_FREE_KEYVAL(dupkey, ierr)
      call MPI_COMM_FREE_KEYVAL(pkey, ierr)
      call MPI_TYPE_FREE_KEYVAL(tkey, ierr)
      call MPI_WIN_FREE_KEYVAL(wkey, ierr)
      if (rank .eq. 0) print '(a,i0,a,i0,a,l2)',
     &   'mpif_correct: copies ', copies, ', deletes ', deletes,
     &   ', deleted values right',
     &   dsum .eq. 10 + 11 + 100 + 2 * big + 7
      call MPI_FINALIZE(ierr)
      end
