'''The C++ erfinv approximation shared by the eager native loop (``_native_small``) and the
inductor's C++ code (``inductor/codegen/cpp.py``), so compiled and eager erfinv agree.

Why this form. The previous eager loop (a rough first guess, then Halley steps calling the C
library's erf/erfc) spent its time in those scalar libm calls and an unpredictable erf/erfc
branch: ~40 ms for 256K float32 elements. Here the value comes from a polynomial alone, with no
libm call and no data-dependent branch, so g++ vectorises the loop:

* w = -log((1 - |y|)(1 + |y|)) (the product is exact for float32 inputs; a branch-free log
  below, fdlibm's reduction and series, ~1 ulp), as in Giles' "Approximating the erfinv
  function" (GPU Computing Gems, 2011);
* erfinv(y) / y as a Chebyshev series (Clenshaw) in w on [0, 5), in sqrt(w) on [sqrt 5, 4) and
  on [4, 6.1) (sqrt(w) reaches 6.0 at the double closest below 1). The coefficients were fitted
  for ember (Chebyshev interpolation of a 40-digit erfinv); the full 23-term series has relative
  error ~2.6e-16 on each piece, so no Newton/Halley refinement is needed for float64; the first
  13 terms (~7e-11) serve float32, whose result is rounded from double.
* Each lane picks its piece's coefficients by selects (no branch): all lanes run the same
  instructions whatever the mix of central and tail values.

Special values: erfinv(+-0) = +-0 (sign kept), +-1 -> +-inf, |y| > 1 -> NaN, NaN -> NaN.
'''

