"""``torch.special``'s Bessel and Airy functions: ``airy_ai``, ``bessel_j0/j1``, ``bessel_y0/y1``,
``modified_bessel_i0/i1/k0/k1``, ``scaled_modified_bessel_k0/k1`` and ``spherical_bessel_j0``.

Each follows PyTorch's algorithm (the Cephes Math Library's rational and Chebyshev approximations,
with the coefficients below copied from PyTorch's ``ATen/native/Math.h``), written in public ops:
every branch is computed on inputs made safe for it and the branch is chosen with ``where``.
Polynomials are evaluated by Horner's rule and Chebyshev series in their power form
(``special.chebyshev_series``), so a traced graph stays a chain each step of which reads only the
previous one and compiles quickly. As in PyTorch, these functions have no gradient: their results
never require grad. Integer inputs compute in the default float dtype.
"""

from __future__ import annotations

import math

from munet.ops.elementwise import _float_input, _out, where
from munet.ops.special import chebyshev_power_form, chebyshev_series, i0, i1

__special__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
               "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
               "scaled_modified_bessel_k1", "spherical_bessel_j0"]  # fmt: skip

_AIRY_AN = (
    3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01, 1.68089224934630576269e+02,
    1.59756391350164413639e+02, 7.05360906840444183113e+01, 1.40264691163389668864e+01, 9.99999999999999995305e-01,
)  # fmt: skip
_AIRY_AD = (
    5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01, 1.77318088145400459522e+02,
    1.64234692871529701831e+02, 7.14778400825575695274e+01, 1.40959135607834029598e+01, 1.00000000000000000470e+00,
)  # fmt: skip
_AIRY_AFN = (
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08,
)  # fmt: skip
_AIRY_AFD = (
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01, 9.18707402907259625840e+00,
    1.47529146771666414581e+00, 1.15687173795188044134e-01, 4.40291641615211203805e-03, 7.54720348287414296618e-05,
    4.51850092970580378464e-07,
)  # fmt: skip
_AIRY_AGN = (
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00, 9.39169229816650230044e-01,
    3.51465656105547619242e-01, 6.33888919628925490927e-02, 5.85804113048388458567e-03, 2.82851600836737019778e-04,
    6.98793669997260967291e-06, 8.11789239554389293311e-08, 3.41551784765923618484e-10,
)  # fmt: skip
_AIRY_AGD = (
    9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01, 5.47686069422975497931e+00,
    9.54293611618961883998e-01, 8.64580826352392193095e-02, 4.12656523824222607191e-03, 1.01259085116509135510e-04,
    1.17166733214413521882e-06, 4.91834570062930015649e-09,
)  # fmt: skip
_J0_PP = (
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00, 5.44725003058768775090e+00,
    8.74716500199817011941e+00, 5.30324038235394892183e+00, 9.99999999999999997821e-01,
)  # fmt: skip
_J0_PQ = (
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00, 5.47097740330417105182e+00,
    8.76190883237069594232e+00, 5.30605288235394617618e+00, 1.00000000000000000218e+00,
)  # fmt: skip
_J0_QP = (
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00,
)  # fmt: skip
_J0_QQ = (
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03, 7.24046774195652478189e+03,
    5.93072701187316984827e+03, 2.06209331660327847417e+03, 2.42005740240291393179e+02,
)  # fmt: skip
_J0_RP = (
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14, 9.70862251047306323952e+15,
)  # fmt: skip
_J0_RQ = (
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07, 1.11855537045356834862e+10,
    2.11277520115489217587e+12, 3.10518229857422583814e+14, 3.18121955943204943306e+16, 1.71086294081043136091e+18,
)  # fmt: skip
_J1_PP = (
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00, 5.11207951146807644818e+00,
    8.42404590141772420927e+00, 5.21451598682361504063e+00, 1.00000000000000000254e+00,
)  # fmt: skip
_J1_PQ = (
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00, 5.07386386128601488557e+00,
    8.39985554327604159757e+00, 5.20982848682361821619e+00, 9.99999999999999997461e-01,
)  # fmt: skip
_J1_QP = (
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01, 3.66779609360150777800e+02,
    7.10856304998926107277e+02, 5.97489612400613639965e+02, 2.11688757100572135698e+02, 2.52070205858023719784e+01,
)  # fmt: skip
_J1_QQ = (
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03, 9.56231892404756170795e+03,
    7.99704160447350683650e+03, 2.82619278517639096600e+03, 3.36093607810698293419e+02,
)  # fmt: skip
_J1_RP = (
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13, 3.68295732863852883286e+15,
)  # fmt: skip
_J1_RQ = (
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07, 2.21511595479792499675e+10,
    4.74914122079991414898e+12, 7.84369607876235854894e+14, 8.95222336184627338078e+16, 5.32278620332680085395e+18,
)  # fmt: skip
_Y0_YP = (
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09, -9.82136065717911466409e+11,
    8.75906394395366999549e+13, -3.46628303384729719441e+15, 4.42733268572569800351e+16, -1.84950800436986690637e+16,
)  # fmt: skip
_Y0_YQ = (
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08, 8.64002487103935000337e+10,
    2.02979612750105546709e+13, 3.17157752842975028269e+15, 2.50596256172653059228e+17,
)  # fmt: skip
_Y1_YP = (
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14, -8.12770255501325109621e+15,
    2.02439475713594898196e+17, -7.78877196265950026825e+17,
)  # fmt: skip
_Y1_YQ = (
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07, 1.87601316108706159478e+10,
    3.88231277496238566008e+12, 6.20557727146953693363e+14, 6.87141087355300489866e+16, 3.97270608116560655612e+18,
)  # fmt: skip
_K0_A = (
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11, 1.90451637722020886025e-09,
    2.53479107902614945675e-07, 2.28621210311945178607e-05, 1.26461541144692592338e-03, 3.59799365153615016266e-02,
    3.44289899924628486886e-01, -5.35327393233902768720e-01,
)  # fmt: skip
_K0_B = (
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17, -1.67823109680541210385e-16,
    5.51205597852431940784e-16, -1.84859337734377901440e-15, 6.34007647740507060557e-15, -2.22751332699166985548e-14,
    8.03289077536357521100e-14, -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10, -1.69753450938905987466e-09,
    8.57403401741422608519e-09, -4.66048989768794782956e-08, 2.76681363944501510342e-07, -1.83175552271911948767e-06,
    1.39498137188764993662e-05, -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00,
)  # fmt: skip
_K1_A = (
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00,
)  # fmt: skip
_K1_B = (
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17, 1.83809354436663880070e-16,
    -6.05704724837331885336e-16, 2.03870316562433424052e-15, -7.01983709041831346144e-15, 2.47715442448130437068e-14,
    -8.97670518232499435011e-14, 3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10, 2.01504975519703286596e-09,
    -1.03457624656780970260e-08, 5.74108412545004946722e-08, -3.50196060308781257119e-07, 2.40648494783721712015e-06,
    -1.93619797416608296024e-05, 1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00,
)  # fmt: skip

