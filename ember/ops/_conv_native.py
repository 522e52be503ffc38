"""Native convolution kernels for ``nn_ops``: C++ im2col / col2im and matrix products.

A convolution is, per image n and group g, ``out_n,g (Og, P) = W_g (Og, Cg*K) @ cols_n,g``
where ``cols`` (C*K, P) gathers the input windows (im2col); the input gradient is
``col2im(W_g^T @ g_n,g)`` and the weight gradient ``sum_n g_n,g @ cols_n,g^T``.

Why native code. In numpy the gather is a padded copy plus an ``as_strided`` view copied by
a transpose, and col2im one strided ``+=`` pass over the input per kernel offset; at the
ResNet shapes those copies cost several times the matmul. Here each is one pass handling
padding, stride and dilation inline, reading ``x`` through its strides (non-contiguous inputs
are not copied).

The forward has its own register-blocked kernels, chosen by shape (``use_nhwc_fwd``): one fed
by an im2col that writes the panel layout the kernel streams (``conv_fwd``: with few output
channels, M = O = 32..128, a BLAS gemm spends much of its time re-packing the columns), one
over a padded channels-last copy of the input that reads every window in place
(``conv_fwd_nhwc``: no column matrix; better from 64 channels per group and when strided),
and, for unit width stride with output rows a multiple of the vector block, one reading the
columns as rows of a zero-padded copy (``conv_fwd_rows``: no column matrix either; at 32x32
images 2.3x the panel kernel, about 200 GFLOP/s on one core). The weight gradient, when the
channels per group are a multiple of the kernel's width (32 float / 16 double), has its own
kernel too, over a channels-last copy of the input that makes the im2col implicit
(``conv_wgrad_nhwc``: 1.1-2x OpenBLAS at the ResNet's 3x3 shapes, 1.1-1.25x at 1x1); so has
the strided input gradient (``conv_igrad_nhwc``: per stride phase, a channels-last forward over
the output gradient). The rest calls numpy's own OpenBLAS gemm (found among the loaded
libraries; 64-bit-integer interface, as numpy's wheels ship it), so there is no second BLAS.

Layout copies. The channels-last kernels' copies (NCHW -> NHWC of x or g, the output blocks
back to NCHW, the weight gradient's g panels) transpose 16x16 (float) / 8x8 (double) tiles in
registers, VL channels at a time over the whole image. Written element by element they ran at
~3.5 cycles a value and took 6-28% of the time of the stride-2 and weight-gradient kernels. A
1x1 convolution without padding is run as the stride-1 convolution of its subsampled view
(``subsample_1x1``), whose stride-2 rows the copies and the panel gather compact with vector
permutes; its strided input gradient is one gemm and an expand that writes every element of dx
once (col2im zeroed dx, then scattered). Measured single-threaded, interleaved
against the previous kernels on this machine (Zen 4, ~115 GFLOP/s peak a core), at the ResNet's
slow shapes, GFLOP/s before -> after (layer 2, layer 3): stride-2 3x3 forward 62-74 -> 86-93
and 75-88 -> 91-98, input gradient 72 -> 84 and 83 -> 93, weight gradient 66-74 -> 89-93 and
75-77 -> 88-91 (as the compiled graph sends it, on its padded copy: 65-67 -> 92 and 70-74 ->
84-90); stride-1 3x3 weight gradients 82-94 -> 96-101; 1x1 stride-2 forward 55-59 -> 69-74 and
72 -> 74-76, input gradient 60 -> 74-81 and 79 -> 88, weight gradient 51 -> 64 and 60 -> 70-75.
What is left of the gap to the peak is mostly the copies themselves (7-10% of the time, three
times their in-cache cost: x comes from L3; prefetching the next image during the arithmetic
made the forward 5% slower) and the stores of dx / out. The benchmark ResNet's training step
(batch 32, two threads, interleaved medians on this shared machine): compiled 77 -> 72 ms,
eager 145 -> 138 ms.

Threads. One image's columns (about a megabyte at 32x32) are written and consumed by the same
thread while they are still in its cache, and the images of a batch are spread over OpenMP
threads (one parallel region per call; idle threads sleep, ``OMP_WAIT_POLICY=passive``), with
OpenBLAS single-threaded inside each (``openblas_set_num_threads_local``). Letting OpenBLAS
parallelise every per-image gemm instead costs a thread barrier per image: measured on this
shared 2-core machine under load, a ResNet forward took 9.3 s that way and 0.29 s this way.
With one image (or no per-thread BLAS control) the gradients' images run serially and
OpenBLAS uses its own threads. The weight gradient accumulates in per-thread buffers (gemm
with beta = 1, or the kernel's own sums) added in thread order: deterministic for a given
thread count.

Spatial dims are always three in C++ (1-d and 2-d pass size-1 leading dims). The library is
compiled once with the inductor's code cache (same compiler, flags, on-disk cache). When there
is no C++ compiler or numpy's BLAS is not such an OpenBLAS, :func:`lib` returns None (logged
once) and the kernels keep their numpy formulation (slower, same results).
"""
from __future__ import annotations

import ctypes
import logging

import numpy as np

from ..runtime.native import LazyLibrary
from . import _conv_winograd

log = logging.getLogger("ember.ops")

