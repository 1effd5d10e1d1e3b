#pragma once
#include "tessel/prim/add.hpp"
