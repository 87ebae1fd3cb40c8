#!/usr/bin/env python3
"""What coding clipped tiles as full ones would cost in ratio (cuda/PERF.md item 1, v42).

Usage: /usr/bin/python3 clipped_pad_size.py DATA   (DATA: ../shared/data; needs numpy; a few minutes)

A model of version 1's tiles (docs/FORMAT.md sections 3-5: 8x16x32 box tiles, 4x4x8 sub-blocks, q = rint(x / 2eb)
with eb = REL (max - min) over the values that are not fill, fill values taking the tile's placeholder, 3-D
Lorenzo, sign-magnitude codes, bit planes and the fill mask zero-block coded) on each field stacked along z to
4 Mi values, as the bench tiles them. For every clipped tile it counts the bytes of its planes and fill mask twice:
with today's packed slots, and coded as a full tile whose cells outside the field repeat the nearest inside cell's q
and fill flag (so their residuals and mask bits are 0; FORMAT.md §3.2 as branch `padded` writes it repeats the
values, which differs only where holes or raw values lie at an edge). Escapes and raw values are left out;
full tiles count the same in both. Prints, per field and REL, the clipped tiles' bytes padded / packed and the
whole field's ratio both ways. The model's packed ratios are within 2 % of the README's CPU-codec ratios on
coads and within ~7 % on era5, 9-12 % below them on levitus: it is for comparing the two codings, not for ratios.
"""
import numpy as np, sys
TZ,TY,TX,BZ,BY,BX=8,16,32,4,4,8
def lorenzo(q):
    d=q.astype(np.int64).copy()
    for ax in range(3):
        s=[slice(None)]*3; s2=[slice(None)]*3
        s[ax]=slice(1,None); s2[ax]=slice(0,-1)
        d2=d.copy(); d2[tuple(s)]-=d[tuple(s2)]; d=d2
    return d
def parity(b):
    d=b.astype(np.uint8).copy()
    for ax in range(3):
        s=[slice(None)]*3; s2=[slice(None)]*3; s[ax]=slice(1,None); s2[ax]=slice(0,-1)
        d2=d.copy(); d2[tuple(s)]^=d[tuple(s2)]; d=d2
    return d
def slots(lz,ly,lx):
    z,y,x=np.meshgrid(np.arange(lz),np.arange(ly),np.arange(lx),indexing='ij')
    i,dz=z//BZ,z%BZ; ez=np.minimum(BZ,lz-i*BZ)
    j,dy=y//BY,y%BY; ey=np.minimum(BY,ly-j*BY)
    k,dx=x//BX,x%BX; ex=np.minimum(BX,lx-k*BX)
    return i*BZ*ly*lx+ez*j*BY*lx+ez*ey*k*BX+(dz*ey+dy)*ex+dx
SL={}
def slot_of(lz,ly,lx):
    if (lz,ly,lx) not in SL: SL[(lz,ly,lx)]=slots(lz,ly,lx)
    return SL[(lz,ly,lx)]
def bitmap_bytes(bits_by_slot):  # a 4096-bit bitmap, zero-block coded
    blk=bits_by_slot.reshape(32,128).any(axis=1)
    return 4+16*int(blk.sum())
def planes_bytes(codes_by_slot):
    n=0
    for p in range(16):
        b=(codes_by_slot>>p)&1
        if b.any(): n+=bitmap_bytes(b)
    return n
def tile_bytes(q,fill,lz,ly,lx):
    # q, fill: arrays of the tile's box (lz,ly,lx) or full (padded)
    d=lorenzo(q); d.flat[0]=0
    code=np.where(d<0,(1<<15)|(-d),d).astype(np.int64)
    code[np.abs(d)>32767]=0x8000
    sl=slot_of(*q.shape); cs=np.zeros(4096,np.int64); cs[sl.ravel()]=code.ravel()
    n=8+planes_bytes(cs)
    if fill is not None and fill.any():
        m=parity(fill); bs=np.zeros(4096,np.uint8); bs[sl.ravel()]=m.ravel(); n+=bitmap_bytes(bs)
    return n
def run(path,dims,rel,fillv,reps_to):
    a=np.fromfile(path,dtype='<f4').reshape(dims)
    if len(dims)==2: a=a[None]
    nz=max(1,reps_to//(a.shape[1]*a.shape[2]))
    a=np.concatenate([a]*(-(-nz//a.shape[0])),axis=0)[:nz]
    fill=(a==np.float32(fillv)) if fillv is not None else None
    v=a[~fill] if fill is not None else a
    eb=rel*(float(v.max())-float(v.min())); step=2*eb
    q=np.rint(a.astype(np.float64)/step)
    if fill is not None: q[fill]=0
    q=q.astype(np.int64)
    Z,Y,X=a.shape; tot_dense=tot_pad=full=0; ntiles=0
    for z0 in range(0,Z,TZ):
      for y0 in range(0,Y,TY):
        for x0 in range(0,X,TX):
          ntiles+=1
          qq=q[z0:z0+TZ,y0:y0+TY,x0:x0+TX]; ff=fill[z0:z0+TZ,y0:y0+TY,x0:x0+TX] if fill is not None else None
          lz,ly,lx=qq.shape
          if ff is not None:  # placeholder: trunc(mean of q of non-fill)
            c=(~ff).sum(); ph=int(np.trunc(qq[~ff].sum()/c)) if c else 0
            qq=np.where(ff,ph,qq)
          if (lz,ly,lx)==(TZ,TY,TX):
            b=tile_bytes(qq,ff,lz,ly,lx); full+=b; continue
          tot_dense+=tile_bytes(qq,ff,lz,ly,lx)
          iz=np.minimum(np.arange(TZ),lz-1); iy=np.minimum(np.arange(TY),ly-1); ix=np.minimum(np.arange(TX),lx-1)
          qp=qq[np.ix_(iz,iy,ix)]; fp=ff[np.ix_(iz,iy,ix)] if ff is not None else None
          tot_pad+=tile_bytes(qp,fp,TZ,TY,TX)
    raw=a.size*4; tables=4*ntiles
    r0=raw/(full+tot_dense+tables); r1=raw/(full+tot_pad+tables)
    print(f"{path.split('/')[-1][:24]:24s} rel {rel:g}: clipped tiles' bytes x{tot_pad/max(tot_dense,1):.2f}, ratio {r0:.2f} -> {r1:.2f} ({100*(r1/r0-1):+.1f} %)", flush=True)
if len(sys.argv) != 2:
    sys.exit(__doc__)
D=sys.argv[1].rstrip('/')+'/'
for rel in (1e-2,1e-3,1e-4):
    run(D+'levitus_TEMP_20x180x360.f32',(20,180,360),rel,-1e10,4<<20)
    run(D+'coads_SST_12x90x180.f32',(12,90,180),rel,-1e34,4<<20)
    run(D+'era5_t2m_uk_744x33x49.f32',(744,33,49),rel,None,4<<20)
    run(D+'plot3d_post_energy_38x76x38.f32',(38,76,38),rel,None,4<<20)
    run(D+'plot3d_comb_density_25x33x57.f32',(25,33,57),rel,None,4<<20)