_SOURCE = r"""
// The inductor compiles with -ffp-contract=off (compiled pointwise code rounds like eager
// numpy). These kernels want a*b+c as one FMA: it is half the instructions of the inner loop
// (without it the forward runs at half speed), and eager and compiled code both call these
// same kernels, so they still agree with each other; torch's and BLAS's convolutions fuse too.
#pragma GCC optimize ("fp-contract=fast")
#pragma GCC diagnostic ignored "-Wpsabi"
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>
#include <omp.h>
typedef int64_t i64;

// The vector width the kernels are written in (GCC vector extensions): one register of the host
// (-march=native). 64 bytes with AVX-512 (32 registers): MR x NR = 8 x 32 float accumulators in
// 16 registers. Without it, 32 bytes (AVX2 / AVX: 16 registers): NR = two 32-byte vectors and
// MR = 8 float rows (16 accumulators: some spill, yet 1.1-1.5x the 8-register MR = 4 blocks at
// the ResNet's shapes in the panel kernel, measured interleaved on a Zen AVX2 core), 4 double
// rows (MR must divide the vector length). The channels-last, row and Winograd kernels take
// their own float blocks there (EMBER_MRN_F, EMBER_MRO_F below): measured in session 50 on the
// AVX2 EPYC, MR = 8 made them 1.2-1.5x slower.
// (64-byte vectors on an AVX2 CPU were lowered to pairs with spills and element-wise shuffles:
// the ResNet's convolutions ran at 3-4 GFLOP/s there, 30x below the GEMM.)
// (A source defining EMBER_VB first -- with EMBER_MR_F, EMBER_MR_D -- builds the other width:
// tests/ops/test_conv_native_widths.py runs both on any host.)
#ifndef EMBER_VB
#if defined(__AVX512F__)
#define EMBER_VB 64
#define EMBER_MR_F 8
#define EMBER_MR_D 8
#else
#define EMBER_VB 32
#define EMBER_MR_F 8
#define EMBER_MR_D 4
#endif
#endif
#define EMBER_NR_F (2 * EMBER_VB / 4)
#define EMBER_NR_D (2 * EMBER_VB / 8)
// The channels-last kernels' block of output positions (float; they block positions, not
// channels, so it need not divide the vector length). With 32-byte vectors 6 rows: 12
// accumulators, two B vectors and a broadcast fill 15 of the 16 registers, where MR = 8 spills.
// Measured on the AVX2 EPYC (2 threads, batch 32): the ResNet's stride-2 3x3 forwards 1.1-1.3x
// faster (32->64 at 32x32: 2.90 -> 2.23 ms, level with PyTorch's 2.17), 64->64 at 16x16 1.4x.
#ifndef EMBER_MRN_F
#if EMBER_VB == 64
#define EMBER_MRN_F 8
#else
#define EMBER_MRN_F 6
#endif
#endif
// The products that block output channels (the row kernel, Winograd's), float: with 32-byte
// vectors 4 channels below 64 output channels (no partial block) and 6 from 64, not MR = 8,
// whose spills cost 1.2-1.5x (Winograd forward 32->32 at 32x32 4.3 -> 3.1 ms, 128->128 at 8x8
// 2.9 -> 2.0, weight gradients 1.25-1.35x faster; row kernel 32->32 5.5 -> 3.8). Both are MR
// with 64-byte vectors (32 registers hold MR = 8 blocks).
#ifndef EMBER_MRO_F
#if EMBER_VB == 64
#define EMBER_MRO_F EMBER_MR_F
#define EMBER_MRO_WIDE_F EMBER_MR_F
#else
#define EMBER_MRO_F 4
#define EMBER_MRO_WIDE_F 6
#endif
#endif
// (calls f<MRO>(args...) with the float row block for O output channels per group)
#define EMBER_BY_OUT_CHANNELS(O, f, T, MR, NR, ...) \
    do { if constexpr (sizeof(T) != 4) f<T, MR, NR>(__VA_ARGS__); \
         else if ((O) < 64) f<T, EMBER_MRO_F, NR>(__VA_ARGS__); \
         else f<T, EMBER_MRO_WIDE_F, NR>(__VA_ARGS__); } while (0)

// g: N, C, D, H, W, KD, KH, KW, OD, OH, OW, sd, sh, sw, pd, ph, pw, dd, dh, dw, threads, O, groups, fwd kernel, O, groups
// xs: element strides of x (n, c, d, h, w)
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
typedef int (*setlocal_t)(int);

static inline void valid_range(i64 O, i64 L, i64 s, i64 off, i64* lo, i64* hi) {
    // outputs o in [lo, hi) with 0 <= o*s + off < L
    i64 a = off >= 0 ? 0 : (-off + s - 1) / s;
    i64 b = L - off <= 0 ? 0 : (L - off + s - 1) / s;
    if (b > O) b = O;
    if (a > b) a = b;
    *lo = a; *hi = b;
}

template <class T> struct VT;
template <> struct VT<float> { typedef float v __attribute__((vector_size(EMBER_VB))); };
template <> struct VT<double> { typedef double v __attribute__((vector_size(EMBER_VB))); };

// ---- in-register VL x VL transposes (VL = 16 float / 8 double: one 64-byte vector a row), for
// the layout changes between NCHW and the channels-last copies: log2(VL) steps of one two-source
// permute per row (vpermt2ps/pd with AVX-512; GCC lowers the same code elsewhere). The scalar
// transposing copies they replace ran at ~3.5 cycles an element (a store per element, each to
// another line) and cost 6-28% of the channels-last kernels' time at the ResNet shapes.
template <class T> struct IVT;
template <> struct IVT<float> { typedef int32_t v __attribute__((vector_size(EMBER_VB))); };
template <> struct IVT<double> { typedef int64_t v __attribute__((vector_size(EMBER_VB))); };
template <class IV, int VL, int E, int... K>
static constexpr IV tmask_lo(std::integer_sequence<int, K...>) { return IV{((K & E) ? VL + K - E : K)...}; }
template <class IV, int VL, int E, int... K>
static constexpr IV tmask_hi(std::integer_sequence<int, K...>) { return IV{((K & E) ? VL + K : K + E)...}; }
// {a[B], b[B], a[B + 1], b[B + 1], ...}: two vectors' elements from B on, interleaved
template <class IV, int VL, int B, int... K>
static constexpr IV tmask_zip(std::integer_sequence<int, K...>) { return IV{((K & 1) ? VL + B + K / 2 : B + K / 2)...}; }
// {u[0], u[2], ..., u[VL - 2], v[1], v[3], ..., v[VL - 1]}: the even values of a 2 VL - 1 long row
// read as u = row[0, VL), v = row[VL - 1, 2 VL - 1)
template <class IV, int VL, int... K>
static constexpr IV tmask_even(std::integer_sequence<int, K...>) { return IV{(K < VL / 2 ? 2 * K : 2 * K + 1)...}; }
// one step of the recursive block transpose: in every 2E x 2E block the off-diagonal E x E blocks swap
template <class T, int E>
static inline void transpose_step(typename VT<T>::v* r) {
    typedef typename VT<T>::v vec;
    typedef typename IVT<T>::v ivec;
    constexpr int VL = EMBER_VB / sizeof(T);
    constexpr ivec lo = tmask_lo<ivec, VL, E>(std::make_integer_sequence<int, VL>{});
    constexpr ivec hi = tmask_hi<ivec, VL, E>(std::make_integer_sequence<int, VL>{});
    for (int i = 0; i < VL; ++i)
        if (!(i & E)) {
            const vec a = r[i], b = r[i + E];
            r[i] = __builtin_shuffle(a, b, lo);
            r[i + E] = __builtin_shuffle(a, b, hi);
        }
}
template <class T>
static inline void transpose_regs(typename VT<T>::v* r) {
    constexpr int VL = EMBER_VB / sizeof(T);
    if constexpr (VL >= 16) transpose_step<T, 8>(r);
    if constexpr (VL >= 8) transpose_step<T, 4>(r);
    transpose_step<T, 2>(r);
    transpose_step<T, 1>(r);
}
// one row of VL values src[0], src[S], ..., src[(VL - 1) S] (S = 1 or 2; with 2, the odd half
// comes from a second load starting at src[VL - 1], so nothing past the last value is read)
template <class T, int S>
static inline typename VT<T>::v load_row(const T* src) {
    typedef typename VT<T>::v vec;
    typedef typename IVT<T>::v ivec;
    constexpr int VL = EMBER_VB / sizeof(T);
    vec u;
    __builtin_memcpy(&u, src, EMBER_VB);
    if constexpr (S == 2) {
        constexpr ivec m = tmask_even<ivec, VL>(std::make_integer_sequence<int, VL>{});
        vec v;
        __builtin_memcpy(&v, src + VL - 1, EMBER_VB);
        u = __builtin_shuffle(u, v, m);
    }
    return u;
}
// dst[j * ds + i] = src[i * ss + j * S] for i, j < VL (one full tile)
template <class T, int S = 1>
static inline void transpose_tile(const T* __restrict src, i64 ss, T* __restrict dst, i64 ds) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T);
    vec r[VL];
    for (int i = 0; i < VL; ++i) r[i] = load_row<T, S>(src + i * ss);
    transpose_regs<T>(r);
    for (int j = 0; j < VL; ++j) __builtin_memcpy(dst + j * ds, &r[j], EMBER_VB);
}

// the VL x VL block at src (rows ss apart) transposed in registers: put(j, v) gets its column j
// as the vector v
template <class T, class F>
static inline void transpose_rows(const T* __restrict src, i64 ss, F put) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T);
    vec r[VL];
    for (int i = 0; i < VL; ++i) __builtin_memcpy(&r[i], src + i * ss, EMBER_VB);
    transpose_regs<T>(r);
    for (int j = 0; j < VL; ++j) put(j, r[j]);
}

// dst[j * ld + i] = acc[i][j] for i < mv, j < nv: an MR positions x NR channels accumulator block
// stored channel by channel (MR contiguous values a channel, as NCHW wants them); a full block
// through register transposes (32 stores of 8 values instead of 256 scalar ones)
template <class T, int MR, int NR>
static inline void store_block_t(typename VT<T>::v (&acc)[MR][NR / (EMBER_VB / sizeof(T))], T* __restrict dst, i64 ld,
                                 i64 mv, i64 nv) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T), NV = NR / VL;
    if constexpr (VL == MR) {
        if (mv == MR && nv == NR) {
            for (int v = 0; v < NV; ++v) {
                vec r[VL];
                for (int i = 0; i < MR; ++i) r[i] = acc[i][v];
                transpose_regs<T>(r);
                for (int j = 0; j < VL; ++j) __builtin_memcpy(dst + (v * VL + j) * ld, &r[j], EMBER_VB);
            }
            return;
        }
    } else if constexpr (VL == 2 * MR && NV % 2 == 0) {
        if (mv == MR && nv == NR) {
            for (int v = 0; v < NV; v += 2) {
                vec r[VL];
                for (int i = 0; i < MR; ++i) { r[i] = acc[i][v]; r[MR + i] = acc[i][v + 1]; }
                transpose_regs<T>(r);
                for (int j = 0; j < VL; ++j) {
                    __builtin_memcpy(dst + (v * VL + j) * ld, &r[j], MR * sizeof(T));
                    __builtin_memcpy(dst + ((v + 1) * VL + j) * ld, (const T*)&r[j] + MR, MR * sizeof(T));
                }
            }
            return;
        }
    }
    if constexpr (MR < VL) {
        // (a block of fewer positions than the vector length, EMBER_MRN_F = 6 of 8: transposed
        // with zero rows after the MR real ones; MR values stored a channel)
        if (mv == MR && nv == NR) {
            for (int v = 0; v < NV; ++v) {
                vec r[VL];
                for (int i = 0; i < VL; ++i) r[i] = i < MR ? acc[i][v] : vec{};
                transpose_regs<T>(r);
                for (int j = 0; j < VL; ++j) __builtin_memcpy(dst + (v * VL + j) * ld, &r[j], MR * sizeof(T));
            }
            return;
        }
    }
    T tmp[NR];
    for (i64 i = 0; i < mv; ++i) {
        for (int v = 0; v < NV; ++v) __builtin_memcpy(tmp + v * VL, &acc[i][v], EMBER_VB);
        for (i64 j = 0; j < nv; ++j) dst[j * ld + i] = tmp[j];
    }
}

// the (C*K, P) columns of one image (xb: its first element)
template <class T>
static void im2col_image(const T* __restrict xb, const i64* g, const i64* xs, T* __restrict dst) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T);
    const i64 C = g[1], D = g[2], H = g[3], W = g[4], KD = g[5], KH = g[6], KW = g[7];
    const i64 OD = g[8], OH = g[9], OW = g[10], sd = g[11], sh = g[12], sw = g[13];
    const i64 pd = g[14], ph = g[15], pw = g[16], dd = g[17], dh = g[18], dw = g[19];
    for (i64 c = 0; c < C; ++c) {
        const T* xc = xb + c * xs[1];
        for (i64 kd = 0; kd < KD; ++kd)
        for (i64 kh = 0; kh < KH; ++kh)
        for (i64 kw = 0; kw < KW; ++kw) {
            i64 wlo, whi;
            const i64 woff = kw * dw - pw;
            valid_range(OW, W, sw, woff, &wlo, &whi);
            for (i64 od = 0; od < OD; ++od) {
                const i64 id = od * sd - pd + kd * dd;
                for (i64 oh = 0; oh < OH; ++oh, dst += OW) {
                    const i64 ih = oh * sh - ph + kh * dh;
                    if (id < 0 || id >= D || ih < 0 || ih >= H) {
                        for (i64 ow = 0; ow < OW; ++ow) dst[ow] = T(0);
                        continue;
                    }
                    const T* row = xc + id * xs[2] + ih * xs[3];
                    for (i64 ow = 0; ow < wlo; ++ow) dst[ow] = T(0);
                    if (sw == 1 && xs[4] == 1) {
                        const T* src = row + woff;
#pragma omp simd
                        for (i64 ow = wlo; ow < whi; ++ow) dst[ow] = src[ow];
                    } else {
                        const i64 step = sw * xs[4];
                        const T* src = row + woff * xs[4];
                        i64 ow = wlo;
                        if (step == 2)
                            for (; ow + VL <= whi; ow += VL) {
                                const vec v = load_row<T, 2>(src + 2 * ow);
                                __builtin_memcpy(dst + ow, &v, EMBER_VB);
                            }
                        for (; ow < whi; ++ow) dst[ow] = src[ow * step];
                    }
                    for (i64 ow = whi; ow < OW; ++ow) dst[ow] = T(0);
                }
            }
        }
    }
}

// dxb (contiguous C, D, H, W of one image) = the adjoint of im2col_image applied to src; overwritten.
template <class T>
static void col2im_image(const T* __restrict src, const i64* g, T* __restrict xb0) {
    const i64 C = g[1], D = g[2], H = g[3], W = g[4], KD = g[5], KH = g[6], KW = g[7];
    const i64 OD = g[8], OH = g[9], OW = g[10], sd = g[11], sh = g[12], sw = g[13];
    const i64 pd = g[14], ph = g[15], pw = g[16], dd = g[17], dh = g[18], dw = g[19];
    const i64 S = D * H * W;
    for (i64 c = 0; c < C; ++c) {
        T* xb = xb0 + c * S;
        for (i64 i = 0; i < S; ++i) xb[i] = T(0);
        for (i64 kd = 0; kd < KD; ++kd)
        for (i64 kh = 0; kh < KH; ++kh)
        for (i64 kw = 0; kw < KW; ++kw) {
            i64 wlo, whi;
            const i64 woff = kw * dw - pw;
            valid_range(OW, W, sw, woff, &wlo, &whi);
            for (i64 od = 0; od < OD; ++od) {
                const i64 id = od * sd - pd + kd * dd;
                for (i64 oh = 0; oh < OH; ++oh, src += OW) {
                    const i64 ih = oh * sh - ph + kh * dh;
                    if (id < 0 || id >= D || ih < 0 || ih >= H) continue;
                    const i64 base = (id * H + ih) * W + woff;
                    if (sw == 1) {
#pragma omp simd
                        for (i64 ow = wlo; ow < whi; ++ow) xb[base + ow] += src[ow];
                    } else {
                        for (i64 ow = wlo; ow < whi; ++ow) xb[base + ow * sw] += src[ow];
                    }
                }
            }
        }
    }
}

// dx of one image (contiguous C, D, H, W) for a 1x1 kernel without padding: src (C, P) placed at
// the strided positions, zeros elsewhere, every element written once (col2im zeroes the image and
// then scatters: at the ResNet's stride-2 shortcut that was 40% of the input gradient's time)
template <class T>
static void expand_1x1_image(const T* __restrict src, const i64* g, T* __restrict xb) {
    typedef typename VT<T>::v vec;
    typedef typename IVT<T>::v ivec;
    constexpr int VL = EMBER_VB / sizeof(T);
    constexpr ivec zlo = tmask_zip<ivec, VL, 0>(std::make_integer_sequence<int, VL>{});
    constexpr ivec zhi = tmask_zip<ivec, VL, VL / 2>(std::make_integer_sequence<int, VL>{});
    const i64 C = g[1], D = g[2], H = g[3], W = g[4], OD = g[8], OH = g[9], OW = g[10];
    const i64 sd = g[11], sh = g[12], sw = g[13];
    for (i64 c = 0; c < C; ++c)
        for (i64 id = 0; id < D; ++id) {
            T* plane = xb + (c * D + id) * H * W;
            std::memset(plane, 0, (size_t)(H * W) * sizeof(T));
            if (id % sd != 0 || id / sd >= OD) continue;
            for (i64 oh = 0; oh < OH && oh * sh < H; ++oh) {
                T* row = plane + oh * sh * W;
                const T* sr = src + ((c * OD + id / sd) * OH + oh) * OW;
                i64 o = 0;
                if (sw == 2) {
                    const vec z = {};
                    for (; o + VL <= OW && 2 * o + 2 * VL <= W; o += VL) {
                        vec u;
                        __builtin_memcpy(&u, sr + o, EMBER_VB);
                        const vec lo = __builtin_shuffle(u, z, zlo), hi = __builtin_shuffle(u, z, zhi);
                        __builtin_memcpy(row + 2 * o, &lo, EMBER_VB);
                        __builtin_memcpy(row + 2 * o + VL, &hi, EMBER_VB);
                    }
                }
                for (; o < OW && o * sw < W; ++o) row[o * sw] = sr[o];
            }
        }
}

template <class T>
struct Gemm {
    // cblas_?gemm with 64-bit integers (OpenBLAS INTERFACE64, as numpy's wheels ship it)
    typedef void (*fn)(int, int, int, i64, i64, i64, T, const T*, i64, const T*, i64, T, T*, i64);
};

// a per-thread buffer kept between calls (slot: buffers one kernel needs at once)
template <class T, int slot = 0>
static T* scratch(size_t n) {
    static thread_local std::vector<T> buf;
    if (buf.size() < n) buf.resize(n);
    return buf.data();
}

// Run body(n) for every image: across OpenMP threads with a single-threaded BLAS in each (one
// parallel region per call, idle threads sleep: OMP_WAIT_POLICY=passive), or -- one image, one
// thread, or no per-thread BLAS control -- serially with BLAS's own threads.
template <class F>
static void for_images(i64 N, const i64* g, setlocal_t setl, F body) {
    const int nt = (int)g[20];
    if (setl != nullptr && nt > 1 && N > 1) {
#pragma omp parallel num_threads(nt)
        {
            setl(1);
#pragma omp for schedule(static)
            for (i64 n = 0; n < N; ++n) body(n, omp_get_thread_num());
            setl(0);   // back to the process-wide BLAS thread count
        }
    } else {
        for (i64 n = 0; n < N; ++n) body(n, 0);
    }
}

// whether x's spatial block of one channel is contiguous (then a 1x1/stride 1/no padding
// convolution reads x itself as the column matrix, ld = channel stride)
static bool direct_ok(const i64* g, const i64* xs) {
    const i64 K = g[5] * g[6] * g[7];
    if (K != 1) return false;
    for (int i = 11; i < 14; ++i) if (g[i] != 1) return false;
    for (int i = 14; i < 17; ++i) if (g[i] != 0) return false;
    const i64 D = g[2], H = g[3], W = g[4];
    // (the output can be smaller than the input: a transposed convolution's weight gradient, whose
    // output_padding >= stride made its grad larger than the forward of its input would be)
    if (g[8] != D || g[9] != H || g[10] != W) return false;
    return (W == 1 || xs[4] == 1) && (H == 1 || xs[3] == W) && (D == 1 || xs[2] == H * W) &&
           (g[1] == 1 || xs[1] >= D * H * W);
}

// dx (N, C, S) = col2im(W_g^T (Cg*K, Og) @ g_n,g (Og, P)); a 1x1 without padding expands instead
template <class T>
static void conv_igrad(const T* go, const i64* g, const T* w, T* dx, void* gemm_p, void* setl_p) {
    typename Gemm<T>::fn gemm = (typename Gemm<T>::fn)gemm_p;
    const i64 N = g[0], C = g[1], K = g[5] * g[6] * g[7], P = g[8] * g[9] * g[10], O = g[21], G = g[22];
    const i64 S = g[2] * g[3] * g[4], Cg = C / G, Og = O / G, CgK = Cg * K;
    for_images(N, g, (setlocal_t)setl_p, [&](i64 n, int) {
        T* cols = scratch<T>(C * K * P);
        for (i64 gi = 0; gi < G; ++gi)
            gemm(RowMajor, Trans, NoTrans, CgK, P, Og, T(1), w + gi * Og * CgK, CgK, go + (n * O + gi * Og) * P, P,
                 T(0), cols + gi * CgK * P, P);
        if (K == 1 && g[14] == 0 && g[15] == 0 && g[16] == 0) expand_1x1_image(cols, g, dx + n * C * S);
        else col2im_image(cols, g, dx + n * C * S);
    });
}

// dw (G, Og, Cg*K) = sum_n g_n,g (Og, P) @ cols_n,g^T: per-thread partial sums (BLAS beta = 1),
// added in thread order at the end (deterministic for a given thread count)
template <class T>
static void conv_wgrad(const T* go, const i64* g, const T* x, const i64* xs, T* dw, void* gemm_p, void* setl_p) {
    typename Gemm<T>::fn gemm = (typename Gemm<T>::fn)gemm_p;
    const i64 N = g[0], C = g[1], K = g[5] * g[6] * g[7], P = g[8] * g[9] * g[10], O = g[21], G = g[22];
    const i64 Cg = C / G, Og = O / G, CgK = Cg * K, WN = O * CgK;
    const bool direct = direct_ok(g, xs);
    const int nt = g[20] > 1 ? (int)g[20] : 1;
    std::vector<T> parts((size_t)nt * WN, T(0));
    for_images(N, g, (setlocal_t)setl_p, [&](i64 n, int t) {
        const T* B;
        i64 ldb;
        if (direct) { B = x + n * xs[0]; ldb = C == 1 ? P : xs[1]; }
        else { T* cols = scratch<T>(C * K * P); im2col_image(x + n * xs[0], g, xs, cols); B = cols; ldb = P; }
        T* acc = parts.data() + (size_t)t * WN;
        for (i64 gi = 0; gi < G; ++gi)
            gemm(RowMajor, NoTrans, Trans, Og, CgK, P, T(1), go + (n * O + gi * Og) * P, P, B + gi * CgK * ldb, ldb,
                 T(1), acc + gi * Og * CgK, CgK);
    });
    for (i64 i = 0; i < WN; ++i) {
        T s = parts[i];
        for (int t = 1; t < nt; ++t) s += parts[(size_t)t * WN + i];
        dw[i] = s;
    }
}

// ---- the forward's own register-blocked kernel (MR x NR accumulators, NR = two 64-byte vectors):
// im2col writes the columns straight into NR-wide panels (the layout the kernel streams; no
// separate packing pass as a BLAS would make), the weights are packed once per call into
// MR-row blocks; rows/columns past O/P are computed on zero padding and not stored. Measured
// single-threaded at the ResNet shapes: 85-130 GFLOP/s, against 75-90 for OpenBLAS's sgemm
// per image (which packs the columns again) -- M = O is small here.
// rows [r0, r0 + R) of one image's (C*K, P) columns into panels: dst[(p / NR) * R * NR + r * NR + p % NR]
template <class T, int NR>
static void im2col_panels(const T* __restrict xb, const i64* g, const i64* xs, i64 c0, i64 c1, i64 Ppad,
                          T* __restrict dst) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T);
    const i64 D = g[2], H = g[3], W = g[4], KD = g[5], KH = g[6], KW = g[7];
    const i64 OD = g[8], OH = g[9], OW = g[10], sd = g[11], sh = g[12], sw = g[13];
    const i64 pd = g[14], ph = g[15], pw = g[16], dd = g[17], dh = g[18], dw = g[19];
    const i64 K = KD * KH * KW, R = (c1 - c0) * K, P = OD * OH * OW;
    i64 r = 0;
    for (i64 c = c0; c < c1; ++c) {
        const T* xc = xb + c * xs[1];
        for (i64 kd = 0; kd < KD; ++kd)
        for (i64 kh = 0; kh < KH; ++kh)
        for (i64 kw = 0; kw < KW; ++kw, ++r) {
            i64 wlo, whi;
            const i64 woff = kw * dw - pw;
            valid_range(OW, W, sw, woff, &wlo, &whi);
            T* base = dst + r * NR;
            i64 p = 0;
            for (i64 od = 0; od < OD; ++od) {
                const i64 id = od * sd - pd + kd * dd;
                for (i64 oh = 0; oh < OH; ++oh) {
                    const i64 ih = oh * sh - ph + kh * dh;
                    const bool in = !(id < 0 || id >= D || ih < 0 || ih >= H);
                    const T* src = in ? xc + id * xs[2] + ih * xs[3] + woff * xs[4] : nullptr;
                    const i64 step = sw * xs[4];
                    for (i64 ow = 0; ow < OW;) {
                        const i64 q = p % NR;
                        i64 len = NR - q;
                        if (len > OW - ow) len = OW - ow;
                        T* d = base + (p / NR) * R * NR + q;
                        if (!in) { for (i64 j = 0; j < len; ++j) d[j] = T(0); }
                        else if (step == 1 && ow >= wlo && ow + len <= whi) {
                            const T* s = src + ow;
#pragma omp simd
                            for (i64 j = 0; j < len; ++j) d[j] = s[j];
                        } else if (step == 2 && ow >= wlo && ow + len <= whi) {
                            i64 j = 0;
                            for (; j + VL <= len; j += VL) {
                                const vec v = load_row<T, 2>(src + 2 * (ow + j));
                                __builtin_memcpy(d + j, &v, EMBER_VB);
                            }
                            for (; j < len; ++j) d[j] = src[2 * (ow + j)];
                        } else {
                            for (i64 j = 0; j < len; ++j) {
                                const i64 o = ow + j;
                                d[j] = (o >= wlo && o < whi) ? src[o * step] : T(0);
                            }
                        }
                        ow += len;
                        p += len;
                    }
                }
            }
            for (; p < Ppad; ++p) base[(p / NR) * R * NR + p % NR] = T(0);
        }
    }
}

// C (MR x NR block, ldc) = A (packed [k][MR]) . B (packed [k][NR]); only mv rows x nv columns stored
// The lines of an output tile (mv rows of NR values, ldc apart) asked for before its FMAs: a
// convolution's output is a buffer the graph last wrote long ago (its lines come from memory for
// the stores), and with few multiply-adds per output (the 3-channel stem: 27) the stores waited
// on them -- the ResNet stem ran 0.43 ms alone and 0.8 ms in the compiled graph
template <class T, int NR>
static inline void prefetch_tile(const T* C, i64 ldc, i64 mv) {
    for (i64 i = 0; i < mv; ++i) {
        const char* r = (const char*)(C + i * ldc);
        for (size_t o = 0; o < NR * sizeof(T); o += 64) __builtin_prefetch(r + o, 1, 3);
        __builtin_prefetch(r + NR * sizeof(T) - 1, 1, 3);
    }
}

template <class T, int MR, int NR>
static inline void micro(const T* __restrict A, const T* __restrict B, i64 K, T* __restrict C, i64 ldc, i64 mv,
                         i64 nv) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T), NV = NR / VL;
    vec acc[MR][NV];
    prefetch_tile<T, NR>(C, ldc, mv);
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) acc[i][j] = vec{} ;
    for (i64 k = 0; k < K; ++k) {
        vec b[NV];
        for (int j = 0; j < NV; ++j) __builtin_memcpy(&b[j], B + k * NR + j * VL, EMBER_VB);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            const T a = A[k * MR + i];
            for (int j = 0; j < NV; ++j) acc[i][j] += a * b[j];
        }
    }
    if (mv == MR && nv == NR) {
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < NV; ++j) __builtin_memcpy(C + i * ldc + j * VL, &acc[i][j], EMBER_VB);
    } else {
        T tmp[NR];
        for (i64 i = 0; i < mv; ++i) {
            for (int j = 0; j < NV; ++j) __builtin_memcpy(tmp + j * VL, &acc[i][j], EMBER_VB);
            for (i64 j = 0; j < nv; ++j) C[i * ldc + j] = tmp[j];
        }
    }
}

// out (N, O, P) = W_g (Og, Cg*K) @ cols_n,g (Cg*K, P), images over OpenMP threads
template <class T, int MR, int NR>
static void conv_fwd(const T* x, const i64* g, const i64* xs, const T* w, T* out) {
    const i64 N = g[0], C = g[1], K = g[5] * g[6] * g[7], P = g[8] * g[9] * g[10], O = g[21], G = g[22];
    const i64 Cg = C / G, Og = O / G, CgK = Cg * K;
    const i64 MB = (Og + MR - 1) / MR, Ppad = (P + NR - 1) / NR * NR;
    // weights: per group MB blocks of [CgK][MR], rows past Og zero
    std::vector<T> Ap((size_t)G * MB * CgK * MR, T(0));
    for (i64 gi = 0; gi < G; ++gi)
        for (i64 o = 0; o < Og; ++o)
            for (i64 k = 0; k < CgK; ++k)
                Ap[((gi * MB + o / MR) * CgK + k) * MR + o % MR] = w[(gi * Og + o) * CgK + k];
    const int nt = g[20] > 1 ? (int)g[20] : 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && N > 1)
    for (i64 n = 0; n < N; ++n) {
        T* Bp = scratch<T>(CgK * Ppad);
        for (i64 gi = 0; gi < G; ++gi) {
            im2col_panels<T, NR>(x + n * xs[0], g, xs, gi * Cg, (gi + 1) * Cg, Ppad, Bp);
            T* on = out + (n * O + gi * Og) * P;
            for (i64 mb = 0; mb < MB; ++mb) {
                const i64 mv = Og - mb * MR < MR ? Og - mb * MR : MR;
                for (i64 pb = 0; pb < Ppad / NR; ++pb) {
                    const i64 nv = P - pb * NR < NR ? P - pb * NR : NR;
                    micro<T, MR, NR>(Ap.data() + (gi * MB + mb) * CgK * MR, Bp + pb * CgK * NR, CgK,
                                 on + mb * MR * P + pb * NR, P, mv, nv);
                }
            }
        }
    }
}

// ---- image n, group gi of x into xp as a zero-padded channels-last copy [Dp][Hp][Wp][Cg] (the
// channels-last kernels' input; also the strided input gradient's copy of g, padded unevenly:
// pd, ph, pw are the low sides' padding, Dp, Hp, Wp the padded sizes). Only the padding is
// zeroed; the rest is transposed VL x VL tile by tile in registers, VL channels at a time
// across the whole image: VL source streams (sweeping all channels row by row, 32-128 streams
// at once, the strided input gradient's copy of g took 9% of its time; this way 5.6%)
template <class T>
static void nhwc_pad_copy(T* xp, const T* x, const i64* xs, i64 n, i64 gi, i64 Cg, i64 D, i64 H, i64 W,
                          i64 pd, i64 ph, i64 pw, i64 Hp, i64 Wp, i64 XS) {
    constexpr int VL = EMBER_VB / sizeof(T);
    const i64 Dp = XS / (Hp * Wp * Cg), RS = Wp * Cg;
    const T* xg = x + n * xs[0] + gi * Cg * xs[1];
    for (i64 dp = 0; dp < Dp; ++dp)
        for (i64 hp = 0; hp < Hp; ++hp) {
            T* row = xp + (dp * Hp + hp) * RS;
            const i64 d = dp - pd, h = hp - ph;
            if (d < 0 || d >= D || h < 0 || h >= H) { std::memset(row, 0, (size_t)RS * sizeof(T)); continue; }
            std::memset(row, 0, (size_t)(pw * Cg) * sizeof(T));
            std::memset(row + (pw + W) * Cg, 0, (size_t)((Wp - pw - W) * Cg) * sizeof(T));
        }
    // (a width stride of 2: a strided view, or the 1x1 strided convolutions' subsampled input)
    const i64 sw = xs[4], cf = sw == 1 || sw == 2 ? Cg / VL * VL : 0, wf = W / VL * VL;
    for (i64 c0 = 0; c0 < cf; c0 += VL)
        for (i64 d = 0; d < D; ++d)
            for (i64 h = 0; h < H; ++h) {
                T* row = xp + ((d + pd) * Hp + h + ph) * RS + pw * Cg + c0;
                const T* src = xg + c0 * xs[1] + d * xs[2] + h * xs[3];
                if (sw == 1)
                    for (i64 w0 = 0; w0 < wf; w0 += VL) transpose_tile<T, 1>(src + w0, xs[1], row + w0 * Cg, Cg);
                else
                    for (i64 w0 = 0; w0 < wf; w0 += VL) transpose_tile<T, 2>(src + 2 * w0, xs[1], row + w0 * Cg, Cg);
                for (i64 w = wf; w < W; ++w)
                    for (int i = 0; i < VL; ++i) row[w * Cg + i] = src[i * xs[1] + w * sw];
            }
    for (i64 c = cf; c < Cg; ++c)
        for (i64 d = 0; d < D; ++d)
            for (i64 h = 0; h < H; ++h) {
                T* row = xp + ((d + pd) * Hp + h + ph) * RS + pw * Cg + c;
                const T* src = xg + c * xs[1] + d * xs[2] + h * xs[3];
                for (i64 w = 0; w < W; ++w) row[w * Cg] = src[w * xs[4]];
            }
}

// g rows [o0, o0 + MB * MR) of one image and group as MR-row panels [mb][p][MR] (rows past Og
// zero): the weight gradient's broadcast operand, transposed tile by tile in registers
template <class T, int MR>
static void pack_g_panels(const T* __restrict gs, i64 Og, i64 P, i64 MB, T* __restrict gp) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T);
    static_assert(VL % MR == 0, "MR divides the vector length");
    const i64 of = Og / VL * VL, pf = P / VL * VL;
    for (i64 o0 = 0; o0 < of; o0 += VL) {
        for (i64 p0 = 0; p0 < pf; p0 += VL)
            transpose_rows<T>(gs + o0 * P + p0, P, [&](int j, const vec& v) {
                for (int q = 0; q < VL / MR; ++q)
                    __builtin_memcpy(gp + ((o0 / MR + q) * P + p0 + j) * MR, (const T*)&v + q * MR, MR * sizeof(T));
            });
        for (i64 o = o0; o < o0 + VL; ++o)
            for (i64 p = pf; p < P; ++p) gp[((o / MR) * P + p) * MR + o % MR] = gs[o * P + p];
    }
    for (i64 o = of; o < MB * MR; ++o)
        for (i64 p = 0; p < P; ++p) gp[((o / MR) * P + p) * MR + o % MR] = o < Og ? gs[o * P + p] : T(0);
}

// ---- the weight gradient's own kernel, for Cg a multiple of NR: per image the group's input is
// copied once, zero-padded and channels-last (NHWC); then for every kernel tap the NR channels
// of one output position's window are NR contiguous values, so the im2col is implicit (no
// column matrix at all) and the kernel reduces over the P output positions with MR x NR
// accumulators: dW[o, c, tap] += sum_p g[o, p] x_nhwc[pos(p, tap), c]. Each thread sums into
// its own [O][tap][Cg] buffer (an accumulator row is NR contiguous values: vector adds; stored
// into dW's [O][Cg][tap] order, NR values K apart, it was 256 scalar read-modify-writes a block,
// 12% of the time at 8x8); the first block a thread runs stores instead of adding (no zeroing),
// and the threads then add the buffers in thread order, transposing into dW, in parallel.
template <class T, int MR, int NR>
static void conv_wgrad_nhwc(const T* go, const i64* g, const T* x, const i64* xs, T* dw) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T), NV = NR / VL;
    const i64 N = g[0], C = g[1], D = g[2], H = g[3], W = g[4], KD = g[5], KH = g[6], KW = g[7];
    const i64 OD = g[8], OH = g[9], OW = g[10], sd = g[11], sh = g[12], sw = g[13];
    const i64 pd = g[14], ph = g[15], pw = g[16], dd = g[17], dh = g[18], dw_ = g[19], O = g[21], G = g[22];
    const i64 Cg = C / G, Og = O / G, K = KD * KH * KW, P = OD * OH * OW;
    const i64 Dp = D + 2 * pd, Hp = H + 2 * ph, Wp = W + 2 * pw, MB = (Og + MR - 1) / MR, CB = Cg / NR;
    const i64 WN = O * Cg * K, XS = Dp * Hp * Wp * Cg;
    const int nt = g[20] > 1 ? (int)g[20] : 1;
    // images per block: each accumulator block reduces over NB images' P positions before it is
    // stored. With small outputs (8x8: P = 64) one image's loop was too short for the MR x NR
    // accumulators' set-up and store: 150 GFLOP/s at ResNet's 128-channel 8x8 layer,
    // 270 with NB = 8 (1.6x; 16x16 layers 1.1-1.5x, stride 2 gaining most). NB brings the
    // reduction to ~1024 positions while the NB padded copies stay within half the 1 MB L2,
    // and leaves every thread a block
    const i64 GS = MB * P * MR;
    i64 NB = (1024 + P - 1) / P;
    if (NB > 8) NB = 8;
    while (NB > 1 && (size_t)NB * (XS + GS) * sizeof(T) > (512u << 10)) --NB;
    while (NB > 1 && (N + NB - 1) / NB < nt) --NB;
    if (NB < 1) NB = 1;
    const i64 NBLK = (N + NB - 1) / NB;
    std::vector<T*> parts((size_t)nt, nullptr);
    int team = 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && NBLK > 1)
    {
        if (omp_get_thread_num() == 0) team = omp_get_num_threads();
        T* accb = scratch<T, 1>(WN);              // this thread's sums, [G * Og][K][Cg]
        T* xp = scratch<T>(NB * (XS + GS));        // nb padded images, then their g panels
        T* gp = xp + NB * XS;
        bool first = true;
#pragma omp for schedule(static) nowait
        for (i64 bi = 0; bi < NBLK; ++bi) {
            const i64 n0 = bi * NB, nb = N - n0 < NB ? N - n0 : NB;
            for (i64 gi = 0; gi < G; ++gi) {
                for (i64 j = 0; j < nb; ++j) {
                    const i64 n = n0 + j;
                    nhwc_pad_copy(xp + j * XS, x, xs, n, gi, Cg, D, H, W, pd, ph, pw, Hp, Wp, XS);
                    pack_g_panels<T, MR>(go + (n * O + gi * Og) * P, Og, P, MB, gp + j * GS);
                }
                for (i64 mb = 0; mb < MB; ++mb) {
                    const i64 mv = Og - mb * MR < MR ? Og - mb * MR : MR;
                    for (i64 kd = 0; kd < KD; ++kd)
                    for (i64 kh = 0; kh < KH; ++kh)
                    for (i64 kw = 0; kw < KW; ++kw)
                    for (i64 cb = 0; cb < CB; ++cb) {
                        vec acc[MR][NV];
                        for (int i = 0; i < MR; ++i)
                            for (int j = 0; j < NV; ++j) acc[i][j] = vec{};
                        const i64 off = ((kd * dd * Hp + kh * dh) * Wp + kw * dw_) * Cg + cb * NR;
                        const i64 bstep = sw * Cg;
                        for (i64 j = 0; j < nb; ++j) {
                            const T* a = gp + j * GS + mb * P * MR;
                            const T* xj = xp + j * XS + off;
                            for (i64 od = 0; od < OD; ++od)
                                for (i64 oh = 0; oh < OH; ++oh) {
                                    const T* b = xj + ((od * sd) * Hp + oh * sh) * Wp * Cg;
                                    for (i64 ow = 0; ow < OW; ++ow, b += bstep, a += MR) {
                                        vec bv[NV];
                                        for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], b + v * VL, EMBER_VB);
#pragma GCC unroll 8
                                        for (int i = 0; i < MR; ++i)
                                            for (int v = 0; v < NV; ++v) acc[i][v] += a[i] * bv[v];
                                    }
                                }
                        }
                        const i64 tap = (kd * KH + kh) * KW + kw;
                        for (i64 i = 0; i < mv; ++i) {
                            T* row = accb + ((gi * Og + mb * MR + i) * K + tap) * Cg + cb * NR;
                            for (int v = 0; v < NV; ++v) {
                                vec r = acc[i][v];
                                if (!first) {
                                    vec o;
                                    __builtin_memcpy(&o, row + v * VL, EMBER_VB);
                                    r += o;
                                }
                                __builtin_memcpy(row + v * VL, &r, EMBER_VB);
                            }
                        }
                    }
                }
            }
            first = false;
        }
        parts[omp_get_thread_num()] = first ? nullptr : accb;     // (a thread without a block adds nothing)
#pragma omp barrier
#pragma omp for schedule(static) nowait
        for (i64 r = 0; r < O; ++r)
            for (i64 t = 0; t < K; ++t)
                for (i64 c = 0; c < Cg; ++c) {
                    T s = T(0);
                    for (int u = 0; u < team; ++u)
                        if (parts[u] != nullptr) s += parts[u][(r * K + t) * Cg + c];
                    dw[(r * Cg + c) * K + t] = s;
                }
    }
}

// out[gi][t][a][0..Bp) = w[gi * gs + a * as + b * bs + t] for b < B, zero past B: weights per
// group and kernel tap as rows the channels-last kernels stream NR-wide. Written in order, read
// with a stride, in parallel (the other way round every write of the inner loop went to another
// page: a 128x128x3x3 repack took ~0.6 ms, a third of the forward call)
template <class T>
static void repack_taps(const T* w, i64 G, i64 K, i64 A, i64 B, i64 Bp, i64 gs, i64 as, i64 bs, int nt,
                        std::vector<T>& out) {
    out.resize((size_t)(G * K * A * Bp));
#pragma omp parallel for collapse(2) schedule(static) num_threads(nt) if (nt > 1 && G * K * A * Bp > 65536)
    for (i64 gi = 0; gi < G; ++gi)
        for (i64 t = 0; t < K; ++t)
            for (i64 a = 0; a < A; ++a) {
                T* dst = out.data() + ((gi * K + t) * A + a) * Bp;
                const T* src = w + gi * gs + a * as + t;
                for (i64 b = 0; b < B; ++b) dst[b] = src[b * bs];
                for (i64 b = B; b < Bp; ++b) dst[b] = T(0);
            }
}

// acc[i][.] += sum over c < L of a[i * astep + c] * b[c * ldb .. + NR], for the MR (or mv < MR)
// output positions of a channels-last kernel: one reduction of the channels-last forward's taps
// and of the strided input gradient's
// (M: the rows computed, a compile-time count so that a row's FMAs unroll -- a block's last
// positions of a row, mv < MR, took the loop over a runtime count, with a branch per row)
template <class T, int MR, int NR, int M>
static inline void nhwc_rows(typename VT<T>::v (&acc)[MR][NR / (EMBER_VB / sizeof(T))], const T* a, i64 astep,
                             const T* b, i64 ldb, i64 L) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T), NV = NR / VL;
    for (i64 c = 0; c < L; ++c) {
        vec bv[NV];
        for (int j = 0; j < NV; ++j) __builtin_memcpy(&bv[j], b + c * ldb + j * VL, EMBER_VB);
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < NV; ++j) acc[i][j] += a[i * astep + c] * bv[j];
    }
}

template <class T, int MR, int NR>
static inline void nhwc_block(typename VT<T>::v (&acc)[MR][NR / (EMBER_VB / sizeof(T))], const T* a, i64 astep,
                              const T* b, i64 ldb, i64 L, i64 mv) {
    static_assert(MR <= 8, "nhwc_block's row counts");
    switch (mv) {
        case 1: nhwc_rows<T, MR, NR, 1>(acc, a, astep, b, ldb, L); break;
        case 2: nhwc_rows<T, MR, NR, (MR < 2 ? MR : 2)>(acc, a, astep, b, ldb, L); break;
        case 3: nhwc_rows<T, MR, NR, (MR < 3 ? MR : 3)>(acc, a, astep, b, ldb, L); break;
        case 4: nhwc_rows<T, MR, NR, (MR < 4 ? MR : 4)>(acc, a, astep, b, ldb, L); break;
        case 5: nhwc_rows<T, MR, NR, (MR < 5 ? MR : 5)>(acc, a, astep, b, ldb, L); break;
        case 6: nhwc_rows<T, MR, NR, (MR < 6 ? MR : 6)>(acc, a, astep, b, ldb, L); break;
        case 7: nhwc_rows<T, MR, NR, (MR < 7 ? MR : 7)>(acc, a, astep, b, ldb, L); break;
        default: nhwc_rows<T, MR, NR, MR>(acc, a, astep, b, ldb, L); break;
    }
}

// ---- the forward over a channels-last copy (used when the output channels per group fill the
// NR-wide vector block): acc[MR output positions][NR output channels] += x_nhwc[pos, c] *
// W[tap][c][o..o+NR]; every tap's window value is read in place (implicit im2col), the
// MR x NR block is stored transposed into the NCHW output.
template <class T, int MR, int NR>
static void conv_fwd_nhwc(const T* x, const i64* g, const i64* xs, const T* w, T* out) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T), NV = NR / VL;
    const i64 N = g[0], C = g[1], D = g[2], H = g[3], W = g[4], KD = g[5], KH = g[6], KW = g[7];
    const i64 OD = g[8], OH = g[9], OW = g[10], sd = g[11], sh = g[12], sw = g[13];
    const i64 pd = g[14], ph = g[15], pw = g[16], dd = g[17], dh = g[18], dw_ = g[19], O = g[21], G = g[22];
    const i64 Cg = C / G, Og = O / G, K = KD * KH * KW, P = OD * OH * OW;
    const i64 Dp = D + 2 * pd, Hp = H + 2 * ph, Wp = W + 2 * pw, OB = (Og + NR - 1) / NR, Op = OB * NR;
    const i64 XS = Dp * Hp * Wp * Cg;
    // weights per group as [tap][c][Op], output channels past Og zero
    const int nt = g[20] > 1 ? (int)g[20] : 1;
    std::vector<T> wt;
    repack_taps(w, G, K, Cg, Og, Op, Og * Cg * K, K, Cg * K, nt, wt);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && N > 1)
    for (i64 n = 0; n < N; ++n) {
        T* xp = scratch<T>(XS);
        for (i64 gi = 0; gi < G; ++gi) {
            nhwc_pad_copy(xp, x, xs, n, gi, Cg, D, H, W, pd, ph, pw, Hp, Wp, XS);
            const T* wg = wt.data() + gi * K * Cg * Op;
            T* on = out + (n * O + gi * Og) * P;
            const i64 xstep = sw * Cg;
            for (i64 od = 0; od < OD; ++od)
            for (i64 oh = 0; oh < OH; ++oh)
            for (i64 ow0 = 0; ow0 < OW; ow0 += MR) {
                const i64 mv = OW - ow0 < MR ? OW - ow0 : MR;
                const i64 p0 = (od * OH + oh) * OW + ow0;
                for (i64 ob = 0; ob < OB; ++ob) {
                    vec acc[MR][NV];
                    for (int i = 0; i < MR; ++i)
                        for (int j = 0; j < NV; ++j) acc[i][j] = vec{};
                    for (i64 kd = 0; kd < KD; ++kd)
                    for (i64 kh = 0; kh < KH; ++kh)
                    for (i64 kw = 0; kw < KW; ++kw) {
                        const i64 t = (kd * KH + kh) * KW + kw;
                        const T* xr = xp + (((od * sd + kd * dd) * Hp + oh * sh + kh * dh) * Wp + ow0 * sw + kw * dw_) * Cg;
                        nhwc_block<T, MR, NR>(acc, xr, xstep, wg + t * Cg * Op + ob * NR, Op, Cg, mv);
                    }
                    const i64 ov = Og - ob * NR < NR ? Og - ob * NR : NR;
                    store_block_t<T, MR, NR>(acc, on + (ob * NR) * P + p0, P, mv, ov);
                }
            }
        }
    }
}

// ---- the forward for unit width stride and output rows a multiple of NR: a panel is NR
// consecutive outputs of one row, so row k = (c, kd, kh, kw) of its column block is NR
// contiguous values of a zero-padded copy of the input -- the im2col is implicit, the kernel
// reads B through a per-k offset table.
// (ACC: C += the product instead of C = it -- the Winograd weight gradient's sums over tile blocks)
// (PF: C's tile prefetched first -- the convolution's output, not the Winograd products' scratch)
template <class T, int MR, int NR, bool ACC = false, bool PF = false>
static inline void micro_rows(const T* __restrict A, const T* __restrict B, const i64* __restrict koff, i64 K,
                              T* __restrict C, i64 ldc, i64 mv) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T), NV = NR / VL;
    vec acc[MR][NV];
    if constexpr (PF) prefetch_tile<T, NR>(C, ldc, mv);
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) acc[i][j] = vec{};
    for (i64 k = 0; k < K; ++k) {
        vec b[NV];
        const T* bk = B + koff[k];
        for (int j = 0; j < NV; ++j) __builtin_memcpy(&b[j], bk + j * VL, EMBER_VB);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            const T a = A[k * MR + i];
            for (int j = 0; j < NV; ++j) acc[i][j] += a * b[j];
        }
    }
    for (i64 i = 0; i < mv; ++i)
        for (int j = 0; j < NV; ++j) {
            if constexpr (ACC) {
                vec c;
                __builtin_memcpy(&c, C + i * ldc + j * VL, EMBER_VB);
                acc[i][j] += c;
            }
            __builtin_memcpy(C + i * ldc + j * VL, &acc[i][j], EMBER_VB);
        }
}

template <class T, int MR, int NR>
static void conv_fwd_rows(const T* x, const i64* g, const i64* xs, const T* w, T* out) {
    const i64 N = g[0], C = g[1], D = g[2], H = g[3], W = g[4], KD = g[5], KH = g[6], KW = g[7];
    const i64 OD = g[8], OH = g[9], OW = g[10], sd = g[11], sh = g[12];
    const i64 pd = g[14], ph = g[15], pw = g[16], dd = g[17], dh = g[18], dw_ = g[19], O = g[21], G = g[22];
    const i64 Cg = C / G, Og = O / G, K = KD * KH * KW, CgK = Cg * K, P = OD * OH * OW;
    const i64 Dp = D + 2 * pd, Hp = H + 2 * ph, Wp = W + 2 * pw, XS = Cg * Dp * Hp * Wp;
    const i64 MB = (Og + MR - 1) / MR;
    std::vector<T> Ap((size_t)G * MB * CgK * MR, T(0));
    for (i64 gi = 0; gi < G; ++gi)
        for (i64 o = 0; o < Og; ++o)
            for (i64 k = 0; k < CgK; ++k)
                Ap[((gi * MB + o / MR) * CgK + k) * MR + o % MR] = w[(gi * Og + o) * CgK + k];
    std::vector<i64> koff((size_t)CgK);
    for (i64 c = 0, r = 0; c < Cg; ++c)
        for (i64 kd = 0; kd < KD; ++kd)
            for (i64 kh = 0; kh < KH; ++kh)
                for (i64 kw = 0; kw < KW; ++kw, ++r)
                    koff[r] = ((c * Dp + kd * dd) * Hp + kh * dh) * Wp + kw * dw_;
    const int nt = g[20] > 1 ? (int)g[20] : 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && N > 1)
    for (i64 n = 0; n < N; ++n) {
        T* xp = scratch<T>(XS + NR);
        for (i64 gi = 0; gi < G; ++gi) {
            for (i64 i = 0; i < XS + NR; ++i) xp[i] = T(0);
            for (i64 c = 0; c < Cg; ++c) {
                const T* xc = x + n * xs[0] + (gi * Cg + c) * xs[1];
                for (i64 d = 0; d < D; ++d)
                    for (i64 h = 0; h < H; ++h) {
                        T* dst = xp + ((c * Dp + d + pd) * Hp + h + ph) * Wp + pw;
                        const T* src = xc + d * xs[2] + h * xs[3];
                        if (xs[4] == 1) { for (i64 ww = 0; ww < W; ++ww) dst[ww] = src[ww]; }
                        else { for (i64 ww = 0; ww < W; ++ww) dst[ww] = src[ww * xs[4]]; }
                    }
            }
            T* on = out + (n * O + gi * Og) * P;
            for (i64 od = 0; od < OD; ++od)
            for (i64 oh = 0; oh < OH; ++oh)
            for (i64 ow0 = 0; ow0 < OW; ow0 += NR) {
                const T* base = xp + (od * sd * Hp + oh * sh) * Wp + ow0;
                const i64 p0 = (od * OH + oh) * OW + ow0;
                for (i64 mb = 0; mb < MB; ++mb) {
                    const i64 mv = Og - mb * MR < MR ? Og - mb * MR : MR;
                    micro_rows<T, MR, NR, false, true>(Ap.data() + (gi * MB + mb) * CgK * MR, base, koff.data(), CgK,
                                          on + mb * MR * P + p0, P, mv);
                }
            }
        }
    }
}

// dst[c * ds + j * s + r] = src[r * ps + c * ls + j] for c < R, j * s + r < L: the s phases of a
// row interleaved (each phase's values stored contiguously), channel by channel; src readable
// VL - 1 values past its end
template <class T>
static void interleave_rows(const T* __restrict src, i64 ps, i64 ls, i64 s, T* __restrict dst, i64 ds, i64 R, i64 L) {
    typedef typename VT<T>::v vec;
    typedef typename IVT<T>::v ivec;
    constexpr int VL = EMBER_VB / sizeof(T);
    for (i64 c = 0; c < R; ++c) {
        T* d = dst + c * ds;
        const T* a = src + c * ls;
        i64 j = 0;
        if (s == 1) {
            for (; j < L; ++j) d[j] = a[j];
            continue;
        }
        if (s == 2) {
            constexpr ivec zlo = tmask_zip<ivec, VL, 0>(std::make_integer_sequence<int, VL>{});
            constexpr ivec zhi = tmask_zip<ivec, VL, VL / 2>(std::make_integer_sequence<int, VL>{});
            const T* b = a + ps;
            for (; 2 * j + 2 * VL <= L; j += VL) {
                vec u, v;
                __builtin_memcpy(&u, a + j, EMBER_VB);
                __builtin_memcpy(&v, b + j, EMBER_VB);
                const vec lo = __builtin_shuffle(u, v, zlo), hi = __builtin_shuffle(u, v, zhi);
                __builtin_memcpy(d + 2 * j, &lo, EMBER_VB);
                __builtin_memcpy(d + 2 * j + VL, &hi, EMBER_VB);
            }
            // half a vector from each phase (rows of 8..31 values): the loads read up to VL - 1
            // values past the row, within the tile (the caller leaves VL values of slack)
            for (; 2 * j + VL <= L; j += VL / 2) {
                vec u, v;
                __builtin_memcpy(&u, a + j, EMBER_VB);
                __builtin_memcpy(&v, b + j, EMBER_VB);
                const vec lo = __builtin_shuffle(u, v, zlo);
                __builtin_memcpy(d + 2 * j, &lo, EMBER_VB);
            }
            for (; 2 * j + 1 < L; ++j) { d[2 * j] = a[j]; d[2 * j + 1] = b[j]; }
            if (2 * j < L) d[2 * j] = a[j];
            continue;
        }
        for (i64 r = 0; r < s && r < L; ++r)
            for (i64 q = 0; q * s + r < L; ++q) d[q * s + r] = a[r * ps + q];
    }
}

// ---- the strided input gradient over a channels-last copy of the output gradient: dx
// positions of one phase (id, ih, iw congruent to rd, rh, rw modulo the stride) receive the
// taps with kd*dd = rd + pd modulo sd (and so on), each from the g position i + off of the phase
// grid i; MR consecutive positions of a phase row read MR consecutive g positions, so this is
// the channels-last forward over a zero-padded g with a per-phase tap list (no column matrix,
// no col2im scatter). Why: at the ResNet's stride-2 3x3 layers the BLAS + col2im path took
// 1.8-2.1 ms against PyTorch's 0.96-1.33.
static inline i64 floordiv_(i64 a, i64 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

template <class T, int MR, int NR>
static void conv_igrad_nhwc(const T* go, const i64* g, const T* w, T* dx) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T), NV = NR / VL;
    const i64 N = g[0], C = g[1], D = g[2], H = g[3], W = g[4], KD = g[5], KH = g[6], KW = g[7];
    const i64 OD = g[8], OH = g[9], OW = g[10], sd = g[11], sh = g[12], sw = g[13];
    const i64 pd = g[14], ph = g[15], pw = g[16], dd = g[17], dh = g[18], dw_ = g[19], O = g[21], G = g[22];
    const i64 Cg = C / G, Og = O / G, K = KD * KH * KW, S = D * H * W;
    const i64 CB = (Cg + NR - 1) / NR, Cp = CB * NR;
    // the g grid's zero padding: phase offsets run over [floor((p - (k-1)d)/s), floor((s-1+p)/s)],
    // phase rows over [0, (L-1)/s]
    i64 lo[3], hi[3];
    const i64 Ls[3] = {D, H, W}, Os[3] = {OD, OH, OW}, Ks[3] = {KD, KH, KW};
    const i64 Ss[3] = {sd, sh, sw}, Ps[3] = {pd, ph, pw}, Ds[3] = {dd, dh, dw_};
    for (int a = 0; a < 3; ++a) {
        const i64 omin = floordiv_(Ps[a] - (Ks[a] - 1) * Ds[a], Ss[a]), omax = floordiv_(Ss[a] - 1 + Ps[a], Ss[a]);
        lo[a] = omin < 0 ? -omin : 0;
        const i64 top = (Ls[a] - 1) / Ss[a] + omax - (Os[a] - 1);
        hi[a] = top > 0 ? top : 0;
    }
    const i64 ODp = OD + lo[0] + hi[0], OHp = OH + lo[1] + hi[1], OWp = OW + lo[2] + hi[2];
    const i64 GS = ODp * OHp * OWp * Og, nWm = (W + sw - 1) / sw;
    const i64 gst[5] = {O * OD * OH * OW, OD * OH * OW, OH * OW, OW, 1};
    // weights per group as [tap][o][Cp], channels past Cg zero
    const int nt = g[20] > 1 ? (int)g[20] : 1;
    std::vector<T> wt;
    repack_taps(w, G, K, Og, Cg, Cp, Og * Cg * K, Cg * K, K, nt, wt);
    // every phase's taps: their g offsets (elements of the padded channels-last g, from the
    // phase grid's position) and weight offsets (within a group)
    std::vector<std::vector<i64>> taps_off((size_t)(sd * sh * sw)), taps_w((size_t)(sd * sh * sw));
    for (i64 rd = 0; rd < sd; ++rd)
    for (i64 rh = 0; rh < sh; ++rh)
    for (i64 rw = 0; rw < sw; ++rw) {
        const i64 ph_ = (rd * sh + rh) * sw + rw;
        for (i64 kd = 0; kd < KD; ++kd) {
            const i64 qd = rd + pd - kd * dd;
            if (floordiv_(qd, sd) * sd != qd) continue;
            for (i64 kh = 0; kh < KH; ++kh) {
                const i64 qh = rh + ph - kh * dh;
                if (floordiv_(qh, sh) * sh != qh) continue;
                for (i64 kw = 0; kw < KW; ++kw) {
                    const i64 qw = rw + pw - kw * dw_;
                    if (floordiv_(qw, sw) * sw != qw) continue;
                    taps_off[ph_].push_back((((floordiv_(qd, sd) + lo[0]) * OHp + floordiv_(qh, sh) + lo[1]) * OWp
                                             + floordiv_(qw, sw) + lo[2]) * Og);
                    taps_w[ph_].push_back(((kd * KH + kh) * KW + kw) * Og * Cp);
                }
            }
        }
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && N > 1)
    for (i64 n = 0; n < N; ++n) {
        T* gp = scratch<T>(GS + sw * Cp * nWm + EMBER_VB / sizeof(T));
        T* tile = gp + GS;
        for (i64 gi = 0; gi < G; ++gi) {
            nhwc_pad_copy(gp, go, gst, n, gi, Og, OD, OH, OW, lo[0], lo[1], lo[2], OHp, OWp, GS);
            T* xn = dx + (n * C + gi * Cg) * S;
            // one dx row (id, ih) at a time: its sw phases are computed into a [sw][Cp][nWm] tile
            // (a phase's positions contiguous: the blocks are stored through register transposes),
            // then interleaved into dx channel by channel (storing straight into dx, the channels'
            // stores lay 4 KB apart at 32x32 and fought over the same L1 sets: 1.8x slower)
            for (i64 id = 0; id < D; ++id)
            for (i64 ih = 0; ih < H; ++ih) {
                const i64 rd = id % sd, jd = id / sd, rh = ih % sh, jh = ih / sh;
                for (i64 rw = 0; rw < sw && rw < W; ++rw) {
                    const std::vector<i64>& toff = taps_off[(rd * sh + rh) * sw + rw];
                    const std::vector<i64>& tw = taps_w[(rd * sh + rh) * sw + rw];
                    const i64 nT = (i64)toff.size(), nW = (W - rw + sw - 1) / sw;
                    for (i64 jw0 = 0; jw0 < nW; jw0 += MR) {
                        const i64 mv = nW - jw0 < MR ? nW - jw0 : MR;
                        const i64 gbase = ((jd * OHp) + jh) * OWp * Og + jw0 * Og;
                        for (i64 cb = 0; cb < CB; ++cb) {
                            vec acc[MR][NV];
                            for (int i = 0; i < MR; ++i)
                                for (int j = 0; j < NV; ++j) acc[i][j] = vec{};
                            for (i64 t = 0; t < nT; ++t) {
                                const T* gr = gp + gbase + toff[t];
                                nhwc_block<T, MR, NR>(acc, gr, Og, wt.data() + gi * K * Og * Cp + tw[t] + cb * NR, Cp, Og, mv);
                            }
                            store_block_t<T, MR, NR>(acc, tile + (rw * Cp + cb * NR) * nWm + jw0, nWm, mv, NR);
                        }
                    }
                }
                interleave_rows(tile, Cp * nWm, nWm, sw, xn + (id * H + ih) * W, S, Cg, W);
            }
        }
    }
}

// the strided input gradient's kernel: a stride above 1, a kernel larger than 1x1 (a strided 1x1
// is one gemm and an expand, conv_igrad; here its empty phases cost time too: 1.4x slower at the
// ResNet's shortcut), input channels per group filling half the vector block
static bool use_nhwc_igrad(const i64* g, i64 NR) {
    const i64 Cg = g[1] / g[22], K = g[5] * g[6] * g[7];
    const bool strided = g[11] > 1 || g[12] > 1 || g[13] > 1;
    return strided && K > 1 && 2 * Cg >= NR;
}

// Which forward kernel (g[23]: 1 panels, 2 channels-last, 3 rows, 0 by shape). Measured single-threaded
// at the ResNet shapes: channels-last wins from 64 input channels per group (1.4-2x) and on
// strided convolutions (the panel im2col gathers with a stride), loses with few channels (the
// per-tap channel loop is short: 3 channels 8x slower, 32 channels at stride 1 1.2x) and on
// 1x1 (strided ones arrive as a subsampled view: 1.2x slower at 32 channels, even at 64); it
// needs output channels per group filling at least half the NR-wide vector block.
static bool use_nhwc_fwd(const i64* g, i64 NR) {
    if (g[23] != 0) return g[23] == 2;
    const i64 Cg = g[1] / g[22], Og = g[21] / g[22], K = g[5] * g[6] * g[7];
    const bool strided = g[11] > 1 || g[12] > 1 || g[13] > 1;
    return K > 1 && 2 * Og >= NR && (Cg >= 2 * NR || (Cg >= NR && strided));
}

// Whether a channels-last kernel (the forward, the strided input gradient) takes
// EMBER_MRN_F-position blocks rather than MR ones (they differ with 32-byte vectors: 6 and 8),
// given its reduction length L (channels) and the positions in a row. The shorter block spills
// no accumulator, but a row then takes more blocks, and each block streams the tap's weight
// panel (L x NR) again: with long reductions that traffic wins. Measured on the AVX2 EPYC (2
// threads, batch 32, ms with 6 vs 8): forwards 32->32 at 32x32 4.0 vs 5.8, 64->64 at 24x24
// 8.1 vs 12.3, 128->128 at 12x12 (two blocks a row either way) 12.5 vs 12.9, but 128->128 at
// 8x8 7.3 vs 6.0, 256->256 at 8x8 36 vs 22, 128->256 stride 2 16.7 vs 11.2; strided input
// gradients 64->32 at 32x32 2.3 vs 3.1, but 256->128 at 16x16 13.9 vs 12.0.
static bool short_blocks(i64 L, i64 row, i64 mr_short, i64 mr) {
    return L <= 64 || (row + mr_short - 1) / mr_short == (row + mr - 1) / mr;
}

// Otherwise the row kernel when a panel is a piece of one output row (unit width stride, OW a
// multiple of NR): it skips the im2col pass the panel kernel makes (1.3-1.5x at 32x32).
static bool use_rows_fwd(const i64* g, i64 NR) {
    if (g[23] != 0) return g[23] == 3 && g[13] == 1 && g[10] % NR == 0;
    return g[13] == 1 && g[10] % NR == 0;
}

// A 1x1 convolution without padding reads x only at the output positions times the stride: it is
// the stride-1 convolution of the subsampled view (strides times the stride, the output's sizes),
// which every kernel then reads in place (no col2im / panel gather with a stride)
static bool subsample_1x1(const i64* g, const i64* xs, i64* g2, i64* xs2) {
    if (g[5] * g[6] * g[7] != 1 || g[14] != 0 || g[15] != 0 || g[16] != 0) return false;
    if (g[11] == 1 && g[12] == 1 && g[13] == 1) return false;
    for (int i = 0; i < 24; ++i) g2[i] = g[i];
    for (int i = 0; i < 3; ++i) { g2[2 + i] = g[8 + i]; g2[11 + i] = 1; g2[17 + i] = 1; }
    xs2[0] = xs[0]; xs2[1] = xs[1];
    for (int i = 0; i < 3; ++i) xs2[2 + i] = xs[2 + i] * g[11 + i];
    return true;
}


// (a subsampled 1x1 keeps the panel kernel, whose gather compacts stride-2 rows with vector
// permutes; the row kernel's padded copy would read them element by element)
template <class T, int MR, int NR>
static void fwd_dispatch(const T* x, const i64* g, const i64* xs, const T* w, T* out) {
    i64 g2[24], xs2[5];
    const bool sub = subsample_1x1(g, xs, g2, xs2);
    if (sub) { g = g2; xs = xs2; }
    if (use_nhwc_fwd(g, NR)) {
        if constexpr (sizeof(T) == 4 && EMBER_MRN_F != MR) {
            if (short_blocks(g[1] / g[22], g[10], EMBER_MRN_F, MR)) conv_fwd_nhwc<T, EMBER_MRN_F, NR>(x, g, xs, w, out);
            else conv_fwd_nhwc<T, MR, NR>(x, g, xs, w, out);
        } else {
            conv_fwd_nhwc<T, MR, NR>(x, g, xs, w, out);
        }
    }
    else if ((!sub || g[23] == 3) && use_rows_fwd(g, NR))
        EMBER_BY_OUT_CHANNELS(g[21] / g[22], conv_fwd_rows, T, MR, NR, x, g, xs, w, out);
    else conv_fwd<T, MR, NR>(x, g, xs, w, out);
}

template <class T, int MR, int NR>
static void igrad_dispatch(const T* go, const i64* g, const T* w, T* dx, void* gm, void* sl) {
    if (use_nhwc_igrad(g, NR)) {
        // (its blocks are positions of one stride phase of a dx row, its reduction the output channels)
        if constexpr (sizeof(T) == 4 && EMBER_MRN_F != MR) {
            if (short_blocks(g[21] / g[22], (g[4] + g[13] - 1) / g[13], EMBER_MRN_F, MR))
                conv_igrad_nhwc<T, EMBER_MRN_F, NR>(go, g, w, dx);
            else conv_igrad_nhwc<T, MR, NR>(go, g, w, dx);
        } else {
            conv_igrad_nhwc<T, MR, NR>(go, g, w, dx);
        }
    }
    else conv_igrad<T>(go, g, w, dx, gm, sl);
}

// The weight gradient's own kernel whenever the channels per group are a multiple of NR: 1.1-2x
// OpenBLAS at the ResNet's 3x3 layers, and at 1x1 too, on the subsampled view (stride 2, single
// thread: 1.15-1.2x; stride 1 1.1-1.2x, though BLAS reads a contiguous x in place)
template <class T, int MR, int NR>
static void wgrad_dispatch(const T* go, const i64* g, const T* x, const i64* xs, T* dw, void* gm, void* sl) {
    i64 g2[24], xs2[5];
    if (subsample_1x1(g, xs, g2, xs2)) { g = g2; xs = xs2; }
    if ((g[1] / g[22]) % NR == 0) conv_wgrad_nhwc<T, MR, NR>(go, g, x, xs, dw);
    else conv_wgrad<T>(go, g, x, xs, dw, gm, sl);
}

extern "C" {
// the kernels' column block NR (the weight gradient's own kernel needs channels per group a multiple of it)
int ember_conv_nr(int f64) { return f64 ? EMBER_NR_D : EMBER_NR_F; }
void ember_conv_fwd_f32(const float* x, const i64* g, const i64* xs, const float* w, float* out)
{ fwd_dispatch<float, EMBER_MR_F, EMBER_NR_F>(x, g, xs, w, out); }
void ember_conv_fwd_f64(const double* x, const i64* g, const i64* xs, const double* w, double* out)
{ fwd_dispatch<double, EMBER_MR_D, EMBER_NR_D>(x, g, xs, w, out); }
void ember_conv_igrad_f32(const float* go, const i64* g, const float* w, float* dx, void* gm, void* sl)
{ igrad_dispatch<float, EMBER_MR_F, EMBER_NR_F>(go, g, w, dx, gm, sl); }
void ember_conv_igrad_f64(const double* go, const i64* g, const double* w, double* dx, void* gm, void* sl)
{ igrad_dispatch<double, EMBER_MR_D, EMBER_NR_D>(go, g, w, dx, gm, sl); }
void ember_conv_wgrad_f32(const float* go, const i64* g, const float* x, const i64* xs, float* dw, void* gm, void* sl)
{ wgrad_dispatch<float, EMBER_MR_F, EMBER_NR_F>(go, g, x, xs, dw, gm, sl); }
void ember_conv_wgrad_f64(const double* go, const i64* g, const double* x, const i64* xs, double* dw, void* gm, void* sl)
{ wgrad_dispatch<double, EMBER_MR_D, EMBER_NR_D>(go, g, x, xs, dw, gm, sl); }
}
""" + _conv_winograd.SOURCE

