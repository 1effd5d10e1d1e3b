#pragma once
// Optimizers with optax's formulas: init / update / apply_updates on any tree of parameters, traced
// inside a jitted train step or jitted on the spot for tensors (optim/base.hpp).
#include "tessel/optim/adam.hpp"
#include "tessel/optim/adamw.hpp"
#include "tessel/optim/base.hpp"
#include "tessel/optim/chain.hpp"
#include "tessel/optim/clip.hpp"
#include "tessel/optim/injected.hpp"
#include "tessel/optim/schedule.hpp"
#include "tessel/optim/sgd.hpp"
