! test_dims.f90 — publishes real(4) and real(8) arrays of rank 1, 2 and 3
! with a(i,j,k) = i + 100*j + 10000*k through both fzp_begin (in place) and
! fzp_put (a copy of a strided section), so that producer_test.go can check
! with `fzsidecar get` that dims come out reversed and every value lands
! where C order puts it. Also checks the Fortran-side error reporting.
!
!   test_dims URL SHM_DIR RUN
program test_dims
  use, intrinsic :: iso_fortran_env, only: int64, real64
  use fzproducer
  implicit none
  character(len=1024) :: url, shm, run
  type(fzp_producer) :: p
  type(fzp_snapshot) :: s
  type(fzp_result) :: r
  real(4), pointer :: f1(:), f2(:,:), f3(:,:,:)
  real(8), pointer :: d1(:), d2(:,:), d3(:,:,:)
  real(8), allocatable :: big(:,:,:)
  integer :: rc, i, j, k, fails
  integer, parameter :: n1 = 5, n2 = 4, n3 = 3

  call get_command_argument(1, url)
  call get_command_argument(2, shm)
  call get_command_argument(3, run)
  fails = 0
  call fzp_new(p)
  rc = fzp_set(p, 'colour', 'blue')
  if (rc /= FZP_EINVAL .or. index(fzp_errmsg(p), 'unknown option') == 0) then
    write (*, '(a)') 'FAIL: unknown option not reported: ' // fzp_errmsg(p)
    fails = fails + 1
  end if
  rc = fzp_set(p, 'url', trim(url))
  rc = fzp_set(p, 'shm_dir', trim(shm))
  rc = fzp_connect(p)
  if (rc /= FZP_OK) then
    write (*, '(a)') 'connect: ' // fzp_errmsg(p)
    stop 1
  end if
  ! bad bound -> FZP_EINVAL with a message, field not associated
  rc = fzp_begin(p, trim(run), 'bad', 0_int64, [int(n1, int64)], FZP_ABS, -1d0, d1, s)
  if (rc /= FZP_EINVAL .or. associated(d1) .or. fzp_errcode(p) /= 'invalid') then
    write (*, '(a,i0,a)') 'FAIL: bound -1 gave ', rc, ': ' // fzp_errmsg(p)
    fails = fails + 1
  end if

  rc = fzp_begin(p, trim(run), 'r4_1d', 0_int64, [int(n1, int64)], FZP_ABS, 1d-6, f1, s)
  call check(rc)
  do i = 1, n1
    f1(i) = real(i, 4)
  end do
  call finish('r4_1d')
  rc = fzp_begin(p, trim(run), 'r4_2d', 0_int64, [int(n1, int64), int(n2, int64)], FZP_ABS, 1d-6, f2, s)
  call check(rc)
  do j = 1, n2
    do i = 1, n1
      f2(i, j) = real(i + 100 * j, 4)
    end do
  end do
  call finish('r4_2d')
  rc = fzp_begin(p, trim(run), 'r4_3d', 0_int64, [int(n1, int64), int(n2, int64), int(n3, int64)], FZP_ABS, 1d-6, f3, s)
  call check(rc)
  do k = 1, n3
    do j = 1, n2
      do i = 1, n1
        f3(i, j, k) = real(i + 100 * j + 10000 * k, 4)
      end do
    end do
  end do
  call finish('r4_3d')
  rc = fzp_begin(p, trim(run), 'r8_1d', 0_int64, [int(n1, int64)], FZP_ABS, 1d-9, d1, s)
  call check(rc)
  do i = 1, n1
    d1(i) = real(i, 8)
  end do
  call finish('r8_1d')
  rc = fzp_begin(p, trim(run), 'r8_2d', 0_int64, [int(n1, int64), int(n2, int64)], FZP_ABS, 1d-9, d2, s)
  call check(rc)
  do j = 1, n2
    do i = 1, n1
      d2(i, j) = real(i + 100 * j, 8)
    end do
  end do
  call finish('r8_2d')
  rc = fzp_begin(p, trim(run), 'r8_3d', 0_int64, [int(n1, int64), int(n2, int64), int(n3, int64)], FZP_ABS, 1d-9, d3, s)
  call check(rc)
  do k = 1, n3
    do j = 1, n2
      do i = 1, n1
        d3(i, j, k) = real(i + 100 * j + 10000 * k, 8)
      end do
    end do
  end do
  call finish('r8_3d')
  ! fzp_put of a strided section: big(1:2*n1:2, :, :) holds the same values
  allocate(big(2 * n1, n2, n3))
  big = -1
  do k = 1, n3
    do j = 1, n2
      do i = 1, n1
        big(2 * i - 1, j, k) = real(i + 100 * j + 10000 * k, 8)
      end do
    end do
  end do
  rc = fzp_put(p, trim(run), 'r8_3d_put', 0_int64, big(1:2 * n1:2, :, :), FZP_ABS, 1d-9, s)
  call check(rc)
  call finish('r8_3d_put')
  call fzp_close(p)
  if (fails > 0) stop 1

contains

  subroutine check(rc)
    integer, intent(in) :: rc
    if (rc /= FZP_OK) then
      write (*, '(a,i0,a)') 'FAIL: status ', rc, ': ' // fzp_errmsg(p)
      stop 1
    end if
  end subroutine

  subroutine finish(name)
    character(len=*), intent(in) :: name
    integer :: rc2
    if (index(name, 'put') == 0) then
      rc2 = fzp_publish(p, s)
      call check(rc2)
    end if
    rc2 = fzp_wait(p, s, 60000_int64, r)
    call check(rc2)
    write (*, '(a)') 'stored ' // name // ' key ' // fzp_str(r%key)
    call fzp_snapshot_free(p, s)
  end subroutine

end program test_dims