SOURCE = r"""
// ---- erfinv (ember/ops/_erfinv_cpp.py): Chebyshev series in w = -log(1 - y^2), branch-free
static const double EMBER_ERFINV_A23[23] = {  // w in [0, 5): t = (w - 2.5) / 2.5
    1.501409351110792, 0.6166006918604174, -0.026108235777397543, -0.01957356105954724,
    0.008525400950935706, -0.0004878983983282123, -0.0008341356436274055, 0.0002921906851637786,
    2.047241731775922e-05, -4.143207161077017e-05, 8.652724310737925e-06, 2.8516533404049286e-06,
    -1.8538776296125541e-06, 1.3583285402896225e-07, 1.995525451825805e-07, -7.089712253320718e-08,
    -6.723959182810844e-09, 1.1039321425566464e-08, -1.976264780818035e-09, -9.755340432521657e-10,
    4.4153730511974943e-10, 3.858167305868908e-11, -3.8266063839589714e-11};
static const double EMBER_ERFINV_B1_23[23] = {  // s = sqrt(w) in [sqrt 5, 4): t = (s - (4 + sqrt 5) / 2) * 2 / (4 - sqrt 5)
    2.951328578343118, 0.8851584844828514, 0.0055693342119964425, -0.0037101358035815167,
    0.002349562461161912, -0.001373040407813188, 0.0006008359553459834, -0.0001342595315277671,
    -3.595765596611252e-05, 4.5273556499374304e-05, -1.6797756402931947e-05, 3.031144021222457e-07,
    2.6532418954006782e-06, -1.2413576301805117e-06, 1.3912464456858077e-07, 1.2285216643455595e-07,
    -7.36921057939306e-08, 1.5503583705367104e-08, 3.942074259727069e-09, -4.444516445091678e-09,
    1.1308721364683313e-09, 3.074278441925577e-10, -1.6694195317670202e-10};
static const double EMBER_ERFINV_B2_23[23] = {  // s in [4, 6.1): t = (s - 5.05) * 2 / 2.1
    4.900421051443641, 1.0607992684776597, -0.0001872685458712891, -0.0002318861866777845,
    8.659304863668821e-05, -2.3451082670766455e-05, 5.620165332280951e-06, -1.2763533041452638e-06,
    2.9788156214751997e-07, -8.525148286846526e-08, 3.5552540863891186e-08, -1.9081922156647014e-08,
    1.0408210291595554e-08, -5.095147227697176e-09, 2.10469369208735e-09, -6.810829412590338e-10,
    1.411219692021551e-10, 3.902616936343621e-12, -2.1780788776314757e-11, 1.3637496618406302e-11,
    -4.131768127152955e-12, -1.8565840439706658e-13, 3.253759632885125e-13};
static const double EMBER_ERFINV_A13[13] = {  // float32: the first 13 Chebyshev terms of the same series
    1.5014093511307298, 0.6166006919867009, -0.026108237741432463, -0.019573564270649057,
    0.008525432590256501, -0.0004878764749554979, -0.0008343272659614886, 0.0002921357797497985,
    2.1027453152187304e-05, -4.140043618074985e-05, 7.820672733815211e-06, 2.931137042117709e-06,
    -1.2236984334405913e-06};
static const double EMBER_ERFINV_B1_13[13] = {  // (float32 never reaches s = 4: 1 - 2^-24 gives 3.99)
    2.9513285783320713, 0.8851584868684105, 0.0055693352485000945, -0.003710203862043023,
    0.0023495468790000833, -0.0013724818182381587, 0.0006009208277757875, -0.00013624708744603705,
    -3.616205327225651e-05, 4.87858738007943e-05, -1.6594938727868517e-05, -2.8215385059337698e-06,
    2.6548582311245104e-06};

static inline double ember_erfinv_bits_f64(uint64_t u) { double d; __builtin_memcpy(&d, &u, 8); return d; }
static inline uint64_t ember_erfinv_f64_bits(double d) { uint64_t u; __builtin_memcpy(&u, &d, 8); return u; }

// log(z) for z in [2^-60, 1], no branch, no libm call: z = 2^e m, m in [sqrt(1/2), sqrt 2),
// log(m) = log(1 + f) by fdlibm's s = f / (2 + f) series, Taylor terms to s^(2K) (K = 11: ~1 ulp;
// K = 7: ~1e-11, plenty for a float32 result)
template <int K>
static inline double ember_erfinv_log(double z) {
    const uint64_t u = ember_erfinv_f64_bits(z);
    double m = ember_erfinv_bits_f64((u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
    // the biased exponent as a double without an int -> double conversion: 2^52 + e_b - (2^52 + 1023)
    double e = ember_erfinv_bits_f64(0x4330000000000000ULL | (u >> 52)) - 4503599627371519.0;
    const bool big = m > 1.4142135623730951;
    m = big ? 0.5 * m : m;
    e = big ? e + 1.0 : e;
    const double f = m - 1.0;
    const double s = f / (2.0 + f);
    const double s2 = s * s;
    double r = 2.0 / (2 * K + 1);
    #pragma GCC unroll 16
    for (int k = K - 1; k >= 1; --k) r = r * s2 + 2.0 / (2 * k + 1);
    r = r * s2;
    const double hfsq = 0.5 * f * f;
    return e * 0.6931471803691238 - ((hfsq - (s * (hfsq + r) + e * 1.9082146973659064e-10)) - f);
}

// erfinv(|y|) for ay in [0, 1): Horner in t on the lane's piece (coefficients picked by selects).
// F64: 23 terms, three pieces; float32 results: 13 terms, two pieces
template <bool F64>
static inline double ember_erfinv_abs(double ay) {
    constexpr int N = F64 ? 23 : 13;
    const double* A = F64 ? EMBER_ERFINV_A23 : EMBER_ERFINV_A13;
    const double* B1 = F64 ? EMBER_ERFINV_B1_23 : EMBER_ERFINV_B1_13;
    const double* B2 = F64 ? EMBER_ERFINV_B2_23 : EMBER_ERFINV_B1_13;
    const double w = -ember_erfinv_log<F64 ? 11 : 7>((1.0 - ay) * (1.0 + ay));
    const double s = __builtin_sqrt(w);
    const bool a = w < 5.0, b1 = !F64 || s < 4.0;
    const double t = a ? (w - 2.5) * 0.4
                       : (b1 ? (s - 3.118033988749895) * 1.1338305413635983 : (s - 5.05) * 0.9523809523809526);
    double p = a ? A[N - 1] : (b1 ? B1[N - 1] : B2[N - 1]);
    #pragma GCC unroll 32
    for (int j = N - 2; j >= 0; --j) p = p * t + (a ? A[j] : (b1 ? B1[j] : B2[j]));
    return ay * p;
}

// erfinv(y) in double: F64 for double results (~1-3 ulp), otherwise float32-accurate (rounded
// from this double: ~7e-11 relative before rounding)
template <bool F64>
static inline double ember_erfinv_d(double y) {
    const double ay = __builtin_fabs(y);
    const bool in = ay < 1.0;
    const double r = ember_erfinv_abs<F64>(in ? ay : 0.5);
    const double v = in ? r : (ay == 1.0 ? __builtin_inf() : __builtin_nan(""));
    return y != y ? y : __builtin_copysign(v, y);
}
"""
