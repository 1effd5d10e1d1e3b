#pragma once
// The whole public API of tessel.
#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/print.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/random.hpp"
