// grad through scan: the default backward scan reads the residuals the forward scan stacked (the body runs
// once), a body whose work is wrapped in checkpoint recomputes it in the backward step (each policy). All
// give the unrolled loop's gradients; the plans of a 256-wide tanh RNN over 100 steps show the trade
// (the default does fewer flops, the checkpointed body keeps less memory).
#include <cstdio>

#include "tessel/dump.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/transform/remat.hpp"
#include "scan_cases.hpp"

namespace {
using namespace scan_cases;
using tessel::testing::all_close;
using tessel::testing::random_tensor;
namespace policies = tessel::checkpoint_policies;

// Mode: 0 no checkpoint, 1 nothing_saveable, 2 dots_saveable, 3 everything_saveable.
template <int Mode, class F>
constexpr auto wrap(F f) {
  if constexpr (Mode == 0) return f;
  else if constexpr (Mode == 1) return tessel::checkpoint(f, policies::nothing_saveable);
  else if constexpr (Mode == 2) return tessel::checkpoint(f, policies::dots_saveable);
  else return tessel::checkpoint(f, policies::everything_saveable);
}

// ---- a struct carry over a tuple of xs, forward and reverse, against the unrolled loop ----------------
template <template <class, class> class T = tensor>
struct state {
  BOOST_HANA_DEFINE_STRUCT(state, (T<float, shape<1, 8>>, h), (T<float, shape<1, 8>>, m));
};

constexpr auto core = [](auto h, auto m, auto x, auto w, auto u) { return tessel::tanh(tessel::matmul(h, w) + tessel::matmul(x, u) + m); };

template <int Mode>
constexpr auto cell(auto s, auto x, auto gate, auto w, auto u) {
  auto h = wrap<Mode>(core)(s.h, s.m, x, w, u);
  decltype(s) next = s;
  next.h = h;
  next.m = s.m * 0.5f + gate * h;
  return std::tuple{next, h * gate};
}

constexpr std::size_t L = 5;

template <int Mode, bool Reverse>
struct scan_loss {
  constexpr auto operator()(auto s, auto xs, auto gates, auto w, auto u) const {
    auto [last, ys] = tessel::scan([&](auto c, auto in) { return cell<Mode>(c, std::get<0>(in), std::get<1>(in), w, u); }, s,
                                   std::tuple{xs, gates}, {.reverse = Reverse});
    return tessel::sum(last.h * last.m) + tessel::sum(ys * ys);
  }
};

template <bool Reverse>
struct unrolled_loss {
  constexpr auto operator()(auto s, auto xs, auto gates, auto w, auto u) const {
    auto c = s;
    auto acc = tessel::sum(s.h) * 0.0f;
    auto one = [&](auto k) {
      constexpr long i = Reverse ? static_cast<long>(L) - 1 - decltype(k)::value : decltype(k)::value;
      auto x = tessel::reshape<shape<1, 4>>(tessel::slice_in_dim<0, i, i + 1>(xs));
      auto gate = tessel::reshape<shape<1, 8>>(tessel::slice_in_dim<0, i, i + 1>(gates));
      auto [next, y] = cell<0>(c, x, gate, w, u);
      c = next;
      acc = acc + tessel::sum(y * y);
    };
    [&]<long... K>(std::integer_sequence<long, K...>) { (one(std::integral_constant<long, K>{}), ...); }(std::make_integer_sequence<long, L>{});
    return tessel::sum(c.h * c.m) + acc;
  }
};

struct cell_inputs {
  state<> s;
  tensor<float, shape<L, 1, 4>> xs = random_tensor<float, shape<L, 1, 4>>(3);
  tensor<float, shape<L, 1, 8>> gates = random_tensor<float, shape<L, 1, 8>>(4, 0, 1);
  tensor<float, shape<8, 8>> w = random_tensor<float, shape<8, 8>>(5, -0.5, 0.5);
  tensor<float, shape<4, 8>> u = random_tensor<float, shape<4, 8>>(6);
  cell_inputs() {
    s.h = random_tensor<float, shape<1, 8>>(1);
    s.m = random_tensor<float, shape<1, 8>>(2);
  }
};

template <class A, class B>
void expect_same_gradients(const A& got, const B& want, tessel::tolerance tol, const char* what) {
  const auto& [gs, gxs, ggates, gw, gu] = got;
  const auto& [ws, wxs, wgates, ww, wu] = want;
  EXPECT_TRUE(all_close(gs.h, ws.h, tol)) << what << ": carry h";
  EXPECT_TRUE(all_close(gs.m, ws.m, tol)) << what << ": carry m";
  EXPECT_TRUE(all_close(gxs, wxs, tol)) << what << ": xs";
  EXPECT_TRUE(all_close(ggates, wgates, tol)) << what << ": gates";
  EXPECT_TRUE(all_close(gw, ww, tol)) << what << ": w";
  EXPECT_TRUE(all_close(gu, wu, tol)) << what << ": u";
}

template <bool Reverse>
void check_struct_carry() {
  const cell_inputs in;
  auto grads = [&](auto loss) { return tessel::grad<0, 1, 2, 3, 4>(loss)(in.s, in.xs, in.gates, in.w, in.u); };
  const auto saved = grads(scan_loss<0, Reverse>{});
  const auto unrolled = grads(unrolled_loss<Reverse>{});
  expect_same_gradients(saved, unrolled, {.rtol = 1e-5, .atol = 1e-6}, "saved residuals vs unrolled");
  const tessel::tolerance same{.rtol = 1e-6, .atol = 1e-6};
  expect_same_gradients(grads(scan_loss<1, Reverse>{}), saved, same, "nothing_saveable");
  expect_same_gradients(grads(scan_loss<2, Reverse>{}), saved, same, "dots_saveable");
  expect_same_gradients(grads(scan_loss<3, Reverse>{}), saved, same, "everything_saveable");
}

TEST(ScanRemat, StructCarryGradientsAgreeUnderEveryPolicy) { check_struct_carry<false>(); }
TEST(ScanRemat, ReverseStructCarryGradientsAgreeUnderEveryPolicy) { check_struct_carry<true>(); }

// ---- nested scans: the inner body checkpointed, against the unrolled double loop ----------------------
constexpr auto inner_body = [](auto a, auto w, auto x) { return tessel::tanh(a * w + x); };

template <int Mode>
struct nested_loss {
  constexpr auto operator()(auto c, auto xs, auto w) const {
    auto [total, rows] = tessel::scan([&](auto acc, auto row) {
      auto [inner, partial] = tessel::scan([&](auto a, auto x) { return std::tuple{wrap<Mode>(inner_body)(a, w, x), a * x}; }, acc, row);
      return std::tuple{inner, partial};
    }, c, xs);
    return total + tessel::sum(rows * rows);
  }
};

struct nested_unrolled {
  constexpr auto operator()(auto c, auto xs, auto w) const {
    auto a = c;
    auto acc = c * 0.0f;
    auto one = [&](auto k) {
      constexpr long i = decltype(k)::value / 4, j = decltype(k)::value % 4;
      auto x = tessel::reshape<shape<>>(tessel::slice<std::array<long, 2>{i, j}, std::array<long, 2>{i + 1, j + 1}>(xs));
      acc = acc + (a * x) * (a * x);
      a = inner_body(a, w, x);
    };
    [&]<long... K>(std::integer_sequence<long, K...>) { (one(std::integral_constant<long, K>{}), ...); }(std::make_integer_sequence<long, 12>{});
    return a + acc;
  }
};

TEST(ScanRemat, NestedScanGradientsAgree) {
  const auto xs = random_tensor<float, shape<3, 4>>(31);
  const auto c = random_tensor<float, shape<>>(32);
  const auto w = random_tensor<float, shape<>>(33);
  auto grads = [&](auto loss) { return tessel::grad<0, 1, 2>(loss)(c, xs, w); };
  const auto [uc, uxs, uw] = grads(nested_unrolled{});
  const auto [dc, dxs, dw] = grads(nested_loss<0>{});
  const tessel::tolerance tol{.rtol = 1e-5, .atol = 1e-6};
  EXPECT_TRUE(all_close(dc, uc, tol));
  EXPECT_TRUE(all_close(dxs, uxs, tol));
  EXPECT_TRUE(all_close(dw, uw, tol));
  const auto [nc, nxs, nw] = grads(nested_loss<1>{});
  const tessel::tolerance same{.rtol = 1e-6, .atol = 1e-6};
  EXPECT_TRUE(all_close(nc, dc, same));
  EXPECT_TRUE(all_close(nxs, dxs, same));
  EXPECT_TRUE(all_close(nw, dw, same));
}

// ---- fori_loop: second derivatives through the saved-residual and the checkpointed backward scans ------
constexpr auto square = [](auto a) { return a * a; };
template <int Mode>
struct power8 {
  constexpr auto operator()(auto v) const {
    return tessel::fori_loop<0, 3>([](auto, auto a) { return wrap<Mode>(square)(a); }, v);
  }
};
template <int Mode>
struct dpower8 {
  constexpr auto operator()(auto v) const { return tessel::grad(power8<Mode>{})(v); }
};

TEST(ScanRemat, ForiLoopSecondDerivatives) {
  tensor<float, shape<>> x;
  x[0] = 1.25f;
  const auto d = tessel::grad(power8<0>{})(x);
  const auto d2 = tessel::grad(dpower8<0>{})(x);
  EXPECT_NEAR(d[0], 8 * std::pow(1.25, 7), 1e-4);
  EXPECT_NEAR(d2[0], 56 * std::pow(1.25, 6), 1e-3);
  const auto c = tessel::grad(power8<1>{})(x);
  const auto c2 = tessel::grad(dpower8<1>{})(x);
  EXPECT_FLOAT_EQ(c[0], d[0]);
  EXPECT_FLOAT_EQ(c2[0], d2[0]);
}

// ---- the trade on a 256-wide tanh RNN over 100 steps ---------------------------------------------------
constexpr std::size_t width = 256, steps = 100;
using row_t = tensor<float, shape<1, width>>;
using seq_t = tensor<float, shape<steps, 1, width>>;
using mat_t = tensor<float, shape<width, width>>;
using bias_t = tensor<float, shape<width>>;

constexpr auto rnn_cell = [](auto h, auto x, auto w, auto u, auto b) { return tessel::tanh(tessel::matmul(h, w) + tessel::matmul(x, u) + b); };

template <int Mode>
struct rnn_loss {
  constexpr auto operator()(auto h, auto xs, auto w, auto u, auto b) const {
    auto [last, none] = tessel::scan([&](auto h, auto x) { return std::tuple{wrap<Mode>(rnn_cell)(h, x, w, u, b), std::tuple<>{}}; }, h, xs);
    return tessel::mean(last * last);
  }
};

template <int Mode>
constexpr const auto& rnn_plan() {
  return decltype(tessel::jit(tessel::grad<0, 2, 3, 4>(rnn_loss<Mode>{})))::template traced_for<row_t, seq_t, mat_t, mat_t, bias_t>::plan;
}

// Flops of one run of the plan: each kernel's (as dump counts them) times the steps of the scans it runs in.
template <class P>
double run_flops(const P& p) {
  double total = 0;
  for (int k = 0; k < p.kernel_count; ++k) {
    const tessel::plan::kernel& kr = p.kernels[static_cast<std::size_t>(k)];
    double f = 0;
    for (int m = 0; m < kr.member_count; ++m) {
      const tessel::ir::node& n = p.node(p.members[static_cast<std::size_t>(kr.first_member + m)]);
      if (n.prim->kind == tessel::ir::prim_kind::contraction) {
        const tessel::ir::gemm_extent d = n.prim->extent(n, p.node(n.operand(0)), p.node(n.operand(1)));
        f += 2.0 * static_cast<double>(d.batch * d.m * d.n * d.k);
      } else if (n.prim->kind == tessel::ir::prim_kind::reduce) {
        f += static_cast<double>(p.node(n.operand(0)).shape.size());
      } else {
        f += n.prim->flops_per_element * static_cast<double>(n.shape.size());
      }
    }
    for (int r = kr.region; r >= 0;) {
      const auto& fc = p.program.construct(p.program.region(r).construct);
      if (fc.kind == tessel::ir::construct_kind::scan) f *= fc.length;
      r = fc.parent;
    }
    total += f;
  }
  return total;
}

// The forward scan's outputs: the final carry, then what it stacks for the backward pass.
TEST(ScanRemat, StacksOnlyWhatTheBackwardReads) {
  constexpr auto& saved = rnn_plan<0>().program;
  constexpr auto& none = rnn_plan<1>().program;
  constexpr auto& dots = rnn_plan<2>().program;
  constexpr auto& all = rnn_plan<3>().program;
  auto stacked = [](const auto& p, int k) {
    const auto& fc = p.construct(0);
    const int result = p.region_int(p.region(fc.first_region).results + k);
    return std::string(p.nodes[static_cast<std::size_t>(result)].prim->name);
  };
  // Without checkpoint: the starting carries and the tanh output (its VJP reads it); the weights, the
  // bias and x are read directly, the pre-activation is not read at all.
  ASSERT_EQ(saved.construct(0).output_count, 3);
  EXPECT_EQ(stacked(saved, 1), "region_parameter");
  EXPECT_EQ(stacked(saved, 2), "tanh");
  // nothing_saveable: the carries only; dots_saveable: and the two GEMM results; everything_saveable: the default.
  EXPECT_EQ(none.construct(0).output_count, 2);
  ASSERT_EQ(dots.construct(0).output_count, 4);
  EXPECT_EQ(stacked(dots, 2), "dot_general");
  EXPECT_EQ(stacked(dots, 3), "dot_general");
  ASSERT_EQ(all.construct(0).output_count, 3);
  EXPECT_EQ(stacked(all, 2), "tanh");
}

TEST(ScanRemat, SavedResidualsTradeMemoryForFlops) {
  constexpr auto& saved = rnn_plan<0>();
  constexpr auto& none = rnn_plan<1>();
  constexpr auto& dots = rnn_plan<2>();
  constexpr auto& all = rnn_plan<3>();
  const double saved_flops = run_flops(saved), none_flops = run_flops(none), dots_flops = run_flops(dots);
  // The default runs the cell once per step; nothing_saveable runs it again in each backward step, and
  // keeps one stacked carry instead of the carries and the tanh outputs.
  EXPECT_LT(saved_flops, none_flops);
  EXPECT_LT(none.arena_bytes, saved.arena_bytes);
  // dots_saveable keeps the GEMM results and recomputes only the elementwise tail.
  EXPECT_LT(dots_flops, none_flops);
  // everything_saveable is the default.
  EXPECT_EQ(all.arena_bytes, saved.arena_bytes);
  EXPECT_EQ(run_flops(all), saved_flops);
  const row_t h = random_tensor<float, shape<1, width>>(1);
  const seq_t xs = random_tensor<float, shape<steps, 1, width>>(2);
  const mat_t w = random_tensor<float, shape<width, width>>(3, -0.06, 0.06);
  const mat_t u = random_tensor<float, shape<width, width>>(4, -0.06, 0.06);
  const bias_t b = random_tensor<float, shape<width>>(5, -0.1, 0.1);
  const std::string saved_text = tessel::dump(tessel::grad<0, 2, 3, 4>(rnn_loss<0>{}), h, xs, w, u, b);
  const std::string none_text = tessel::dump(tessel::grad<0, 2, 3, 4>(rnn_loss<1>{}), h, xs, w, u, b);
  EXPECT_NE(saved_text.find("peak: " + std::to_string(saved.arena_bytes) + " bytes"), std::string::npos);
  EXPECT_NE(none_text.find("peak: " + std::to_string(none.arena_bytes) + " bytes"), std::string::npos);
  const auto [gh, gw, gu, gb] = tessel::grad<0, 2, 3, 4>(rnn_loss<0>{})(h, xs, w, u, b);
  const auto [ch, cw, cu, cb] = tessel::grad<0, 2, 3, 4>(rnn_loss<1>{})(h, xs, w, u, b);
  const tessel::tolerance same{.rtol = 1e-6, .atol = 1e-7};
  EXPECT_TRUE(all_close(ch, gh, same));
  EXPECT_TRUE(all_close(cw, gw, same));
  EXPECT_TRUE(all_close(cu, gu, same));
  EXPECT_TRUE(all_close(cb, gb, same));
  std::printf("grad of a %zu-wide tanh RNN over %zu steps: peak arena bytes saved residuals %zu, nothing_saveable %zu, "
              "dots_saveable %zu; flops per run %.4g / %.4g / %.4g\n",
              width, steps, saved.arena_bytes, none.arena_bytes, dots.arena_bytes, saved_flops, none_flops, dots_flops);
}

}  // namespace
