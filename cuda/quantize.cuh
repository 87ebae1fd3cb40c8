// The exact quantize of FORMAT.md section 4 that every encoder shares, and
// its inverse the decoders share: Bits<T> (a value's bits and its
// reconstruction from q, by rec_d) and quant_q.
// Included by device_common.cuh, and by tools/encode_slow_emu.cpp on the
// host (TestEncodeSlowEmulated), which defines the CUDA intrinsics used here.

// f64(q) for the decoders' reconstruction: one I2F.F64 (quarter rate).
// Until v33 it was three full-rate instructions (the bits of 1.5*2^52 + q,
// then 1.5*2^52 subtracted); v34's A/B measured the I2F faster (smooth3d and
// hst decompress +1-6 %): the only other quarter-rate step of a decoded
// value is its F2F to f32. Both are exact, so the values are the same.
__device__ __forceinline__ double rec_d(int q) { return __int2double_rn(q); }

template <typename T> struct Bits;
template <> struct Bits<float> {
    typedef unsigned int U;
    static __device__ __forceinline__ unsigned long long of(float x) { return __float_as_uint(x); }
    static __device__ __forceinline__ float from(unsigned long long b) { return __uint_as_float((unsigned)b); }
    static __device__ __forceinline__ float rec(int q, double step) {
        return __double2float_rn(__dmul_rn(rec_d(q), step));
    }
    static __device__ __forceinline__ float recd(double qd, double step) {
        return __double2float_rn(__dmul_rn(qd, step));
    }
};
template <> struct Bits<double> {
    typedef unsigned long long U;
    static __device__ __forceinline__ unsigned long long of(double x) { return __double_as_longlong(x); }
    static __device__ __forceinline__ double from(unsigned long long b) { return __longlong_as_double(b); }
    static __device__ __forceinline__ double rec(int q, double step) { return __dmul_rn(rec_d(q), step); }
    static __device__ __forceinline__ double recd(double qd, double step) { return __dmul_rn(qd, step); }
};

// q = round(s) (ties to even, |s| < 2^28) and the check's error er = |x - rec(q)|
// (FORMAT.md section 4), for every encoder. (s + 1.5*2^52) - 1.5*2^52, rounded
// twice: the first sum is 1.5*2^52 + q exactly, so its low word is q (no F2I)
// and the second gives f64(q) (no I2F): conversions run at 1/4 rate.
template <typename T> __device__ __forceinline__ int quant_q(T x, double s, double step, double &er) {
    const double sr = __dadd_rn(s, 6755399441055744.0);
    const double qd = __dsub_rn(sr, 6755399441055744.0);
    er = fabs(__dsub_rn((double)x, (double)Bits<T>::recd(qd, step)));
    return __double2loint(sr);
}