_K0_A, _K0_B, _K1_A, _K1_B = (chebyshev_power_form(c) for c in (_K0_A, _K0_B, _K1_A, _K1_B))

_PI_4, _3PI_4 = math.pi / 4, 3 * math.pi / 4
_SQRT_2_PI = math.sqrt(2 / math.pi)  # sqrt(2 / pi)
_2_PI = 2 / math.pi
_AIRY_SERIES_TERMS = 12


def _horner(z, coefficients):
    """``c[0] z^(n-1) + ... + c[n-1]`` (highest order first), one multiply-add per step."""
    total = coefficients[0]
    for c in coefficients[1:]:
        total = total * z + c
    return total


def _values(input):
    """``input`` as a float tensor outside autograd: PyTorch defines no gradient for these functions."""
    return _float_input(input).detach()


def _asymptotic(x, w, phase, cos_first: bool):
    """Hankel's expansion for ``x > 5`` (``w = (5 / x)**2``): ``sqrt(2 / (pi x)) (P cos(x - phase) - 5/x Q
    sin(x - phase))`` for J, and ``P sin + 5/x Q cos`` for Y (the P, Q of J0 or J1 by ``phase``)."""
    tables = (_J0_PP, _J0_PQ, _J0_QP, _J0_QQ) if phase == _PI_4 else (_J1_PP, _J1_PQ, _J1_QP, _J1_QQ)
    pp, pq, qp, qq = (_horner(w, t) for t in tables)
    p, q = pp / pq, 5 / x * (qp / qq)
    angle = x - phase
    if cos_first:
        return (p * angle.cos() - q * angle.sin()) * _SQRT_2_PI / x.sqrt()
    return (p * angle.sin() + q * angle.cos()) * _SQRT_2_PI / x.sqrt()