FORWARD_KERNEL = 0      # 0: by shape (use_nhwc_fwd, use_rows_fwd); 1 panels, 2 channels-last, 3 rows (tests)
_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
# numpy's OpenBLAS (scipy-openblas wheels: 64-bit integers, symbols suffixed 64_)
_GEMM_NAMES = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"), ("cblas_sgemm64_", "cblas_dgemm64_"))
_SETLOCAL_NAMES = ("openblas_set_num_threads_local", "scipy_openblas_set_num_threads_local64_")


def _numpy_openblas():
    """(sgemm, dgemm, set_num_threads_local) addresses in the OpenBLAS numpy is linked with, found
    among the loaded libraries (Linux /proc/self/maps); None when it is not an ILP64 OpenBLAS."""
    np.ones((2, 2)) @ np.ones((2, 2))          # numpy loads its BLAS lazily on some builds
    from .._blas_threads import openblas_handles
    for path, L in openblas_handles():
        for sname, dname in _GEMM_NAMES:
            if hasattr(L, sname) and hasattr(L, dname):
                setl = next((getattr(L, n) for n in _SETLOCAL_NAMES if hasattr(L, n)), None)
                addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
                return addr(getattr(L, sname)), addr(getattr(L, dname)), (addr(setl) if setl else None)
    return None


