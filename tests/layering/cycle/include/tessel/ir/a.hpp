#pragma once
// Two headers of one folder that include each other: a loop check_layering rejects (the layering alone,
// which compares folders, cannot see it).
#include "tessel/ir/b.hpp"
