! fzproducer.F90 — Fortran interface to libfzproducer (ISO_C_BINDING).
!
! Hand snapshots of real(4) / real(8) arrays of rank 1-3 to an fzsidecar:
!
!   use fzproducer
!   type(fzp_producer) :: p
!   type(fzp_snapshot) :: s
!   type(fzp_result)   :: r
!   real(8), pointer   :: t(:,:)
!   call fzp_new(p)
!   rc = fzp_set(p, "shm_dir", "/dev/shm/fzsidecar")          ! options as in fzproducer.h
!   rc = fzp_connect(p)
!   rc = fzp_begin(p, "run1", "temperature", step, [nx, ny], FZP_REL, 1d-3, t, s)
!   t = ...                                                     ! written in place, in the segment
!   rc = fzp_publish(p, s)
!   rc = fzp_wait(p, s, 60000_int64, r)                        ! r%key, r%ratio, ...
!   call fzp_snapshot_free(p, s)
!   call fzp_close(p)
!
! Array order. Fortran arrays are column-major: in a(n1, n2, n3) the first
! index runs fastest. The sidecar stores C order (last dimension fastest),
! so the snapshot's dims are the Fortran extents REVERSED: a(n1,n2,n3) is
! stored with dims [n3, n2, n1], and element a(i,j,k) is element [k-1][j-1][i-1]
! of what `fzsidecar get` returns. No data is reordered.
!
! The pointer fzp_begin returns points INTO the shared-memory segment: do not
! write through it after fzp_publish, and do not use it at all after
! fzp_snapshot_free or fzp_close (the segment is then reused or unmapped).
!
! Every function returns an integer status (FZP_OK = 0, else FZP_E*);
! fzp_errmsg(p) and fzp_errcode(p) say what went wrong. Threading: as in C,
! calls on one producer must not overlap.
module fzproducer
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  private

  integer, parameter, public :: FZP_OK = 0, FZP_EINVAL = 1, FZP_ENOMEM = 2, FZP_ESYS = 3, FZP_ECONNECT = 4, &
    FZP_EUNAVAILABLE = 5, FZP_EBUDGET = 6, FZP_ESIDECAR = 7, FZP_EPUBLISH = 8, FZP_ETIMEOUT = 9, &
    FZP_ESTATE = 10, FZP_ECLOSED = 11
  integer, parameter, public :: FZP_F32 = 1, FZP_F64 = 2, FZP_ABS = 1, FZP_REL = 2

  type, public :: fzp_producer
    type(c_ptr) :: h = c_null_ptr
  end type
  type, public :: fzp_snapshot
    type(c_ptr) :: h = c_null_ptr
  end type

  !> The result of a snapshot (mirrors struct fzp_result; strings are
  !> NUL-terminated: use fzp_str to turn them into Fortran strings).
  type, public, bind(C) :: fzp_result
    integer(c_int32_t) :: ok = 0
    integer(c_int32_t) :: reserved = 0
    integer(c_int64_t) :: step = 0, raw_bytes = 0, compressed_bytes = 0
    real(c_double) :: ratio = 0, abs_eb = 0, max_abs_err = 0, seconds = 0
    character(kind=c_char) :: msg_id(160) = c_null_char
    character(kind=c_char) :: key(512) = c_null_char
    character(kind=c_char) :: error_code(64) = c_null_char
    character(kind=c_char) :: error_message(1024) = c_null_char
  end type

  public :: fzp_new, fzp_set, fzp_connect, fzp_errmsg, fzp_errcode, fzp_begin, fzp_put, fzp_publish, &
    fzp_wait, fzp_abort, fzp_snapshot_free, fzp_close, fzp_str

  interface fzp_begin
    module procedure fzp_begin_r4_1d, fzp_begin_r4_2d, fzp_begin_r4_3d, fzp_begin_r8_1d, fzp_begin_r8_2d, fzp_begin_r8_3d
  end interface
  interface fzp_put
    module procedure fzp_put_r4_1d, fzp_put_r4_2d, fzp_put_r4_3d, fzp_put_r8_1d, fzp_put_r8_2d, fzp_put_r8_3d
  end interface

  interface
    function c_new() bind(C, name="fzp_new") result(p)
      import :: c_ptr
      type(c_ptr) :: p
    end function
    function c_set(p, key, value) bind(C, name="fzp_set") result(rc)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: p
      character(kind=c_char), intent(in) :: key(*), value(*)
      integer(c_int) :: rc
    end function
    function c_connect(p) bind(C, name="fzp_connect") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: p
      integer(c_int) :: rc
    end function
    function c_errmsg(p) bind(C, name="fzp_errmsg") result(s)
      import :: c_ptr
      type(c_ptr), value :: p
      type(c_ptr) :: s
    end function
    function c_errcode(p) bind(C, name="fzp_errcode") result(s)
      import :: c_ptr
      type(c_ptr), value :: p
      type(c_ptr) :: s
    end function
    function c_begin(p, run, var, step, dtype, ndims, dims, mode, bound, fill, snap, data) &
        bind(C, name="fzp_begin") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t, c_double
      type(c_ptr), value :: p
      character(kind=c_char), intent(in) :: run(*), var(*)
      integer(c_int64_t), value :: step
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), intent(in) :: dims(*)
      integer(c_int), value :: mode
      real(c_double), value :: bound
      type(c_ptr), value :: fill
      type(c_ptr), intent(out) :: snap, data
      integer(c_int) :: rc
    end function
    function c_publish(p, s) bind(C, name="fzp_publish") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: p, s
      integer(c_int) :: rc
    end function
    function c_wait(p, s, timeout_ms, res) bind(C, name="fzp_wait") result(rc)
      import :: c_ptr, c_int, c_int64_t, fzp_result
      type(c_ptr), value :: p, s
      integer(c_int64_t), value :: timeout_ms
      type(fzp_result), intent(out) :: res
      integer(c_int) :: rc
    end function
    function c_abort(p, s) bind(C, name="fzp_abort") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: p, s
      integer(c_int) :: rc
    end function
    subroutine c_snapshot_free(p, s) bind(C, name="fzp_snapshot_free")
      import :: c_ptr
      type(c_ptr), value :: p, s
    end subroutine
    subroutine c_close(p) bind(C, name="fzp_close")
      import :: c_ptr
      type(c_ptr), value :: p
    end subroutine
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
  end interface

