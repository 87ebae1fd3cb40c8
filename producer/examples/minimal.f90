! minimal.f90 — the shortest complete Fortran producer: f(200, 100) written in place.
program minimal
  use, intrinsic :: iso_fortran_env, only: int64
  use fzproducer
  implicit none
  type(fzp_producer) :: p
  type(fzp_snapshot) :: s
  type(fzp_result) :: r
  real(4), pointer :: f(:,:)
  character(len=512) :: url, shm
  integer :: rc, i, j
  call get_command_argument(1, url)
  call get_command_argument(2, shm)
  call fzp_new(p)
  if (len_trim(url) > 0) rc = fzp_set(p, 'url', trim(url))
  if (len_trim(shm) > 0) rc = fzp_set(p, 'shm_dir', trim(shm))
  rc = fzp_connect(p)
  if (rc == FZP_OK) rc = fzp_begin(p, 'minimal-f', 'field', 0_int64, [200_int64, 100_int64], FZP_REL, 1d-3, f, s)
  if (rc == FZP_OK) then
    do j = 1, 100          ! stored as dims [100, 200]: f(i, j) is element [j-1][i-1]
      do i = 1, 200
        f(i, j) = real((i - 1) * (j - 1), 4)
      end do
    end do
    rc = fzp_publish(p, s)
    if (rc == FZP_OK) rc = fzp_wait(p, s, 60000_int64, r)
    call fzp_snapshot_free(p, s)
  end if
  if (rc == FZP_OK) then
    print '(a,a,a,es10.3)', 'stored ', fzp_str(r%key), ': max error ', r%max_abs_err
  else
    print '(a)', '[' // fzp_errcode(p) // '] ' // fzp_errmsg(p)
  end if
  call fzp_close(p)
  if (rc /= FZP_OK) stop 1
end program minimal
