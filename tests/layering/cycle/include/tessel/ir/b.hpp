#pragma once
#include "tessel/ir/a.hpp"
