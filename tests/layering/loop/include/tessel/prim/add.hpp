#pragma once
// A folder header that includes the top-level header gathering its folder: the loop check_layering rejects.
#include "tessel/lax.hpp"
