#pragma once
// Layers, losses and initialisers.
#include "tessel/nn/init.hpp"
#include "tessel/nn/layers.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/nn/transformer.hpp"
