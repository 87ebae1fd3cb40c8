! heat2d.f90 — the heat-equation mini-app of heat2d.c in Fortran: every
! --every steps the new temperature field t(nx, ny) is computed straight into
! the shared-memory segment (fzp_begin gives a Fortran pointer into it) and
! published; results are waited for with a window of 4 in flight.
!
!   heat2d_f URL SHM_DIR RUN NX NY STEPS EVERY BOUND [DUMP_DIR]
!
! Prints "stored step S key K ratio R max_err E abs_eb B" per step and
! stops with code 1 if any snapshot failed. The stored dims are [ny, nx]:
! the Fortran extents reversed (column-major). DUMP_DIR gets
! step-S.raw files of the published bytes for comparison with `fzsidecar get`.
program heat2d_f
  use, intrinsic :: iso_fortran_env, only: int64, real64
  use fzproducer
  implicit none
  integer, parameter :: window = 4
  character(len=1024) :: url, shm, run, arg, dumpdir
  integer :: nx, ny, steps, every, rc, i, j, step, nq, failures, u
  real(real64) :: bound, x, y
  real(real64), allocatable, target :: a(:,:), b(:,:)
  real(real64), pointer :: cur(:,:), nxt(:,:), seg(:,:)
  real(real64), parameter :: alpha = 0.2d0
  type(fzp_producer) :: p
  type(fzp_snapshot) :: q(window), s
  integer :: qstep(window)
  type(fzp_result) :: r

  if (command_argument_count() < 8) then
    write (*, '(a)') 'usage: heat2d_f URL SHM_DIR RUN NX NY STEPS EVERY BOUND [DUMP_DIR]'
    stop 2
  end if
  call get_command_argument(1, url)
  call get_command_argument(2, shm)
  call get_command_argument(3, run)
  call get_command_argument(4, arg); read (arg, *) nx
  call get_command_argument(5, arg); read (arg, *) ny
  call get_command_argument(6, arg); read (arg, *) steps
  call get_command_argument(7, arg); read (arg, *) every
  call get_command_argument(8, arg); read (arg, *) bound
  dumpdir = ''
  if (command_argument_count() >= 9) call get_command_argument(9, dumpdir)

  call fzp_new(p)
  rc = fzp_set(p, 'url', trim(url))
  if (rc == FZP_OK) rc = fzp_set(p, 'shm_dir', trim(shm))
  if (rc == FZP_OK) rc = fzp_set(p, 'reuse_segments', '2')
  if (rc == FZP_OK) rc = fzp_connect(p)
  if (rc /= FZP_OK) then
    write (*, '(a)') 'heat2d_f: [' // fzp_errcode(p) // '] ' // fzp_errmsg(p)
    stop 1
  end if

  allocate(a(nx, ny), b(nx, ny))
  do j = 1, ny
    do i = 1, nx
      x = real(i - 1, real64) / (nx - 1)
      y = real(j - 1, real64) / (ny - 1)
      a(i, j) = 100d0 * exp(-40d0 * ((x - 0.3d0)**2 + (y - 0.6d0)**2)) + 20d0 * x * y
    end do
  end do
  cur => a
  nq = 0
  failures = 0
  do step = 1, steps
    seg => null()
    if (mod(step, every) == 0) then
      if (.not. (associated(cur, a) .or. associated(cur, b))) then
        a = cur           ! every == 1: the last segment may be recycled below
        cur => a
      end if
      if (nq == window) call collect(1)
      rc = fzp_begin(p, trim(run), 'temperature', int(step, int64), [int(nx, int64), int(ny, int64)], &
                     FZP_ABS, bound, seg, s)
      if (rc /= FZP_OK) then
        write (*, '(a,i0,a)') 'FAILED step ', step, ': begin: [' // fzp_errcode(p) // '] ' // fzp_errmsg(p)
        failures = failures + 1
        seg => null()
      end if
    end if
    ! The next field goes into the segment on output steps (in place).
    if (associated(seg)) then
      nxt => seg
    else if (associated(cur, a)) then
      nxt => b
    else
      nxt => a
    end if
    nxt(1, :) = cur(1, :)
    nxt(nx, :) = cur(nx, :)
    nxt(:, 1) = cur(:, 1)
    nxt(:, ny) = cur(:, ny)
    do j = 2, ny - 1
      do i = 2, nx - 1
        nxt(i, j) = cur(i, j) + alpha * (cur(i - 1, j) + cur(i + 1, j) + cur(i, j - 1) + cur(i, j + 1) - 4d0 * cur(i, j))
      end do
    end do
    cur => nxt
    if (associated(seg)) then
      if (len_trim(dumpdir) > 0) then
        write (arg, '(a,a,i0,a)') trim(dumpdir), '/step-', step, '.raw'
        open (newunit=u, file=trim(arg), access='stream', form='unformatted', status='replace')
        write (u) seg
        close (u)
      end if
      rc = fzp_publish(p, s)
      if (rc /= FZP_OK) then
        write (*, '(a,i0,a)') 'FAILED step ', step, ': publish: [' // fzp_errcode(p) // '] ' // fzp_errmsg(p)
        failures = failures + 1
        a = cur
        cur => a
        call fzp_snapshot_free(p, s)
      else
        write (*, '(a,i0)') 'published step ', step
        nq = nq + 1
        q(nq) = s
        qstep(nq) = step
      end if
    end if
  end do
  do while (nq > 0)
    call collect(1)
  end do
  call fzp_close(p)
  if (failures > 0) stop 1

contains

  subroutine collect(k)
    integer, intent(in) :: k
    integer :: rc2
    rc2 = fzp_wait(p, q(k), 300000_int64, r)
    if (rc2 == FZP_OK) then
      write (*, '(a,i0,a,a,a,f0.2,a,es12.5,a,es12.5)') 'stored step ', qstep(k), ' key ', fzp_str(r%key), &
        ' ratio ', r%ratio, ' max_err ', r%max_abs_err, ' abs_eb ', r%abs_eb
    else
      write (*, '(a,i0,a)') 'FAILED step ', qstep(k), ': [' // fzp_errcode(p) // '] ' // fzp_errmsg(p)
      failures = failures + 1
    end if
    call fzp_snapshot_free(p, q(k))
    q(k:nq - 1) = q(k + 1:nq)
    qstep(k:nq - 1) = qstep(k + 1:nq)
    nq = nq - 1
  end subroutine

end program heat2d_f