def _build():
    blas = _numpy_openblas()
    if blas is None:
        raise RuntimeError("numpy's BLAS is not an OpenBLAS with 64-bit integers")
    from ..inductor import codecache
    L = codecache.load(_SOURCE)
    P = ctypes.c_void_p
    for sfx in ("f32", "f64"):
        getattr(L, f"ember_conv_fwd_{sfx}").argtypes = [P] * 5
        getattr(L, f"ember_conv_igrad_{sfx}").argtypes = [P] * 6
        getattr(L, f"ember_conv_wgrad_{sfx}").argtypes = [P] * 7
        for k in ("fwd", "igrad", "wgrad"):
            getattr(L, f"ember_conv_{k}_{sfx}").restype = None
    L.ember_conv_fwd_winograd_f32.argtypes = [P] * 5
    L.ember_conv_fwd_winograd_f32.restype = None
    L.ember_conv_wgrad_winograd_f32.argtypes = [P] * 4
    L.ember_conv_wgrad_winograd_f32.restype = None
    L.ember_conv_nr.argtypes = [ctypes.c_int]
    L.ember_conv_nr.restype = ctypes.c_int
    global _NR
    _NR = {np.dtype(np.float32): L.ember_conv_nr(0), np.dtype(np.float64): L.ember_conv_nr(1)}
    return (L,) + blas


