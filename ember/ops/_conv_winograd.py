"""Winograd F(2x2, 3x3) for the compiled graphs' 3x3 stride-1 float32 convolutions.

Why. On a CPU at its multiply-add peak a direct convolution cannot go faster; Winograd's
minimal filtering computes each 2x2 block of outputs from a 4x4 input tile with 16 products a
channel pair instead of 36, so the products -- 16 independent matrix products
``M[xi] (O, T) = U[xi] (O, C) @ V[xi] (C, T)`` over the T tiles -- take 2.25x fewer multiply-adds
than the direct kernels, and the three transforms between them are additions over the data
(Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):

    U = G g G^T (the 3x3 filter, once a call)      G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    V = B^T d B (each 4x4 input tile d)           B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    Y = A^T (U . V) A (the 2x2 output block)       A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

Numerics. Each output is 16 shorter sums (over C channels, not 9 C taps) joined by the transforms'
additions of at most four terms. Measured against a float64 reference on random data, the
error is 2-4e-7 of the output's scale at the ResNet's shapes, no larger than the direct
float32 kernels' 3-11e-7 (tests/ops/test_conv_winograd.py bounds it by 5e-6). It is still a
different rounding from eager's, so eager keeps the direct kernels (the values compiled graphs
are checked against, as torch's are) and only the inductor uses this, behind
``ember.inductor.config.conv_winograd`` (``EMBER_CONV_WINOGRAD=0`` turns it off): a compiler
choosing an algorithm, as cuDNN's autotuner does for torch on GPUs. float64 keeps the direct
kernels.

Speed (two threads, this Zen 4 VM, medians interleaved with the direct kernel, forward at
batch 32): 32 -> 32 channels at 32x32 1.3-1.5x, 64 at 16x16 and 128 at 8x8 1.45-1.6x; the
products run at the cores' peak and the transforms take ~25% of the time. Below 16 channels it
loses (3 -> 32: 0.62x, 8 -> 8: 0.80x; 16 -> 16 is even). The ResNet benchmark's compiled step:
inference 20.5 -> 13.5 ms, training 61.6 -> 52.7 ms.

The weight gradient. With M = U . V summed over channels, dL/dU[xi] (O, C) = sum over the tiles
of Dh[xi] (O, T) V[xi] (C, T)^T, Dh = A dY_t A^T (each 2x2 block of the output gradient expanded
to 4x4), and dW = G^T dU G: 16 products whose inner dimension is the tiles. ``micro_rows`` wants
its operands tile-major (NR channels of one tile contiguous), so a first version -- the
forward's row transforms, then register transposes of the transformed planes -- spent ~45% of
its time in transforms and transposes (1.0-1.15x). This one copies each block's input and
output-gradient rows channels-last (register transposes of the raw rows: a quarter of the
transformed values), then transforms a vector of channels of one tile at a time, writing the
products' layouts directly (V as B rows, Dh as MR-row A panels). Each thread sums its blocks
into its own dU; the team's sums are added in double at the end. Against the direct weight
gradient (two threads, interleaved medians, several runs on the noisy VM): 32 -> 32 channels at
32x32 1.3-1.55x, 64 at 16x16 1.65-1.9x, 128 at 8x8 1.6-2.0x, 32 -> 64 at 16x16 1.4-1.6x,
16 -> 16 at 32x32 2.5-2.6x (the direct kernels' channels-last path needs channels in multiples
of 32); the ResNet benchmark's compiled training step 1.08-1.10x.

Where it applies (:func:`applies`): 2-d, 3x3, stride 1, dilation 1, one group, even output
height and width (whole 2x2 blocks), and at least ``MIN_CHANNELS`` input and output channels
(with fewer, the 16 small products cost more than they save: the ResNet stem's 3 channels).
The input gradient of such a convolution is one too (a stride-1 correlation of the output
gradient with the flipped filter, ``nn_ops._conv_input_grad_native``), so it takes the same path;
its weight gradient takes the kernel above under the same rule.

Layout. Tiles are numbered over (image, tile row, tile column) and processed in blocks of whole
tile rows, sized so that a block's V (16 x C x TB) and M (16 x O x TB) stay in the core's L2
cache; blocks are spread over OpenMP threads. Per image and channel the input rows are split
into even and odd columns (``E``/``Od``, zero padded), so a tile's four columns are two
unaligned vector loads at tx and tx + 1 and a vector of L consecutive tiles (L = 16, 8 or 4 by
the tile row's length) transforms at once.
The products use the direct kernels' register-blocked ``micro_rows`` (MR x NR accumulators)
over V's rows; the output transform writes each 2x2 block back, interleaving the two columns
with a vector permute when a tile row holds a whole number of vectors.
"""

