// A program outside the zeus tree, built against the installed package.
#include <iostream>

#include "zeus/device/discovery.hpp"

int main() {
  const zeus::Gpus& gpus = zeus::get_gpus();
  std::cout << gpus.size() << " GPU(s): " << (gpus.empty() ? "none" : gpus.at(0).name()) << "\n";
  return gpus.empty() ? 1 : 0;
}