# the kernels' column block per dtype (two vectors of the host's width: 32/16 floats/doubles with
# AVX-512, 16/8 without), read from the library when it is built
_NR = {}


# (library, sgemm, dgemm, set_num_threads_local), or None when the native path cannot run (no
# C++ compiler, numpy not on an ILP64 OpenBLAS); the reason is logged once
lib = LazyLibrary(_build, "native convolution (convolutions use numpy)", log).get


def supported(*arrays) -> bool:
    """Whether the native path handles these arrays (numpy float32/float64, one dtype)."""
    dt = arrays[0].dtype
    return all(type(a) is np.ndarray and a.dtype == dt for a in arrays) and dt in _DTYPES and lib() is not None


def threads() -> int:
    """Images are spread over this many OpenMP threads (``_openmp.num_threads``)."""
    from .._openmp import num_threads
    return num_threads()


def _geometry(N, C, sp, k, out, stride, padding, dilation, O, groups, nthreads=None):
    # one list display, no per-value int() (numpy converts): a few us of a small convolution
    one, zero = (1,) * (3 - len(k)), (0,) * (3 - len(k))
    return np.array([N, C, *one, *sp, *one, *k, *one, *out, *one, *stride, *zero, *padding, *one, *dilation,
                     threads() if nthreads is None else nthreads, O, groups, FORWARD_KERNEL], dtype=np.int64)


