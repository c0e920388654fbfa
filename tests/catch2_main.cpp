#define CATCH_CONFIG_RUNNER
#include "catch2_run.hpp"

int main(int argc, char** argv) { return kiln::test::run_catch2(argc, argv); }
