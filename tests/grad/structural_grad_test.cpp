// Reductions, layout primitives, dot_general and derived ops: grad and jvp against finite differences.
#include "gradcheck.hpp"

namespace {
using tessel::axes;
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_gradient;
using tessel::testing::random_tensor;
using V = std::vector<std::vector<double>>;

const auto x34 = random_tensor<float, shape<3, 4>>(7);
const auto w34 = random_tensor<float, shape<3, 4>>(8);

double at(const V& v, std::size_t arg, std::size_t i, std::size_t j, std::size_t cols) { return v[arg][i * cols + j]; }

TEST(StructuralGrad, ReduceSumOverEachAxis) {
  const auto w4 = random_tensor<float, shape<4>>(9);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::sum<0>(x) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i)
                     for (std::size_t j = 0; j < 4; ++j) s += at(v, 0, i, j, 4) * v[1][j];
                   return s;
                 },
                 x34, w4);
  const auto w3 = random_tensor<float, shape<3>>(10);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::sum<1>(x * x) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i)
                     for (std::size_t j = 0; j < 4; ++j) s += at(v, 0, i, j, 4) * at(v, 0, i, j, 4) * v[1][i];
                   return s;
                 },
                 x34, w3);
}

TEST(StructuralGrad, ReduceMaxAndMin) {
  const auto w3 = random_tensor<float, shape<3>>(11);
  check_gradient([](auto x, auto w) { return tessel::sum((tessel::max<1>(x) - tessel::min<1>(x)) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i) {
                     double hi = -1e300, lo = 1e300;
                     for (std::size_t j = 0; j < 4; ++j) hi = std::max(hi, at(v, 0, i, j, 4)), lo = std::min(lo, at(v, 0, i, j, 4));
                     s += (hi - lo) * v[1][i];
                   }
                   return s;
                 },
                 x34, w3);
}

TEST(StructuralGrad, TransposeReshapeBroadcast) {
  const auto w43 = random_tensor<float, shape<4, 3>>(12);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::transpose<1, 0>(x) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i)
                     for (std::size_t j = 0; j < 4; ++j) s += at(v, 0, i, j, 4) * at(v, 1, j, i, 3);
                   return s;
                 },
                 x34, w43);
  // A transpose read by a matmul is folded into its dimension numbers (prim/build.hpp,
  // read_through_transpose): the gradient reaches x through the dot itself.
  const auto w35 = random_tensor<float, shape<3, 5>>(14);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::tanh(tessel::matmul(tessel::transpose<1, 0>(x), w))); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 4; ++i)
                     for (std::size_t j = 0; j < 5; ++j) {
                       double d = 0;
                       for (std::size_t k = 0; k < 3; ++k) d += at(v, 0, k, i, 4) * at(v, 1, k, j, 5);
                       s += std::tanh(d);
                     }
                   return s;
                 },
                 x34, w35);
  const auto w26 = random_tensor<float, shape<2, 6>>(13);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::reshape<shape<2, 6>>(x) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 12; ++i) s += v[0][i] * v[1][i];
                   return s;
                 },
                 x34, w26);
  const auto w234 = random_tensor<float, shape<2, 3, 4>>(14);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::broadcast_in_dim<shape<2, 3, 4>, 1, 2>(x) * w); },
                 [](const V& v) {
                   double s = 0;
                   for (std::size_t b = 0; b < 2; ++b)
                     for (std::size_t i = 0; i < 12; ++i) s += v[0][i] * v[1][b * 12 + i];
                   return s;
                 },
                 x34, w234);
}