def _xstrides(x):
    st = [s // x.itemsize for s in x.strides]
    return np.array(st[:2] + [0] * (5 - len(st)) + st[2:], dtype=np.int64)


def _call(kind, dtype, *args):
    L, sgemm, dgemm, setl = lib()
    f64 = dtype == np.float64
    fn = getattr(L, f"ember_conv_{kind}_{'f64' if f64 else 'f32'}")
    if kind == "fwd":      # the forward has its own kernel
        fn(*args)
    else:
        fn(*args, dgemm if f64 else sgemm, setl)


# multiply-adds below which a call runs on the calling thread: waking the OpenMP team costs
# ~5 us on an idle machine and milliseconds on a loaded one (2x3x8x8 training step: 6 ms with two
# threads, 0.45 ms with one), more than such a convolution's whole work (~20 us at 1M). The
# forward and input gradient compute every image on its own (the same values on any thread
# count); the weight gradient's sums depend on it (see weight_grad).
_SERIAL_MACS = 1 << 20


def _nt(N, C, O, P, k, groups):
    """Threads for one call: 1 for a small convolution (``_SERIAL_MACS``), else :func:`threads`."""
    if N <= 1:
        return 1
    macs = N * O * P * (C // groups)
    for v in k:
        macs *= v
    return 1 if macs < _SERIAL_MACS else threads()


def _numel(shape):
    n = 1
    for v in shape:
        n *= v
    return n


def forward(x, w, stride, padding, dilation, groups, out, winograd=False):
    """out (N, O, *o, contiguous) <- x (N, C, *s, any strides) correlated with w (contiguous).
    ``winograd``: use ``_conv_winograd``'s kernel where it applies (the inductor's choice)."""
    N, C = x.shape[0], x.shape[1]
    # the forward kernels spread images over threads only (N > 1): one image or a small
    # convolution needs no thread count (looking it up -- config, environment -- is ~2 us of a
    # ~10 us small convolution)
    o = out.shape[2:]
    geo = _geometry(N, C, x.shape[2:], w.shape[2:], o, stride, padding, dilation,
                    w.shape[0], groups, _nt(N, C, w.shape[0], _numel(o), w.shape[2:], groups))
    if winograd and _conv_winograd.applies(x.shape, w.shape, stride, padding, dilation, groups, x.dtype):
        lib()[0].ember_conv_fwd_winograd_f32(x.ctypes.data, geo.ctypes.data, _xstrides(x).ctypes.data,
                                             w.ctypes.data, out.ctypes.data)
        return
    _call("fwd", x.dtype, x.ctypes.data, geo.ctypes.data, _xstrides(x).ctypes.data, w.ctypes.data,
          out.ctypes.data)


def input_grad(g, w, stride, padding, dilation, groups, dx):
    """dx (N, C, *s, contiguous) <- the adjoint of :func:`forward` applied to g (contiguous)."""
    N, C = dx.shape[0], dx.shape[1]
    o = g.shape[2:]
    geo = _geometry(N, C, dx.shape[2:], w.shape[2:], o, stride, padding, dilation,
                    w.shape[0], groups, _nt(N, C, w.shape[0], _numel(o), w.shape[2:], groups))
    _call("igrad", g.dtype, g.ctypes.data, geo.ctypes.data, w.ctypes.data, dx.ctypes.data)


def weight_grad(g, x, stride, padding, dilation, groups, dw, winograd=False):
    """dw (O, Cg, *k, contiguous) <- sum over images of g_n (contiguous) times x_n's windows.
    ``winograd``: use ``_conv_winograd``'s weight-gradient kernel where it applies (the inductor's
    choice; its sums depend on the thread count, as the direct kernels' do)."""
    N, C = x.shape[0], x.shape[1]
    o = g.shape[2:]
    if winograd and _conv_winograd.applies(x.shape, dw.shape, stride, padding, dilation, groups, x.dtype):
        geo = _geometry(N, C, x.shape[2:], dw.shape[2:], o, stride, padding, dilation, dw.shape[0], groups,
                        _nt(N, C, dw.shape[0], _numel(o), dw.shape[2:], groups))
        x = np.ascontiguousarray(x)         # (the kernel copies rows of it channels-last)
        lib()[0].ember_conv_wgrad_winograd_f32(g.ctypes.data, geo.ctypes.data, x.ctypes.data, dw.ctypes.data)
        return
    # The sums depend on the thread count: the channels-last kernel (channels per group a
    # multiple of its vector block NR) blocks images by it, the general one sums each thread's
    # images (one gemm each, accumulating) and then the threads' sums. Only where every thread
    # has at most one image and one gemm adds its product in one step (P within one of
    # OpenBLAS's K blocks) are the serial sums the same values: only there a small one is serial.
    nt = threads()
    P = _numel(o)
    if 1 < N <= nt and P <= 128 and (C // groups) % _NR[x.dtype] != 0:
        nt = _nt(N, C, dw.shape[0], P, dw.shape[2:], groups)
    geo = _geometry(N, C, x.shape[2:], dw.shape[2:], o, stride, padding, dilation, dw.shape[0], groups, nt)
    _call("wgrad", g.dtype, g.ctypes.data, geo.ctypes.data, x.ctypes.data, _xstrides(x).ctypes.data,
          dw.ctypes.data)