contains

  !> A NUL-terminated C string as a Fortran string.
  function c_to_f(s) result(f)
    type(c_ptr), intent(in) :: s
    character(len=:), allocatable :: f
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(s)) then
      f = ""
      return
    end if
    n = int(c_strlen(s))
    call c_f_pointer(s, chars, [n])
    allocate(character(len=n) :: f)
    do i = 1, n
      f(i:i) = chars(i)
    end do
  end function

  !> A NUL-terminated character array of fzp_result as a Fortran string.
  function fzp_str(chars) result(f)
    character(kind=c_char), intent(in) :: chars(:)
    character(len=:), allocatable :: f
    integer :: i, n
    n = 0
    do i = 1, size(chars)
      if (chars(i) == c_null_char) exit
      n = i
    end do
    allocate(character(len=n) :: f)
    do i = 1, n
      f(i:i) = chars(i)
    end do
  end function

  subroutine fzp_new(p)
    type(fzp_producer), intent(out) :: p
    p%h = c_new()
  end subroutine

  function fzp_set(p, key, value) result(rc)
    type(fzp_producer), intent(inout) :: p
    character(len=*), intent(in) :: key, value
    integer :: rc
    rc = c_set(p%h, key // c_null_char, value // c_null_char)
  end function

  function fzp_connect(p) result(rc)
    type(fzp_producer), intent(inout) :: p
    integer :: rc
    rc = c_connect(p%h)
  end function

  function fzp_errmsg(p) result(msg)
    type(fzp_producer), intent(in) :: p
    character(len=:), allocatable :: msg
    msg = c_to_f(c_errmsg(p%h))
  end function

  function fzp_errcode(p) result(code)
    type(fzp_producer), intent(in) :: p
    character(len=:), allocatable :: code
    code = c_to_f(c_errcode(p%h))
  end function

  function begin_c(p, run, var, step, dtype, ndims, dims, mode, bound, snap, data, fill) result(rc)
    type(fzp_producer), intent(inout) :: p
    character(len=*), intent(in) :: run, var
    integer(int64), intent(in) :: step
    integer, intent(in) :: dtype, ndims, mode
    integer(c_int64_t), intent(in) :: dims(:)
    real(real64), intent(in) :: bound
    type(fzp_snapshot), intent(out) :: snap
    type(c_ptr), intent(out) :: data
    real(real64), intent(in), optional :: fill
    integer :: rc
    real(c_double), target :: f
    type(c_ptr) :: fp
    fp = c_null_ptr
    if (present(fill)) then
      f = fill
      fp = c_loc(f)
    end if
    rc = c_begin(p%h, run // c_null_char, var // c_null_char, int(step, c_int64_t), int(dtype, c_int), &
                 int(ndims, c_int), dims, int(mode, c_int), real(bound, c_double), fp, snap%h, data)
  end function

  ! fzp_begin / fzp_put for real(c_float) and real(c_double): one template
  ! (fzproducer_real.inc) included once per kind.
#define FZP_REAL c_float
#define FZP_DTYPE FZP_F32
#define FZP_BEGIN_1D fzp_begin_r4_1d
#define FZP_BEGIN_2D fzp_begin_r4_2d
#define FZP_BEGIN_3D fzp_begin_r4_3d
#define FZP_PUT_1D fzp_put_r4_1d
#define FZP_PUT_2D fzp_put_r4_2d
#define FZP_PUT_3D fzp_put_r4_3d
#include "fzproducer_real.inc"
#define FZP_REAL c_double
#define FZP_DTYPE FZP_F64
#define FZP_BEGIN_1D fzp_begin_r8_1d
#define FZP_BEGIN_2D fzp_begin_r8_2d
#define FZP_BEGIN_3D fzp_begin_r8_3d
#define FZP_PUT_1D fzp_put_r8_1d
#define FZP_PUT_2D fzp_put_r8_2d
#define FZP_PUT_3D fzp_put_r8_3d
#include "fzproducer_real.inc"

  function fzp_publish(p, snap) result(rc)
    type(fzp_producer), intent(inout) :: p
    type(fzp_snapshot), intent(inout) :: snap
    integer :: rc
    rc = c_publish(p%h, snap%h)
  end function

  !> Waits up to timeout_ms (0: just look; < 0: no limit) for the result.
  function fzp_wait(p, snap, timeout_ms, res) result(rc)
    type(fzp_producer), intent(inout) :: p
    type(fzp_snapshot), intent(inout) :: snap
    integer(int64), intent(in) :: timeout_ms
    type(fzp_result), intent(out) :: res
    integer :: rc
    rc = c_wait(p%h, snap%h, int(timeout_ms, c_int64_t), res)
  end function

  function fzp_abort(p, snap) result(rc)
    type(fzp_producer), intent(inout) :: p
    type(fzp_snapshot), intent(inout) :: snap
    integer :: rc
    rc = c_abort(p%h, snap%h)
    if (rc == FZP_OK) snap%h = c_null_ptr
  end function

  subroutine fzp_snapshot_free(p, snap)
    type(fzp_producer), intent(inout) :: p
    type(fzp_snapshot), intent(inout) :: snap
    call c_snapshot_free(p%h, snap%h)
    snap%h = c_null_ptr
  end subroutine

  subroutine fzp_close(p)
    type(fzp_producer), intent(inout) :: p
    call c_close(p%h)
    p%h = c_null_ptr
  end subroutine

end module fzproducer