TEST(StructuralGrad, MatmulBothOperands) {
  const auto b45 = random_tensor<float, shape<4, 5>>(15);
  const auto w35 = random_tensor<float, shape<3, 5>>(16);
  const auto ref = [](const V& v, bool b_first) {
    const auto& A = b_first ? v[1] : v[0];
    const auto& B = b_first ? v[0] : v[1];
    double s = 0;
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 5; ++j) {
        double c = 0;
        for (std::size_t k = 0; k < 4; ++k) c += A[i * 4 + k] * B[k * 5 + j];
        s += std::tanh(c) * v[2][i * 5 + j];
      }
    return s;
  };
  check_gradient([](auto a, auto b, auto w) { return tessel::sum(tessel::tanh(tessel::matmul(a, b)) * w); },
                 [&](const V& v) { return ref(v, false); }, x34, b45, w35);
  check_gradient([](auto b, auto a, auto w) { return tessel::sum(tessel::tanh(tessel::matmul(a, b)) * w); },
                 [&](const V& v) { return ref(v, true); }, b45, x34, w35);
}

TEST(StructuralGrad, DotGeneralBatchedAndTransposed) {
  // [2,3,4] x [2,5,4] contracting the last axes, batch 0: [2,3,5]; the rhs is read transposed.
  const auto a = random_tensor<float, shape<2, 3, 4>>(17);
  const auto b = random_tensor<float, shape<2, 5, 4>>(18);
  const auto w = random_tensor<float, shape<2, 3, 5>>(19);
  const auto ref = [](const V& v, bool b_first) {
    const auto& A = b_first ? v[1] : v[0];
    const auto& B = b_first ? v[0] : v[1];
    double s = 0;
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t j = 0; j < 5; ++j) {
          double c = 0;
          for (std::size_t k = 0; k < 4; ++k) c += A[n * 12 + i * 4 + k] * B[n * 20 + j * 4 + k];
          s += c * c * v[2][n * 15 + i * 5 + j];
        }
    return s;
  };
  const auto f = [](auto x, auto y) { return tessel::dot_general<axes<2>, axes<2>, axes<0>, axes<0>>(x, y); };
  check_gradient([](auto x, auto y, auto w) {
    auto c = tessel::dot_general<axes<2>, axes<2>, axes<0>, axes<0>>(x, y);
    return tessel::sum(c * c * w);
  }, [&](const V& v) { return ref(v, false); }, a, b, w);
  check_gradient([](auto y, auto x, auto w) {
    auto c = tessel::dot_general<axes<2>, axes<2>, axes<0>, axes<0>>(x, y);
    return tessel::sum(c * c * w);
  }, [&](const V& v) { return ref(v, true); }, b, a, w);
  (void)f;
}

TEST(StructuralGrad, SoftmaxLogSoftmaxLogsumexpMeanVar) {
  const auto row = [](const V& v, std::size_t i) {
    std::vector<double> r(4);
    for (std::size_t j = 0; j < 4; ++j) r[j] = at(v, 0, i, j, 4);
    return r;
  };
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::softmax(x) * w); },
                 [&](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i) {
                     auto r = row(v, i);
                     double z = 0;
                     for (double e : r) z += std::exp(e);
                     for (std::size_t j = 0; j < 4; ++j) s += std::exp(r[j]) / z * at(v, 1, i, j, 4);
                   }
                   return s;
                 },
                 x34, w34);
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::log_softmax(x) * w); },
                 [&](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i) {
                     auto r = row(v, i);
                     double z = 0;
                     for (double e : r) z += std::exp(e);
                     for (std::size_t j = 0; j < 4; ++j) s += (r[j] - std::log(z)) * at(v, 1, i, j, 4);
                   }
                   return s;
                 },
                 x34, w34);
  const auto w3 = random_tensor<float, shape<3>>(20);
  check_gradient([](auto x, auto w) { return tessel::sum((tessel::logsumexp<1>(x) + tessel::var<1>(x) + tessel::mean<1>(x)) * w); },
                 [&](const V& v) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i) {
                     auto r = row(v, i);
                     double z = 0, m = 0, q = 0;
                     for (double e : r) z += std::exp(e), m += e / 4;
                     for (double e : r) q += (e - m) * (e - m) / 4;
                     s += (std::log(z) + q + m) * v[1][i];
                   }
                   return s;
                 },
                 x34, w3);
}
}  // namespace