# Below this many input or output channels the direct kernels stay (see Speed above)
MIN_CHANNELS = 16

SOURCE = r"""
#ifndef WINO_BLOCK_BYTES
#define WINO_BLOCK_BYTES (512 * 1024)
#endif
// ---------------- Winograd F(2x2, 3x3), float32 (see ember/ops/_conv_winograd.py) ----------------
// U[xi * PS + (o / MR * C + c) * MR + o % MR] = (G g_oc G^T)[xi]: the products' A panels (MR output
// channels a k, zero past O)
template <class T, int MR>
static void wino_filter(const T* __restrict w, i64 O, i64 C, i64 MB, i64 PS, T* __restrict U, int nt) {
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && MB > 1)
    for (i64 mb = 0; mb < MB; ++mb)
        for (i64 c = 0; c < C; ++c)
            for (i64 oi = 0; oi < MR; ++oi) {
                const i64 o = mb * MR + oi;
                T u[4][4] = {};
                if (o < O) {
                    const T* g = w + (o * C + c) * 9;
                    T t[4][3];
                    for (int j = 0; j < 3; ++j) {
                        const T a = g[j], b = g[3 + j], d = g[6 + j];
                        t[0][j] = a; t[1][j] = T(0.5) * (a + b + d); t[2][j] = T(0.5) * (a - b + d); t[3][j] = d;
                    }
                    for (int i = 0; i < 4; ++i) {
                        const T a = t[i][0], b = t[i][1], d = t[i][2];
                        u[i][0] = a; u[i][1] = T(0.5) * (a + b + d); u[i][2] = T(0.5) * (a - b + d); u[i][3] = d;
                    }
                }
                for (int xi = 0; xi < 16; ++xi) U[xi * PS + (mb * C + c) * MR + oi] = u[xi / 4][xi % 4];
            }
}

// The 16 planes (one per xi) of U, V and M are written and read together: their stride is a whole
// number of 64-byte lines, odd, so the 16 streams fall in different L1 sets (at a power-of-two
// stride they shared one set: the filter transform at 128 channels took 0.43 ms for 16k filters)
template <class T>
static inline i64 plane_stride(i64 n) {
    i64 lines = (n * (i64)sizeof(T) + 63) / 64;
    if (lines % 2 == 0) ++lines;
    return lines * 64 / (i64)sizeof(T);
}

template <class T>
static inline T* aligned64(T* p) { return (T*)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

// {a[K], b[...]}: lanes P, P + 2, ... of the two vectors a, b read as one 2L-long row (P = 0: the
// even values, 1: the odd ones)
template <class IV, int P, int... K>
static constexpr IV tmask_deal(std::integer_sequence<int, K...>) { return IV{(2 * K + P)...}; }

// a vector of L values of T (the transforms' width: see conv_fwd_winograd)
template <class T, int L> struct VN { typedef T v __attribute__((vector_size(L * sizeof(T)))); };
template <class T, int L> struct IVN;
template <int L> struct IVN<float, L> { typedef int32_t v __attribute__((vector_size(L * 4))); };

// B^T d B, split in its two halves: a row's four columns a0..a3 -> (B^T applied along the row) h[0..3];
// then, the four rows' h combined, the 16 values stored at dst + xi * VS (xi = 4 * row + column)
template <class vec>
static inline void wino_bt_row(const vec& a0, const vec& a1, const vec& a2, const vec& a3, vec* h) {
    h[0] = a0 - a2; h[1] = a1 + a2; h[2] = a2 - a1; h[3] = a1 - a3;
}
template <class T, class vec>
static inline void wino_bt_store(const vec (&h)[4][4], T* __restrict dst, i64 VS) {
    for (int s = 0; s < 4; ++s) {
        const vec v[4] = {h[0][s] - h[2][s], h[1][s] + h[2][s], h[2][s] - h[1][s], h[1][s] - h[3][s]};
        for (int r = 0; r < 4; ++r) __builtin_memcpy(dst + (r * 4 + s) * VS, &v[r], sizeof(vec));
    }
}

// E[r * LW + k] = x(row hp0 + r - ph, column 2k - pw), Od[...] = the same at 2k + 1 - pw (zero
// outside the image), for R padded rows from hp0 and k < LW = TW + 1 (W = 2 TW + 2 - 2 pw). A row's
// even and odd columns are two permutes of two loads, stored where the padding puts them.
template <class T, int L>
static void wino_split_rows(const T* __restrict xc, const i64* xs, i64 H, i64 W, i64 ph, i64 pw, i64 hp0, i64 R,
                            i64 LW, T* __restrict E, T* __restrict Od) {
    typedef typename VN<T, L>::v vec;
    typedef typename IVN<T, L>::v ivec;
    constexpr int B = L * sizeof(T);
    constexpr ivec mev = tmask_deal<ivec, 0>(std::make_integer_sequence<int, L>{});
    constexpr ivec mod = tmask_deal<ivec, 1>(std::make_integer_sequence<int, L>{});
    const i64 sw = xs[4], NE = (W + 1) / 2, NO = W / 2;
    const bool peven = pw % 2 == 0;
    const i64 he = peven ? pw / 2 : (pw + 1) / 2, ho = peven ? pw / 2 : (pw - 1) / 2;   // E's, Od's zero heads
    const i64 ne = peven ? NE : NO, no = peven ? NO : NE;                               // their values
    for (i64 r = 0; r < R; ++r) {
        T* __restrict e = E + r * LW;
        T* __restrict od = Od + r * LW;
        const i64 ih = hp0 + r - ph;
        if (ih < 0 || ih >= H) {
            for (i64 k = 0; k < LW; ++k) { e[k] = T(0); od[k] = T(0); }
            continue;
        }
        for (i64 k = 0; k < he; ++k) e[k] = T(0);
        for (i64 k = he + ne; k < LW; ++k) e[k] = T(0);
        for (i64 k = 0; k < ho; ++k) od[k] = T(0);
        for (i64 k = ho + no; k < LW; ++k) od[k] = T(0);
        T* __restrict dev = peven ? e + he : od + ho;     // where x's even columns go
        T* __restrict dod = peven ? od + ho : e + he;     // ... and its odd ones
        const T* __restrict src = xc + ih * xs[3];
        i64 k = 0;
        if (sw == 1) {
            for (; 2 * (k + L) <= W; k += L) {
                vec u, v;
                __builtin_memcpy(&u, src + 2 * k, B);
                __builtin_memcpy(&v, src + 2 * k + L, B);
                const vec ev = __builtin_shuffle(u, v, mev), ov = __builtin_shuffle(u, v, mod);
                __builtin_memcpy(dev + k, &ev, B);
                __builtin_memcpy(dod + k, &ov, B);
            }
        }
        for (; k < NE; ++k) {
            dev[k] = src[2 * k * sw];
            if (k < NO) dod[k] = src[(2 * k + 1) * sw];
        }
    }
}

// V[(xi * C + c) * TBs + ...] for one image's tile rows [ty0, ty1) from its split rows (E, Od:
// padded rows 2 ty0 ...), L tiles of a row at a time (lanes past the row's end write values
// the next row's store overwrites: V rows have L values of slack)
template <class T, int L>
static inline void wino_input_rows(const T* __restrict E, const T* __restrict Od, i64 LW, i64 TW, i64 nrows,
                                   T* __restrict Vc, i64 VS) {
    typedef typename VN<T, L>::v vec;
    constexpr int B = L * sizeof(T);
    for (i64 j = 0; j < nrows; ++j) {
        const i64 rr = 2 * j;
        for (i64 tx = 0; tx < TW; tx += L) {
            vec h[4][4];
            for (int q = 0; q < 4; ++q) {
                const T* e = E + (rr + q) * LW + tx;
                const T* od = Od + (rr + q) * LW + tx;
                vec a0, a1, a2, a3;
                __builtin_memcpy(&a0, e, B);
                __builtin_memcpy(&a1, od, B);
                __builtin_memcpy(&a2, e + 1, B);
                __builtin_memcpy(&a3, od + 1, B);
                wino_bt_row(a0, a1, a2, a3, h[q]);
            }
            wino_bt_store<T>(h, Vc + j * TW + tx, VS);
        }
    }
}

// out's 2x2 blocks of the block's nb tiles (global numbers from gt0) = A^T M[., o, t] A, L tiles at
// a time; a vector's two output columns interleaved by a permute, written as whole runs of a
// tile row (one store pair when L divides the tile row)
template <class T, int L>
static void wino_output(const T* __restrict M, i64 MS, i64 TBs, i64 O, i64 nb, i64 gt0, i64 TW, i64 TI, i64 OH,
                        i64 OW, T* __restrict out) {
    typedef typename VN<T, L>::v vec;
    typedef typename IVN<T, L>::v ivec;
    constexpr int B = L * sizeof(T);
    constexpr ivec zlo = tmask_zip<ivec, L, 0>(std::make_integer_sequence<int, L>{});
    constexpr ivec zhi = tmask_zip<ivec, L, L / 2>(std::make_integer_sequence<int, L>{});
    const bool whole = TW % L == 0;
    for (i64 o = 0; o < O; ++o) {
        const T* Mo = M + o * TBs;
        for (i64 t = 0; t < nb; t += L) {
            vec m[16];
            for (int xi = 0; xi < 16; ++xi) __builtin_memcpy(&m[xi], Mo + xi * MS + t, B);
            vec z[2][2];
            for (int i = 0; i < 2; ++i) {
                vec p[4];
                for (int s = 0; s < 4; ++s)
                    p[s] = i == 0 ? m[s] + m[4 + s] + m[8 + s] : m[4 + s] - m[8 + s] - m[12 + s];
                const vec y0 = p[0] + p[1] + p[2], y1 = p[1] - p[2] - p[3];
                z[i][0] = __builtin_shuffle(y0, y1, zlo);
                z[i][1] = __builtin_shuffle(y0, y1, zhi);
            }
            const i64 gt = gt0 + t;
            if (whole) {
                const i64 n = gt / TI, ty = (gt % TI) / TW, tx = gt % TW;
                T* dst = out + ((n * O + o) * OH + 2 * ty) * OW + 2 * tx;
                for (int i = 0; i < 2; ++i) {
                    __builtin_memcpy(dst + i * OW, &z[i][0], B);
                    __builtin_memcpy(dst + i * OW + L, &z[i][1], B);
                }
            } else {
                T tmp[2][2 * L];
                for (int i = 0; i < 2; ++i) {
                    __builtin_memcpy(tmp[i], &z[i][0], B);
                    __builtin_memcpy(tmp[i] + L, &z[i][1], B);
                }
                const i64 nv = nb - t < L ? nb - t : L;
                for (i64 l = 0; l < nv;) {                 // runs of one tile row
                    const i64 tt = gt + l, n = tt / TI, ty = (tt % TI) / TW, tx = tt % TW;
                    const i64 run = (TW - tx < nv - l) ? TW - tx : nv - l;
                    T* dst = out + ((n * O + o) * OH + 2 * ty) * OW + 2 * tx;
                    for (int i = 0; i < 2; ++i) __builtin_memcpy(dst + i * OW, tmp[i] + 2 * l, 2 * run * sizeof(T));
                    l += run;
                }
            }
        }
    }
}

// g: the forward geometry (see above); x any strides; w (O, C, 3, 3) contiguous; out (N, O, OH, OW).
// The transforms run L tiles at a time, L the largest of 16, 8, 4 (no wider than the host's
// vectors) not above a tile row's length: a 4-tile row (8x8 images) in 16 lanes would waste 3/4 of
// every operation, and on Zen 4 a 256-bit operation costs half a 512-bit one, so narrower
// vectors at small images lose nothing per value.
template <class T, int MR, int NR, int L>
static void conv_fwd_winograd(const T* x, const i64* g, const i64* xs, const T* w, T* out) {
    const i64 N = g[0], C = g[1], H = g[3], W = g[4], OH = g[9], OW = g[10], ph = g[15], pw = g[16], O = g[21];
    const i64 TH = OH / 2, TW = OW / 2, TI = TH * TW, MB = (O + MR - 1) / MR;
    const int nt = g[20] > 1 ? (int)g[20] : 1;
    // (the calling thread's buffer, kept between calls -- a fresh megabyte costs its page faults --
    // up to 8 MB; larger ones, for filters of more than ~1000 x 1000 channels, are freed after the call)
    const i64 PS = plane_stride<T>(MB * MR * C);
    const size_t un = (size_t)16 * PS + 64;
    std::vector<T> Ubig;
    if (un * sizeof(T) > ((size_t)8 << 20)) Ubig.resize(un);
    T* Ua = aligned64(Ubig.empty() ? scratch<T, 3>(un) : Ubig.data());
    wino_filter<T, MR>(w, O, C, MB, PS, Ua, nt);
    // a block: RB whole tile rows, V and M (16 x (C + O) x TBs values) within WINO_BLOCK_BYTES of L2
    // (and at least two NR-wide panels: one 32-tile panel at 128 channels ran the products at half speed)
    i64 target = (i64)(WINO_BLOCK_BYTES / sizeof(T)) / (16 * (C + O));
    if (target < 2 * NR) target = 2 * NR;
    i64 RB = target / TW;
    if (RB < 1) RB = 1;
    if (RB > N * TH) RB = N * TH;
    const i64 TB = RB * TW, NP = (TB + NR - 1) / NR, TBs = NP * NR + L;
    const i64 LW = TW + 1, nblocks = (N * TH + RB - 1) / RB;
    std::vector<i64> koff((size_t)C);
    for (i64 c = 0; c < C; ++c) koff[c] = c * TBs;
    const i64 VS = plane_stride<T>(C * TBs), MS = plane_stride<T>(O * TBs);   // one xi's V and M
#pragma omp parallel num_threads(nt) if (nt > 1 && nblocks > 1)
    {
        T* V = aligned64(scratch<T, 0>((size_t)16 * VS + 64));
        T* M = aligned64(scratch<T, 1>((size_t)16 * MS + 64));
        T* E = scratch<T, 2>((size_t)2 * (2 * RB + 2) * LW + 2 * L);   // (vector reads past a row: slack)
        T* Od = E + (2 * RB + 2) * LW;
#pragma omp for schedule(static)
        for (i64 b = 0; b < nblocks; ++b) {
            const i64 row0 = b * RB, row1 = (row0 + RB < N * TH) ? row0 + RB : N * TH;
            const i64 nb = (row1 - row0) * TW;         // tiles in this block
            for (i64 r = row0; r < row1;) {            // input transform, image by image
                const i64 n = r / TH, ty0 = r % TH;
                const i64 ty1 = (row1 - n * TH < TH) ? row1 - n * TH : TH;   // this image's rows [ty0, ty1)
                for (i64 c = 0; c < C; ++c) {
                    wino_split_rows<T, L>(x + n * xs[0] + c * xs[1], xs, H, W, ph, pw, 2 * ty0, 2 * (ty1 - ty0) + 2,
                                          LW, E, Od);
                    wino_input_rows<T, L>(E, Od, LW, TW, ty1 - ty0, V + c * TBs + (r - row0) * TW, VS);
                }
                r += ty1 - ty0;
            }
            // the 16 products M[xi] (O, TB) = U[xi] (O, C) @ V[xi] (C, TB)
            const i64 np = (nb + NR - 1) / NR;
            for (int xi = 0; xi < 16; ++xi)
                for (i64 p = 0; p < np; ++p)
                    for (i64 mb = 0; mb < MB; ++mb) {
                        const i64 mv = O - mb * MR < MR ? O - mb * MR : MR;
                        micro_rows<T, MR, NR>(Ua + xi * PS + mb * C * MR, V + xi * VS + p * NR, koff.data(), C,
                                              M + xi * MS + mb * MR * TBs + p * NR, TBs, mv);
                    }
            wino_output<T, L>(M, MS, TBs, O, nb, row0 * TW, TW, TI, OH, OW, out);
        }
    }
}

template <class T, int MR, int NR>
static void winograd_dispatch(const T* x, const i64* g, const i64* xs, const T* w, T* out) {
    constexpr int VL = EMBER_VB / sizeof(T);
    const i64 TW = g[10] / 2;
    if constexpr (VL >= 16) {
        if (TW >= 16) { conv_fwd_winograd<T, MR, NR, 16>(x, g, xs, w, out); return; }
    }
    if (TW >= 8) conv_fwd_winograd<T, MR, NR, 8>(x, g, xs, w, out);
    else conv_fwd_winograd<T, MR, NR, 4>(x, g, xs, w, out);
}

// ---- the weight gradient: dL/dU[xi] (O, C) = sum over tiles of Dh[xi] (O, T) V[xi] (C, T)^T, with
// Dh = A dY_t A^T (the output gradient's 2x2 blocks expanded to 4x4) and V the forward's input
// transform; then dW = G^T dU G. The products' operands are tile-major (micro_rows reads NR
// channels of a tile at once), so both transforms run over channels-last copies of the input and
// output-gradient rows, a vector of channels at a time, and write the operands' layouts directly.

// dst[pos(p) * ds + c] = src[c * ss + p] for c < C, p < P: P consecutive values of each of C
// channels stored channels-last, VL x VL blocks through register transposes
template <class T, class F>
static inline void wino_channels_last(const T* __restrict src, i64 ss, i64 C, i64 P, T* __restrict dst, i64 ds,
                                      F pos) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T);
    const i64 C1 = C / VL * VL, P1 = P / VL * VL;
    for (i64 c0 = 0; c0 < C1; c0 += VL) {
        for (i64 p0 = 0; p0 < P1; p0 += VL)
            transpose_rows<T>(src + c0 * ss + p0, ss, [&](int j, const vec& v) {
                __builtin_memcpy(dst + pos(p0 + j) * ds + c0, &v, EMBER_VB);
            });
        for (i64 p = P1; p < P; ++p)
            for (int i = 0; i < VL; ++i) dst[pos(p) * ds + c0 + i] = src[(c0 + i) * ss + p];
    }
    for (i64 c = C1; c < C; ++c)
        for (i64 p = 0; p < P; ++p) dst[pos(p) * ds + c] = src[c * ss + p];
}

// g, x: the forward's geometry and input (N, C, H, W) contiguous; dy (N, O, OH, OW) contiguous; dw
// (O, C, 3, 3) contiguous. Blocks of whole tile rows over the threads as in the forward; each
// thread sums its blocks' products into its own dU (16 x O x C), the threads' sums are added at
// the end (in double).
template <class T, int MR, int NR>
static void conv_wgrad_winograd(const T* dy, const i64* g, const T* x, T* dw) {
    typedef typename VT<T>::v vec;
    constexpr int VL = EMBER_VB / sizeof(T);
    static_assert(VL % MR == 0, "a vector of channels holds whole A panels");
    const i64 N = g[0], C = g[1], H = g[3], W = g[4], OH = g[9], OW = g[10], ph = g[15], pw = g[16], O = g[21];
    const i64 TH = OH / 2, TW = OW / 2, WP = W + 2 * pw;       // WP = OW + 2: the padded row
    const int nt = g[20] > 1 ? (int)g[20] : 1;
    const i64 Cs = (C + NR - 1) / NR * NR;      // V's tile rows: whole B panels of NR channels
    const i64 Os = (O + VL - 1) / VL * VL;      // Dh's: whole vectors of channels
    const i64 MB = (O + MR - 1) / MR;
    // a block: RB whole tile rows, V and Dh (16 x (Cs + Os) x TB values) within WINO_BLOCK_BYTES of L2
    i64 target = (i64)(WINO_BLOCK_BYTES / sizeof(T)) / (16 * (Cs + Os));
    if (target < 2 * NR) target = 2 * NR;
    i64 RB = target / TW;
    if (RB < 1) RB = 1;
    if (RB > N * TH) RB = N * TH;
    const i64 TB = RB * TW, nblocks = (N * TH + RB - 1) / RB;
    const i64 VS = plane_stride<T>(TB * Cs), DS = plane_stride<T>(Os * TB), US = plane_stride<T>(MB * MR * Cs);
    const i64 XR = 2 * RB + 2;                  // a block's padded input rows (per image)
    std::vector<i64> koff((size_t)TB);
    for (i64 t = 0; t < TB; ++t) koff[t] = t * Cs;
    std::vector<T*> dUs((size_t)nt, nullptr);
    int team = 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && nblocks > 1)
    {
        T* V = aligned64(scratch<T, 0>((size_t)16 * VS + 64));      // V[xi][t][c]
        T* D = aligned64(scratch<T, 1>((size_t)16 * DS + 64));      // Dh[xi][o / MR][t][o % MR]
        T* Xc = aligned64(scratch<T, 2>((size_t)XR * WP * Cs + 64)); // [padded row][padded column][c]
        T* Yc = aligned64(scratch<T, 4>((size_t)2 * RB * OW * Os + 64)); // [row][column][o]
        // (this thread's sums: kept between calls up to 8 MB, as the forward's filters; beyond,
        // ~700 x 700 channels, a buffer of the call)
        std::vector<T> dUbig;
        const size_t dun = (size_t)16 * US + 64;
        if (dun * sizeof(T) > ((size_t)8 << 20)) dUbig.resize(dun);
        T* dU = aligned64(dUbig.empty() ? scratch<T, 6>(dun) : dUbig.data());
        dUs[(size_t)omp_get_thread_num()] = dU;
#pragma omp single
        team = omp_get_num_threads();
        for (i64 i = 0; i < 16 * US; ++i) dU[i] = T(0);
        // what the copies below never write stays zero for the whole call: the padding columns,
        // the channels past C and O
        for (i64 i = 0; i < XR * WP * Cs; ++i) Xc[i] = T(0);
        for (i64 i = 0; i < 2 * RB * OW * Os; ++i) Yc[i] = T(0);
#pragma omp for schedule(static)
        for (i64 b = 0; b < nblocks; ++b) {
            const i64 row0 = b * RB, row1 = (row0 + RB < N * TH) ? row0 + RB : N * TH;
            const i64 nb = (row1 - row0) * TW;
            for (i64 r = row0; r < row1;) {            // image by image
                const i64 n = r / TH, ty0 = r % TH;
                const i64 ty1 = (row1 - n * TH < TH) ? row1 - n * TH : TH, nr = ty1 - ty0;
                // the input rows 2 ty0 - ph ... (padded rows 2 ty0 + [0, 2 nr + 2)), channels last
                const i64 hp0 = 2 * ty0, ih0 = hp0 - ph < 0 ? 0 : hp0 - ph;
                const i64 ih1 = hp0 + 2 * nr + 2 - ph < H ? hp0 + 2 * nr + 2 - ph : H;
                for (i64 hp = hp0; hp < hp0 + 2 * nr + 2; ++hp)
                    if (hp - ph < 0 || hp - ph >= H)
                        for (i64 i = 0; i < WP * Cs; ++i) Xc[(hp - hp0) * WP * Cs + i] = T(0);
                if (ih1 > ih0)
                    wino_channels_last<T>(x + (n * C * H + ih0) * W, H * W, C, (ih1 - ih0) * W, Xc, Cs,
                                          [=](i64 p) { return (ih0 + p / W + ph - hp0) * WP + p % W + pw; });
                wino_channels_last<T>(dy + (n * O * OH + 2 * ty0) * OW, OH * OW, O, 2 * nr * OW, Yc, Os,
                                      [](i64 p) { return p; });
                const i64 tb0 = (r - row0) * TW;        // the block's first tile of this image
                for (i64 j = 0; j < nr; ++j)
                    for (i64 tx = 0; tx < TW; ++tx) {
                        const i64 t = tb0 + j * TW + tx;
                        // V = B^T d B over the 4x4 window at padded (2j, 2 tx), a vector of channels at a time
                        const T* xb = Xc + (2 * j * WP + 2 * tx) * Cs;
                        for (i64 c0 = 0; c0 < Cs; c0 += VL) {
                            vec h[4][4];
                            for (int q = 0; q < 4; ++q) {
                                vec a[4];
                                for (int s = 0; s < 4; ++s) __builtin_memcpy(&a[s], xb + (q * WP + s) * Cs + c0, EMBER_VB);
                                wino_bt_row(a[0], a[1], a[2], a[3], h[q]);
                            }
                            wino_bt_store<T>(h, V + t * Cs + c0, VS);
                        }
                        // Dh = A dY A^T of the 2x2 block at (2j, 2 tx), stored as the A panels
                        const T* yb = Yc + (2 * j * OW + 2 * tx) * Os;
                        for (i64 o0 = 0; o0 < Os; o0 += VL) {
                            vec d[2][2];
                            for (int q = 0; q < 2; ++q)
                                for (int e = 0; e < 2; ++e) __builtin_memcpy(&d[q][e], yb + (q * OW + e) * Os + o0, EMBER_VB);
                            vec rr[4][2];               // A dY: rows d0, d0 + d1, d0 - d1, -d1
                            for (int e = 0; e < 2; ++e) {
                                rr[0][e] = d[0][e];
                                rr[1][e] = d[0][e] + d[1][e];
                                rr[2][e] = d[0][e] - d[1][e];
                                rr[3][e] = -d[1][e];
                            }
                            for (int i = 0; i < 4; ++i) {   // (A dY) A^T: columns c0, c0 + c1, c0 - c1, -c1
                                vec v[4];
                                v[0] = rr[i][0]; v[1] = rr[i][0] + rr[i][1]; v[2] = rr[i][0] - rr[i][1]; v[3] = -rr[i][1];
                                for (int jj = 0; jj < 4; ++jj)
                                    for (int hh = 0; hh < VL / MR; ++hh)
                                        __builtin_memcpy(D + (4 * i + jj) * DS + ((o0 / MR + hh) * TB + t) * MR,
                                                         (const T*)&v[jj] + hh * MR, MR * sizeof(T));
                            }
                        }
                    }
                r += nr;
            }
            // dU[xi] (O, C) += Dh[xi] (O, nb) @ V[xi]^T (nb, C); a B panel (NR channels of the block's
            // tiles) stays in L1 while the A panels pass (at 128 channels the other order ran the
            // products 11% slower)
            for (int xi = 0; xi < 16; ++xi)
                for (i64 p = 0; p < Cs; p += NR)
                    for (i64 mb = 0; mb < MB; ++mb) {
                        const i64 mv = O - mb * MR < MR ? O - mb * MR : MR;
                        micro_rows<T, MR, NR, true>(D + xi * DS + mb * TB * MR, V + xi * VS + p, koff.data(), nb,
                                                    dU + xi * US + mb * MR * Cs + p, Cs, mv);
                    }
        }
        // dW[o, c] = G^T (the team's dU summed, in double) G, a row of channels at a time (loops
        // over c: vectorised)
        std::vector<double> ub((size_t)16 * C);
#pragma omp for schedule(static)
        for (i64 o = 0; o < O; ++o) {
            double* u = ub.data();
            for (int xi = 0; xi < 16; ++xi) {
                for (i64 c = 0; c < C; ++c) u[xi * C + c] = 0;
                for (int th = 0; th < team; ++th) {
                    const T* src = dUs[(size_t)th] + xi * US + o * Cs;
                    for (i64 c = 0; c < C; ++c) u[xi * C + c] += (double)src[c];
                }
            }
            T* out = dw + o * C * 9;
            for (i64 c = 0; c < C; ++c) {
                double t[3][4];
                for (int j = 0; j < 4; ++j) {
                    const double u0 = u[j * C + c], u1 = u[(4 + j) * C + c], u2 = u[(8 + j) * C + c],
                                 u3 = u[(12 + j) * C + c];
                    t[0][j] = u0 + 0.5 * (u1 + u2);
                    t[1][j] = 0.5 * (u1 - u2);
                    t[2][j] = 0.5 * (u1 + u2) + u3;
                }
                for (int a = 0; a < 3; ++a) {
                    out[c * 9 + a * 3 + 0] = (T)(t[a][0] + 0.5 * (t[a][1] + t[a][2]));
                    out[c * 9 + a * 3 + 1] = (T)(0.5 * (t[a][1] - t[a][2]));
                    out[c * 9 + a * 3 + 2] = (T)(0.5 * (t[a][1] + t[a][2]) + t[a][3]);
                }
            }
        }
    }
}

extern "C" {
void ember_conv_fwd_winograd_f32(const float* x, const i64* g, const i64* xs, const float* w, float* out)
{ EMBER_BY_OUT_CHANNELS(g[21], winograd_dispatch, float, EMBER_MR_F, EMBER_NR_F, x, g, xs, w, out); }
void ember_conv_wgrad_winograd_f32(const float* dy, const i64* g, const float* x, float* dw)
{ conv_wgrad_winograd<float, EMBER_MRO_F, EMBER_NR_F>(dy, g, x, dw); }   // (MR must divide VL)
}
"""


def applies(x_shape, w_shape, stride, padding, dilation, groups, dtype) -> bool:
    """Whether :data:`SOURCE`'s kernel computes this forward convolution (see the module doc)."""
    import numpy as np
    if dtype != np.float32 or len(w_shape) != 4 or tuple(w_shape[2:]) != (3, 3) or groups != 1:
        return False
    if any(int(s) != 1 for s in stride) or any(int(d) != 1 for d in dilation):
        return False
    O, C = int(w_shape[0]), int(w_shape[1])
    if C < MIN_CHANNELS or O < MIN_CHANNELS or int(x_shape[0]) < 1:
        return False
    oh, ow = int(x_shape[2]) + 2 * int(padding[0]) - 2, int(x_shape[3]) + 2 * int(padding[1]) - 2
    return oh > 0 and ow > 0 and oh % 2 == 0 and ow % 2 == 0
