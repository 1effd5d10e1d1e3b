#pragma once
// Operations users call, written from primitives (differentiable, batchable and fusible like them).
#include "tessel/prim/all.hpp"
#include "tessel/ops/activations.hpp"
#include "tessel/ops/matmul.hpp"
#include "tessel/ops/one_hot.hpp"
#include "tessel/ops/reductions.hpp"
#include "tessel/ops/softmax.hpp"
