#pragma once
// tessel::random: JAX's threefry PRNG (keys, split, fold_in, bits) and its samplers, bit-exact with
// jax.random in its default partitionable mode. See random/key.hpp and random/distributions.hpp (on the
// host), random/traced.hpp (inside a traced program: uniform, bernoulli, gumbel, categorical, fold_in).
#include "tessel/random/distributions.hpp"
#include "tessel/random/key.hpp"
#include "tessel/kernels/threefry.hpp"
#include "tessel/random/traced.hpp"