def _split(a, bound: float):
    """``(a <= bound, a or 1 there, a or 2 * bound elsewhere)``: each branch's input kept in its domain."""
    near = a <= bound
    return near, where(near, a, 1.0), where(near, 2 * bound, a)


def _j0(a):
    """J0 at ``a >= 0``."""
    near, xn, xf = _split(a, 5.0)
    z = xn * xn
    small = (z - 5.78318596294678452118e00) * (z - 3.04712623436620863991e01) * _horner(z, _J0_RP) / _horner(z, _J0_RQ)
    small = where(xn < 1e-5, 1 - z / 4, small)
    return where(near, small, _asymptotic(xf, 25 / (xf * xf), _PI_4, True))


def _j1(a):
    """J1 at ``a >= 0``."""
    near, xn, xf = _split(a, 5.0)
    z = xn * xn
    small = (
        _horner(z, _J1_RP) / _horner(z, _J1_RQ) * xn * (z - 1.46819706421238932572e01) * (z - 4.92184563216946036703e01)
    )
    w = 5 / xf * (5 / xf)
    return where(near, small, _asymptotic(xf, w, _3PI_4, True))


def bessel_j0(input, *, out=None):
    """The Bessel function of the first kind of order 0."""
    return _out(_j0(_values(input).abs()), out)


def bessel_j1(input, *, out=None):
    """The Bessel function of the first kind of order 1 (odd)."""
    x = _values(input)
    result = _j1(x.abs())
    return _out(where(x < 0, -result, result), out)


def _below_zero(x, result):
    """``-inf`` at 0 and NaN below it, as the functions of the second kind are."""
    return where(x == 0, -math.inf, where(x < 0, math.nan, result))


def bessel_y0(input, *, out=None):
    """The Bessel function of the second kind of order 0; ``-inf`` at 0, NaN for negative input."""
    x = _values(input)
    near, xn, xf = _split(x.where(x > 0, 1.0), 5.0)
    z = xn * xn
    small = _horner(z, _Y0_YP) / _horner(z, _Y0_YQ) + _2_PI * xn.log() * _j0(xn)
    result = where(near, small, _asymptotic(xf, 25 / (xf * xf), _PI_4, False))
    return _out(where(x.isnan(), x, _below_zero(x, result)), out)


def bessel_y1(input, *, out=None):
    """The Bessel function of the second kind of order 1; ``-inf`` at 0, NaN for negative input."""
    x = _values(input)
    near, xn, xf = _split(x.where(x > 0, 1.0), 5.0)
    z = xn * xn
    small = xn * (_horner(z, _Y1_YP) / _horner(z, _Y1_YQ)) + _2_PI * (_j1(xn) * xn.log() - 1 / xn)
    result = where(near, small, _asymptotic(xf, 5 / xf * (5 / xf), _3PI_4, False))
    return _out(where(x.isnan(), x, _below_zero(x, result)), out)


def modified_bessel_i0(input, *, out=None):
    """The modified Bessel function of the first kind of order 0 (``i0`` without a gradient)."""
    return _out(i0(_values(input)), out)


def modified_bessel_i1(input, *, out=None):
    """The modified Bessel function of the first kind of order 1 (``i1`` without a gradient)."""
    return _out(i1(_values(input)), out)


