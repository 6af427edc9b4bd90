#include <iostream>

#include "tools/cli.h"

int main(int argc, char** argv) { return ncclwatch::tools::RunCli(argc, argv, std::cout, std::cerr); }
