// The oracle binary of the libraries written in the DSL: nn layers, activations and losses, optimizers and
// schedules, random samplers and keys (library_cases.cpp).
#include "oracle.hpp"

namespace tessel::oracle {
void library_cases(suite&);
}

int main(int argc, char** argv) { return tessel::oracle::run_suite(argc, argv, nullptr, tessel::oracle::library_cases); }