def _k_parts(x, order: int):
    """For ``x > 0``: ``(x <= 2, K(x) on (0, 2], exp(x) K(x) on (2, inf))`` of order 0 or 1."""
    near, xn, xf = _split(x, 2.0)
    if order == 0:
        small = chebyshev_series(xn * xn - 2, _K0_A) - (0.5 * xn).log() * i0(xn)
    else:
        small = (0.5 * xn).log() * i1(xn) + chebyshev_series(xn * xn - 2, _K1_A) / xn
    large = chebyshev_series(8 / xf - 2, _K0_B if order == 0 else _K1_B) / xf.sqrt()
    return near, xn, xf, small, large


def _modified_k(input, order: int, scaled: bool, out):
    x = _values(input)
    near, xn, xf, small, large = _k_parts(where(x > 0, x, 1.0), order)
    result = where(near, small * xn.exp(), large) if scaled else where(near, small, (-xf).exp() * large)
    result = where(x == 0, math.inf, where(x < 0, math.nan, result))
    return _out(where(x.isnan(), x, result), out)


def modified_bessel_k0(input, *, out=None):
    """The modified Bessel function of the second kind of order 0; ``inf`` at 0, NaN below."""
    return _modified_k(input, 0, False, out)


def modified_bessel_k1(input, *, out=None):
    """The modified Bessel function of the second kind of order 1; ``inf`` at 0, NaN below."""
    return _modified_k(input, 1, False, out)


def scaled_modified_bessel_k0(input, *, out=None):
    """``exp(x) K0(x)``; ``inf`` at 0, NaN below."""
    return _modified_k(input, 0, True, out)


def scaled_modified_bessel_k1(input, *, out=None):
    """``exp(x) K1(x)``; ``inf`` at 0, NaN below."""
    return _modified_k(input, 1, True, out)


def spherical_bessel_j0(input, *, out=None):
    """``sin(x) / x``, 1 at 0 (a Taylor series below 0.5), 0 at the infinities."""
    x = _values(input)
    small = x.abs() < 0.5
    z = x * x
    series = 1 + z * _horner(z, (1 / 6227020800, -1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6))
    xs = where(small, 1.0, x)
    return _out(where(x.isinf(), 0.0, where(small, series, xs.sin() / xs)), out)


def airy_ai(input, *, out=None):
    """The Airy function Ai: an asymptotic expansion below -2.09 and above 2.09 (rational in
    ``1 / zeta``, ``zeta = 2/3 x^1.5``), the Maclaurin series between; 0 above 103.892, NaN at the
    infinities."""
    x = _values(input)
    negative = x < -2.09
    positive = x >= 2.09
    xneg = where(negative, x, -4.0)
    root = (-xneg).sqrt()
    z = 1 / (-2 * xneg * root / 3)
    zz = z * z
    t = -2 * xneg * root / 3 + 0.25 * math.pi
    oscillating = (0.564189583547756286948 / root.sqrt()) * (
        t.sin() * (1 + zz * _horner(zz, _AIRY_AFN) / _horner(zz, _AIRY_AFD))
        - t.cos() * (z * _horner(zz, _AIRY_AGN) / _horner(zz, _AIRY_AGD))
    )
    xpos = where(positive & (x <= 103.892), x, 4.0)
    zeta = 2 * xpos * xpos.sqrt() / 3
    inverse = 1 / zeta
    decaying = (
        0.564189583547756286948
        * (_horner(inverse, _AIRY_AN) / _horner(inverse, _AIRY_AD))
        / (2 * xpos.sqrt().sqrt() * zeta.exp())
    )
    xs = where(negative | positive, 0.0, x)
    cube = xs * xs * xs
    f, g, m, n, k = 1.0, xs, 1.0, xs, 1.0
    for _ in range(_AIRY_SERIES_TERMS):  # the terms fall below float64's epsilon by then, for |x| < 2.09
        m = m * cube / (k + 1) / (k + 2)
        n = n * cube / (k + 2) / (k + 3)
        k += 3
        f = f + m
        g = g + n
    series = 0.355028053887817239260 * f - 0.258819403792806798405 * g
    result = where(negative, oscillating, where(positive, where(x > 103.892, 0.0, decaying), series))
    return _out(where(x.isinf(), math.nan, result), out)
