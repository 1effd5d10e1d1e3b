// Exact resume (issue 7): a 2-layer MLP trained with jit(value_and_grad) and optim::adam under a cosine
// schedule, on a shuffled data pipeline, with a random key split every step (input noise), gives the
// same bytes after 2N steps in one run as after N steps, a checkpoint, a restore into fresh objects
// (pipeline rebuilt, position restored) and N more.
#include <gtest/gtest.h>

#include <tessel/data.hpp>
#include <tessel/io/checkpoint.hpp>
#include <tessel/nn.hpp>
#include <tessel/tessel.hpp>

#include "test_files.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
namespace io = tessel::io;
namespace td = tessel::data;
namespace optim = tessel::optim;

constexpr std::size_t batch = 8, features = 6, hidden = 16, classes = 3;

template <template <class, class> class T = tensor>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (T<float, shape<features, hidden>>, w1), (T<float, shape<hidden>>, b1),
                           (T<float, shape<hidden, classes>>, w2), (T<float, shape<classes>>, b2));
};

using optimizer = optim::adam<optim::cosine_decay_schedule{.init_value = 0.05, .decay_steps = 40}>;
using state_t = decltype(optimizer{}.init(mlp<>{}));

struct loss_fn {
  template <class P, class X, class Y>
  constexpr auto operator()(P p, X x, Y y) const {
    auto h = tessel::relu(tessel::nn::dense(x, p.w1, p.b1));
    return tessel::mean(tessel::nn::softmax_cross_entropy_with_integer_labels(tessel::nn::dense(h, p.w2, p.b2), y));
  }
};

struct train_step {
  template <class P, class S, class X, class Y>
  constexpr auto operator()(P params, S state, X x, Y y) const {
    auto [loss, grads] = tessel::value_and_grad(loss_fn{})(params, x, y);
    auto [updates, next] = optimizer{}.update(grads, state);
    return std::make_tuple(optim::apply_updates(params, updates), next, loss);
  }
};

// 100 examples of a learnable rule; 12 full batches an epoch (the remainder dropped).
std::vector<td::labeled<float, shape<features>>> examples() {
  std::vector<td::labeled<float, shape<features>>> out(100);
  const auto x = tessel::random::normal<shape<100, features>>(tessel::random::key_from_seed(1));
  for (std::size_t i = 0; i < out.size(); ++i) {
    float s = 0;
    for (std::size_t j = 0; j < features; ++j) s += (out[i].features[j] = x[i * features + j]) * static_cast<float>(j % 3);
    out[i].label = s > 1.0f ? 2 : s > -1.0f ? 1 : 0;
  }
  return out;
}

auto make_pipeline() {
  return td::from_vector(examples()) | td::shuffle(tessel::random::key_from_seed(2)) | td::batch<batch>(td::drop_remainder);
}

struct run_state {
  mlp<> params;
  state_t opt;
  tessel::random::key key = tessel::random::key_from_seed(3);
  decltype(make_pipeline()) data = make_pipeline();
  std::uint64_t step = 0;
  std::vector<float> losses;
};

void train(run_state& r, int steps) {
  const auto step = tessel::jit(train_step{});
  for (int i = 0; i < steps; ++i, ++r.step) {
    auto b = r.data.next();
    if (!b) b = r.data.next();  // the end of an epoch
    const auto [next_key, noise_key] = tessel::random::split(r.key);
    r.key = next_key;
    auto x = b->data.features;
    const auto noise = tessel::random::normal<shape<batch, features>>(noise_key);
    for (std::size_t j = 0; j < x.size; ++j) x[j] += 0.05f * noise[j];
    auto [params, opt, loss] = step(r.params, r.opt, x, b->data.labels);
    r.params = std::move(params);
    r.opt = std::move(opt);
    r.losses.push_back(loss[0]);
  }
}

run_state fresh() {
  run_state r;
  const auto keys = tessel::random::split<2>(tessel::random::key_from_seed(0));
  r.params.w1 = tessel::nn::glorot_uniform<shape<features, hidden>>(keys[0]);
  r.params.w2 = tessel::nn::glorot_uniform<shape<hidden, classes>>(keys[1]);
  r.opt = optimizer{}.init(r.params);
  return r;
}

template <class Tree>
std::vector<std::byte> bytes_of(const Tree& t) {
  io::snapshot s;
  s.add("t", t);
  return io::serialize_safetensors(std::move(s).finish());
}

TEST(CheckpointResume, TwoRunsOfNStepsEqualOneOf2N) {
  constexpr int n = 17;  // crosses the end of the first epoch (12 batches)
  run_state whole = fresh();
  train(whole, 2 * n);

  checkpoint_test::temp_dir dir;
  std::vector<float> first_losses;
  {
    run_state first = fresh();
    train(first, n);
    first_losses = first.losses;
    io::checkpoint_manager mgr(dir.path());
    io::snapshot s(first.step);
    s.add("params", first.params).add("opt_state", first.opt).set_key(first.key).set("data", first.data.position().to_json());
    mgr.save(std::move(s));
    first.params.w1[0] = 1e9f;  // the saver holds its own copy
  }  // the manager waits for its save

  run_state second = fresh();
  second.params.w1[0] = 42.0f;  // initialisation differs from what is restored
  io::checkpoint_manager mgr(dir.path());
  const auto last = mgr.restore_latest();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->step, static_cast<std::uint64_t>(n));
  last->load(io::slot("params", second.params), io::slot("opt_state", second.opt));
  second.key = last->key();
  second.data.restore(td::stream_position::from_json(last->get("data")));
  second.step = last->step;
  EXPECT_EQ(std::get<0>(second.opt)[0], n);  // adam's count
  train(second, n);

  first_losses.insert(first_losses.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(first_losses, whole.losses);
  EXPECT_EQ(bytes_of(second.params), bytes_of(whole.params));
  EXPECT_EQ(bytes_of(second.opt), bytes_of(whole.opt));
  EXPECT_EQ(second.key, whole.key);
  EXPECT_EQ(second.data.position(), whole.data.position());
  EXPECT_LT(whole.losses.back(), whole.losses.front());  // it does train
}

}  // namespace
